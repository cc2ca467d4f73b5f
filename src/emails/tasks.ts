import type { AppDeps } from '../context.ts';
import type { Worker } from '../jobs/worker.ts';
import { registerLabeler } from '../labels/labeler.ts';
import { createLabelProvider } from '../labels/provider.ts';

/** Background work that follows received email. */
export function registerEmailTasks(worker: Worker, deps: AppDeps, log: { warn: (obj: unknown, msg: string) => void }): void {
  registerLabeler(worker, deps, createLabelProvider(deps.config.labeler, log));
}
