import type { AppDeps } from '../context.ts';
import type { Worker } from '../jobs/worker.ts';
import { sweepAgentAccess } from './throttle.ts';

/** Hourly sweep of spent agent-access rows, once per period across all nodes. */
export function registerAgentAccessTasks(worker: Worker, deps: AppDeps): void {
  worker.register('maintenance.agent_access', { handler: async () => sweepAgentAccess(deps.db, deps.now()), leaseMs: 10 * 60_000 });
  worker.every('maintenance.agent_access', 60 * 60_000);
}
