import { z } from 'zod';
import { named, Pagination, Timestamp } from '../http/contract.ts';

// Response schemas of a mailbox's webhook and its delivery log (surface R).

export const Webhook = named(
  'Webhook',
  z.object({
    url: z.string(),
    event: z.literal('email.received'),
    mailbox_id: z.string(),
    created_at: Timestamp,
    updated_at: Timestamp,
    secret_created_at: Timestamp,
    signing_secret: z.string().optional().describe('whsec_…; only in the answer that made it (new URL or rotate_secret=true)'),
  }),
  "The mailbox's email.received webhook. Deliveries are signed with the Standard Webhooks scheme (see `webhooks` in this document).",
  {
    url: 'https://hooks.example.com/cubby',
    event: 'email.received',
    mailbox_id: 'bkt_01JD2Q9K3M4N5P6Q7R8S9T0V1W',
    created_at: '2026-11-24T10:00:00.000Z',
    updated_at: '2026-11-24T10:00:00.000Z',
    secret_created_at: '2026-11-24T10:00:00.000Z',
    signing_secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
  },
);

export const WebhookDelivery = named(
  'WebhookDelivery',
  z.object({
    id: z.string(),
    event_id: z.string(),
    event_type: z.string(),
    status: z.enum(['pending', 'retrying', 'succeeded', 'failed', 'cancelled']),
    attempt_count: z.number().int(),
    next_attempt_at: Timestamp.nullable(),
    last_status_code: z.number().int().nullable(),
    last_error: z.string().nullable(),
    created_at: Timestamp,
    finished_at: Timestamp.nullable(),
    attempts: z.array(
      z.object({
        attempt: z.number().int(),
        url: z.string(),
        started_at: Timestamp,
        duration_ms: z.number(),
        status_code: z.number().int().nullable(),
        outcome: z.enum(['succeeded', 'retry', 'failed']),
        error: z.string().nullable(),
        next_attempt_at: Timestamp.nullable(),
      }),
    ),
  }),
  'One event on its way to the webhook, with every attempt.',
);

export const WebhookOne = z.object({ webhook: Webhook.nullable() });
export const DeliveryList = z.object({ deliveries: z.array(WebhookDelivery), pagination: Pagination });

export const WebhookTestSent = z.object({
  event: z.object({ id: z.string(), type: z.literal('webhook.test'), created_at: Timestamp }),
  delivery: WebhookDelivery.describe('The queued delivery (pending); follow it in the delivery log'),
});
