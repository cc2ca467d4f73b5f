import type { AppDeps } from '../context.ts';
import type { Worker } from '../jobs/worker.ts';
import { runSync, scheduleSyncs, SCHEDULE_TASK, SYNC_DEADLINE_MS, SYNC_TASK, type SyncPayload } from './sync.ts';

const MINUTE = 60_000;

/** Sync jobs, and the recurring check that queues one for every connection due (CUBBY_GIT_SYNC_INTERVAL_S). */
export function registerGitSyncTasks(worker: Worker, deps: AppDeps): void {
  worker.register(SYNC_TASK, { handler: (payload: SyncPayload) => runSync(deps, payload), leaseMs: SYNC_DEADLINE_MS + 2 * MINUTE });
  worker.register(SCHEDULE_TASK, { handler: async () => void (await scheduleSyncs(deps)), leaseMs: 5 * MINUTE });
  worker.every(SCHEDULE_TASK, Math.min(MINUTE, deps.config.gitSync.intervalMs));
}
