import type { WebhooksTable } from './webhooks.schema.ts';
import type { DeliveryWithAttempts } from './webhooks.service.ts';

/** The webhook as the API shows it; `signing_secret` only in the answer that made it. */
export function presentWebhook(w: WebhooksTable, secret: string | null = null) {
  return {
    url: w.url,
    event: 'email.received' as const,
    mailbox_id: w.mailbox_id,
    created_at: w.created_at,
    updated_at: w.updated_at,
    secret_created_at: w.secret_created_at,
    ...(secret ? { signing_secret: secret } : {}),
  };
}

/** A delivery with its attempt log (status, latency, error per attempt). */
export function presentDelivery(d: DeliveryWithAttempts) {
  return {
    id: d.id,
    event_id: d.event_id,
    event_type: d.event_type,
    status: d.status,
    attempt_count: d.attempts,
    next_attempt_at: d.status === 'retrying' || d.status === 'pending' ? d.next_attempt_at : null,
    last_status_code: d.last_status_code,
    last_error: d.last_error,
    created_at: d.created_at,
    finished_at: d.finished_at,
    attempts: d.attemptLog.map((a) => ({
      attempt: a.attempt,
      url: a.url,
      started_at: a.started_at,
      duration_ms: a.duration_ms,
      status_code: a.status_code,
      outcome: a.outcome,
      error: a.error,
      next_attempt_at: a.next_attempt_at,
    })),
  };
}
