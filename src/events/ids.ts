import { newId } from '../ids.ts';

/**
 * A prefixed ULID for the event features' own records (webhooks `whk_`, deliveries `whd_`, attempts
 * `wha_`, live connections `cbl_`): the same sortable, monotonic ULID as every other id.
 */
export function eventsId(prefix: 'whk' | 'whd' | 'wha' | 'cbl'): string {
  return `${prefix}_${newId('evt').slice(4)}`;
}
