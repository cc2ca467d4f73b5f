import type { AppDeps } from '../context.ts';
import type { Worker } from '../jobs/worker.ts';
import { registerAddressJobs } from './activation.ts';
import { registerDomainJobs } from '../domains/verify.ts';

/** Background work of addresses and custom domains: activation, DNS checks, rechecks, removal. */
export function registerAddressTasks(worker: Worker, deps: AppDeps): void {
  registerAddressJobs(worker, deps);
  registerDomainJobs(worker, deps);
}
