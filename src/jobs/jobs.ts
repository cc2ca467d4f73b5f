import type { Kysely } from 'kysely';
import type { DB } from '../db/schema.ts';
import type { Dialect } from '../db/database.ts';
import { enqueue, type EnqueueOptions } from './queue.ts';
import type { Worker } from './worker.ts';

/** What features use to queue background work. */
export interface Jobs {
  /** Enqueue inside the transaction `db` of the change the job follows. */
  enqueue(db: Kysely<DB>, task: string, payload: unknown, opts?: EnqueueOptions): Promise<string | null>;
  /** The local worker, when this process runs the worker role. */
  readonly worker: Worker | null;
}

export function createJobs(dialect: Dialect, now: () => Date, worker: Worker | null): Jobs {
  return {
    worker,
    async enqueue(db, task, payload, opts) {
      const id = await enqueue(db, dialect, task, payload, now(), opts);
      // SQLite has no NOTIFY: nudge the local worker; if this runs before the commit, its next
      // poll (a quarter second) picks the job up.
      if (id && worker) setImmediate(() => worker.wake());
      return id;
    },
  };
}
