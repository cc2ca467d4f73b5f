import { newId } from '../ids.ts';

// Ids of this feature's rows. The shared prefix list stays untouched: the ULID part comes from the
// same generator, the prefix is ours (`pub_` publication, `sbd_` bundle, `sat_` attempt, `sec_` code, `sdm_` custom domain).
export type SitePrefix = 'pub' | 'sbd' | 'sat' | 'sec' | 'sdm';

export function siteId(prefix: SitePrefix): string {
  return `${prefix}_${newId('job').slice(4)}`;
}
