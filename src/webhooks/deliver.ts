import { performance } from 'node:perf_hooks';
import type { AppDeps } from '../context.ts';
import type { WebhookRuntime } from '../events/runtime.ts';
import type { AttemptOutcome, DeliveryStatus, WebhookDeliveriesTable } from './webhooks.schema.ts';
import { safeFetch, SafeFetchError } from '../net/safe-fetch.ts';
import { eventsId } from '../events/ids.ts';
import { iso } from '../time.ts';
import { SERVER_VERSION } from '../version.ts';
import { decryptSecret } from './secrets.ts';
import { signatureHeaders } from './signing.ts';
import { nextAttemptAt, retryAfterSeconds } from './schedule.ts';
import { RETRY_TASK } from './outbox.ts';

// One delivery attempt: POST the event body, signed afresh, to the webhook's current URL through
// the SSRF-safe client; then record the attempt and the delivery's new state in one transaction,
// queueing the retry job there when one is due. COMPAT.md decides the outcome: 2xx delivered;
// network errors, timeouts, 408, 429 and 5xx retried (Retry-After honoured); redirects, other 4xx,
// private destinations and responses over 64 KiB stop.

interface Result {
  outcome: AttemptOutcome;
  statusCode: number | null;
  error: string | null;
  retryAfterS: number | null;
}

function judge(status: number, headers: Record<string, string | string[] | undefined>, now: Date): Result {
  const base = { statusCode: status, retryAfterS: null };
  if (status >= 200 && status < 300) return { ...base, outcome: 'succeeded', error: null };
  if (status >= 300 && status < 400) return { ...base, outcome: 'failed', error: `redirect (${status}) refused: webhooks are not redirected` };
  if (status === 408 || status === 429 || status >= 500) return { ...base, outcome: 'retry', error: `HTTP ${status}`, retryAfterS: retryAfterSeconds(headers['retry-after'], now) };
  return { ...base, outcome: 'failed', error: `HTTP ${status}: the receiver refused the event` };
}

async function send(deps: AppDeps, rt: WebhookRuntime, url: string, secret: string, eventId: string, body: string): Promise<Result> {
  try {
    const res = await safeFetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'user-agent': `Cubby-Webhooks/${SERVER_VERSION}`, ...signatureHeaders(secret, eventId, body, deps.now()) },
      body,
      resolver: rt.resolver,
      allowPrivate: rt.allowPrivate,
      extraCa: rt.extraCa,
      timeoutMs: rt.timeoutMs,
    });
    return judge(res.status, res.headers, deps.now());
  } catch (err) {
    if (err instanceof SafeFetchError) return { outcome: err.retryable ? 'retry' : 'failed', statusCode: null, error: err.message, retryAfterS: null };
    return { outcome: 'retry', statusCode: null, error: 'delivery failed unexpectedly', retryAfterS: null };
  }
}

/** Marks a delivery that can no longer be made (webhook gone, event gone), without an attempt. */
async function close(deps: AppDeps, d: WebhookDeliveriesTable, status: DeliveryStatus, error: string): Promise<void> {
  const now = iso(deps.now());
  await deps.db
    .updateTable('webhook_deliveries')
    .set({ status, last_error: error, next_attempt_at: null, finished_at: now, updated_at: now, job_id: null })
    .where('id', '=', d.id)
    .where('status', '=', d.status)
    .execute();
}

/** Makes the next attempt of a pending or retrying delivery and records it. */
export async function attemptDelivery(deps: AppDeps, rt: WebhookRuntime, d: WebhookDeliveriesTable): Promise<AttemptOutcome | null> {
  const hook = await deps.db
    .selectFrom('webhooks')
    .innerJoin('mailboxes', 'mailboxes.id', 'webhooks.mailbox_id')
    .selectAll('webhooks')
    .where('webhooks.id', '=', d.webhook_id)
    .where('mailboxes.deleted_at', 'is', null)
    .executeTakeFirst();
  if (!hook) {
    await close(deps, d, 'cancelled', 'the webhook or its mailbox was removed');
    return null;
  }
  const event = await deps.db.selectFrom('events').select('payload').where('id', '=', d.event_id).executeTakeFirst();
  if (!event) {
    await close(deps, d, 'failed', 'the event is no longer stored');
    return null;
  }
  let secret: string;
  try {
    secret = decryptSecret(deps.secret, hook.id, hook.secret_ciphertext);
  } catch {
    // Only when CUBBY_SECRET_KEY changed under a stored secret: nothing can be signed until rotation.
    await close(deps, d, 'failed', 'the signing secret cannot be read (the service secret key changed); rotate the webhook secret');
    return null;
  }
  const startedAt = deps.now();
  const t0 = performance.now();
  const r = await send(deps, rt, hook.url, secret, d.event_id, event.payload);
  const durationMs = Math.round(performance.now() - t0);

  const attempt = d.attempts + 1;
  const now = deps.now();
  let status: DeliveryStatus = r.outcome === 'succeeded' ? 'succeeded' : 'failed';
  let next: Date | null = null;
  let error = r.error;
  if (r.outcome === 'retry') {
    next = nextAttemptAt(rt.retry, attempt, new Date(d.created_at), now, r.retryAfterS);
    if (next) status = 'retrying';
    else error = `${error}; gave up after ${attempt} attempts`;
  }
  const finished = status !== 'retrying';
  await deps.db.transaction().execute(async (trx) => {
    // Guarded on the state we read: a delivery cancelled meanwhile stays cancelled (its attempt is
    // still logged), and no other runner can record the same attempt twice.
    const res = await trx
      .updateTable('webhook_deliveries')
      .set({
        status,
        attempts: attempt,
        next_attempt_at: next ? iso(next) : null,
        last_status_code: r.statusCode,
        last_error: error,
        updated_at: iso(now),
        finished_at: finished ? iso(now) : null,
        job_id: null,
      })
      .where('id', '=', d.id)
      .where('status', '=', d.status)
      .where('attempts', '=', d.attempts)
      .executeTakeFirst();
    const applied = Number(res.numUpdatedRows) === 1;
    await trx
      .insertInto('webhook_attempts')
      .values({
        id: eventsId('wha'),
        delivery_id: d.id,
        mailbox_id: d.mailbox_id,
        attempt,
        url: hook.url,
        started_at: iso(startedAt),
        duration_ms: durationMs,
        status_code: r.statusCode,
        error,
        outcome: r.outcome === 'retry' && !next ? 'failed' : r.outcome,
        next_attempt_at: applied && next ? iso(next) : null,
      })
      .execute();
    if (applied && next) {
      const jobId = await deps.jobs.enqueue(trx, RETRY_TASK, { delivery_id: d.id }, { runAt: next, maxAttempts: 5 });
      await trx.updateTable('webhook_deliveries').set({ job_id: jobId }).where('id', '=', d.id).execute();
    }
  });
  // The destination's URL is not logged: receivers often put a token in it.
  const outcome = r.outcome === 'retry' && !next ? 'failed' : r.outcome;
  deps.metrics.webhookAttempts.inc({ outcome });
  deps.log.info(
    { webhook: { id: hook.id, mailbox: d.mailbox_id, delivery: d.id, event: d.event_id, attempt, status: r.statusCode, outcome, error: r.error, ms: durationMs } },
    'webhook attempt',
  );
  return r.outcome;
}
