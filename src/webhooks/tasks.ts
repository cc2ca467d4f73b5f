import { performance } from 'node:perf_hooks';
import { z } from 'zod';
import type { AppDeps } from '../context.ts';
import type { JobsTable } from '../db/schema.ts';
import type { Worker } from '../jobs/worker.ts';
import { PermanentJobError } from '../jobs/worker.ts';
import { webhookRuntime, type WebhookRuntime } from '../events/runtime.ts';
import { iso } from '../time.ts';
import { LiveHub } from '../live/hub.ts';
import { sweepLiveTokens } from '../live/tokens.ts';
import { attemptDelivery } from './deliver.ts';
import { DISPATCH_TASK, RETRY_TASK } from './outbox.ts';

// First attempts go out one at a time per webhook, in event order: a dispatch job takes the
// webhook's dispatch lease (`dispatch_job_id`), delivers every pending first attempt oldest first,
// then gives the lease back and looks once more, so an event committed while the lease was held
// (whose own dispatch job found it taken and ended) is never stranded. A dispatch job that crashed
// is run again by the queue and takes its own lease back. Retries are independent jobs per delivery,
// queued by the attempt that failed, so a receiver that is down never holds up first attempts for
// long and one slow event never blocks another's retry.

export const SWEEP_TASK = 'webhooks.sweep';
const LEASE_MS = 120_000;
/** A dispatch job hands over to a fresh one after this long (well inside the queue's job lease). */
const DISPATCH_SLICE_MS = 30_000;
const KEEP_DELIVERIES_MS = 30 * 86_400_000;

const DispatchPayload = z.object({ webhook_id: z.string() });
const RetryPayload = z.object({ delivery_id: z.string() });

async function acquire(deps: AppDeps, webhookId: string, jobId: string): Promise<boolean> {
  const now = deps.now();
  const res = await deps.db
    .updateTable('webhooks')
    .set({ dispatch_job_id: jobId, dispatch_until: iso(now.getTime() + LEASE_MS) })
    .where('id', '=', webhookId)
    .where((eb) => eb.or([eb('dispatch_job_id', 'is', null), eb('dispatch_job_id', '=', jobId), eb('dispatch_until', '<', iso(now))]))
    .executeTakeFirst();
  return Number(res.numUpdatedRows) === 1;
}

async function release(deps: AppDeps, webhookId: string, jobId: string): Promise<void> {
  await deps.db.updateTable('webhooks').set({ dispatch_job_id: null, dispatch_until: null }).where('id', '=', webhookId).where('dispatch_job_id', '=', jobId).execute();
}

function nextPending(deps: AppDeps, webhookId: string) {
  return deps.db.selectFrom('webhook_deliveries').selectAll().where('webhook_id', '=', webhookId).where('status', '=', 'pending').orderBy('id').limit(1).executeTakeFirst();
}

export async function dispatch(deps: AppDeps, rt: WebhookRuntime, webhookId: string, jobId: string): Promise<void> {
  const started = performance.now();
  for (;;) {
    if (!(await acquire(deps, webhookId, jobId))) return;
    let handOver = false;
    try {
      for (let d = await nextPending(deps, webhookId); d; d = await nextPending(deps, webhookId)) {
        await attemptDelivery(deps, rt, d);
        if (performance.now() - started > DISPATCH_SLICE_MS) {
          handOver = true;
          break;
        }
        await deps.db.updateTable('webhooks').set({ dispatch_until: iso(deps.now().getTime() + LEASE_MS) }).where('id', '=', webhookId).where('dispatch_job_id', '=', jobId).execute();
      }
    } finally {
      await release(deps, webhookId, jobId);
    }
    // Queued after the release, so that the fresh job finds the lease free.
    if (handOver) {
      await deps.jobs.enqueue(deps.db, DISPATCH_TASK, { webhook_id: webhookId });
      return;
    }
    if (!(await nextPending(deps, webhookId))) return;
  }
}

export async function retryDelivery(deps: AppDeps, rt: WebhookRuntime, deliveryId: string): Promise<void> {
  const d = await deps.db.selectFrom('webhook_deliveries').selectAll().where('id', '=', deliveryId).executeTakeFirst();
  if (!d || d.status !== 'retrying') return;
  await attemptDelivery(deps, rt, d);
}

/** Old delivery logs and used tickets go; stale live-connection rows of dead nodes too. */
export async function sweepEvents(deps: AppDeps): Promise<void> {
  const now = deps.now();
  const old = deps.db.selectFrom('webhook_deliveries').select('id').where('finished_at', '<', iso(now.getTime() - KEEP_DELIVERIES_MS));
  await deps.db.deleteFrom('webhook_attempts').where('delivery_id', 'in', old).execute();
  await deps.db.deleteFrom('webhook_deliveries').where('finished_at', '<', iso(now.getTime() - KEEP_DELIVERIES_MS)).execute();
  await sweepLiveTokens(deps.db, now);
  await LiveHub.sweep(deps.db, now);
}

export function registerEventTasks(worker: Worker, deps: AppDeps): void {
  const rt = () => deps.events?.webhooks ?? (fallback ??= webhookRuntime(deps));
  let fallback: WebhookRuntime | undefined;
  worker.register(DISPATCH_TASK, {
    handler: async (payload: unknown, job: JobsTable) => {
      const p = DispatchPayload.safeParse(payload);
      if (!p.success) throw new PermanentJobError(`bad ${DISPATCH_TASK} payload`);
      await dispatch(deps, rt(), p.data.webhook_id, job.id);
    },
  });
  worker.register(RETRY_TASK, {
    handler: async (payload: unknown) => {
      const p = RetryPayload.safeParse(payload);
      if (!p.success) throw new PermanentJobError(`bad ${RETRY_TASK} payload`);
      await retryDelivery(deps, rt(), p.data.delivery_id);
    },
  });
  worker.register(SWEEP_TASK, { handler: () => sweepEvents(deps), leaseMs: 10 * 60_000 });
  worker.every(SWEEP_TASK, 60 * 60_000);
}
