import type { CompiledQuery, Kysely } from 'kysely';
import type { AppDeps } from '../context.ts';
import type { DB, EventsTable } from '../db/schema.ts';
import type { WebhookDeliveriesTable } from './webhooks.schema.ts';
import { eventsId } from '../events/ids.ts';
import { compiledListQuery } from '../db/compiled-query.ts';

export const DISPATCH_TASK = 'webhooks.dispatch';

export interface WebhookTarget {
  id: string;
  mailbox_id: string;
}

/**
 * The webhooks of these mailboxes, for queueWebhookDeliveries. A caller that records events may
 * read them earlier in its transaction, in a statement it sends anyway (src/inbound/store.ts):
 * webhooks are settings, and a change to one that commits meanwhile is as if it came a moment later.
 */
// Read in every group commit of received mail: built once per dialect and mailbox count.
const WEBHOOK_TARGETS = compiledListQuery((db, mailboxIds) => db.selectFrom('webhooks').select(['id', 'mailbox_id']).where('mailbox_id', 'in', mailboxIds), 0);

export function webhookTargets(db: Kysely<DB>, mailboxIds: string[]): CompiledQuery<WebhookTarget> {
  return WEBHOOK_TARGETS.compile(db, [...new Set(mailboxIds)]);
}
export const RETRY_TASK = 'webhooks.retry';

/**
 * Inside the transaction that records events: one pending delivery per event whose mailbox has a
 * webhook, and a dispatch job per webhook to make the first attempts. Both exist exactly when the
 * events do (the outbox); delivery ids are monotonic, so they also give the order of first attempts.
 */
export async function queueWebhookDeliveries(deps: AppDeps, trx: Kysely<DB>, rows: EventsTable[], targets?: WebhookTarget[]): Promise<WebhookDeliveriesTable[]> {
  if (!rows.length) return [];
  const hooks = targets ?? (await trx.executeQuery(webhookTargets(trx, rows.map((r) => r.mailbox_id)))).rows;
  if (!hooks.length) return [];
  const hookOf = new Map(hooks.map((h) => [h.mailbox_id, h.id]));
  const deliveries: WebhookDeliveriesTable[] = [];
  for (const r of rows) {
    const webhookId = hookOf.get(r.mailbox_id);
    if (!webhookId) continue;
    deliveries.push({
      id: eventsId('whd'),
      webhook_id: webhookId,
      mailbox_id: r.mailbox_id,
      account_id: r.account_id,
      event_id: r.id,
      event_type: r.type,
      status: 'pending',
      attempts: 0,
      next_attempt_at: r.created_at,
      last_status_code: null,
      last_error: null,
      job_id: null,
      // The retry window starts when the event happened.
      created_at: r.created_at,
      updated_at: r.created_at,
      finished_at: null,
    });
  }
  // Chunked: a group commit may carry hundreds of events, and statements have a parameter limit.
  for (let i = 0; i < deliveries.length; i += 500) await trx.insertInto('webhook_deliveries').values(deliveries.slice(i, i + 500)).execute();
  for (const webhookId of new Set(deliveries.map((d) => d.webhook_id))) await deps.jobs.enqueue(trx, DISPATCH_TASK, { webhook_id: webhookId });
  return deliveries;
}
