import type { AppDeps } from '../context.ts';
import type { Worker } from '../jobs/worker.ts';
import type { DnsResolver } from '../inbound/authenticate.ts';
import { DELIVER_TASK } from './queue.ts';
import { deliverOne } from './deliver.ts';

export interface OutboundTaskOptions {
  /** DNS for MX lookups (the app's resolver; tests serve their own zone). */
  resolver: DnsResolver;
  /** Port of remote MX hosts (25; tests point it at their own SMTP server). */
  mxPort?: number;
}

/** Lease of a delivery job; one attempt is cut off well before it (remote-delivery.ts). */
const LEASE_MS = 120_000;

export function registerOutboundTasks(worker: Worker, deps: AppDeps, opts: OutboundTaskOptions): void {
  const remote = { resolver: opts.resolver, mxPort: opts.mxPort ?? 25, hostname: deps.config.smtpHostname, allowPrivate: deps.config.outbound.allowPrivateMx, deadlineMs: LEASE_MS - 30_000 };
  worker.register(DELIVER_TASK, {
    handler: (payload, job) => deliverOne(deps, remote, payload, job),
    // Retries are scheduled by the handler (RetryJobAt with deliveryBackoffMs); this covers crashes.
    backoffMs: (attempt) => Math.min(3_600_000, 60_000 * 2 ** Math.min(attempt, 6)),
    leaseMs: LEASE_MS,
  });
}
