import type { Kysely } from 'kysely';
import type { DB } from '../db/schema.ts';

// The sites server caches which publication and bundle a host serves (a database read per request
// would cost more than serving a small file). Changes made in this process drop that cache at once;
// other nodes notice within the cache's time to live (server/site-cache.ts). Listeners are kept per
// database handle, so two apps in one process (tests) never see each other's changes.

const listeners = new WeakMap<Kysely<DB>, Set<() => void>>();

export function onSitesChanged(db: Kysely<DB>, fn: () => void): () => void {
  let set = listeners.get(db);
  if (!set) listeners.set(db, (set = new Set()));
  set.add(fn);
  return () => set!.delete(fn);
}

/** Call after a commit that changes what a host serves (state, bundle, slug, access settings). */
export function sitesChanged(db: Kysely<DB>): void {
  for (const fn of listeners.get(db) ?? []) fn();
}
