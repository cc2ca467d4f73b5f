import type { Kysely } from 'kysely';
import type { RequestCtx } from '../context.ts';
import type { DB, EventsTable } from '../db/schema.ts';
import type { DeliveryStatus, WebhookDeliveriesTable, WebhookAttemptsTable, WebhooksTable } from './webhooks.schema.ts';
import { AppError } from '../errors.ts';
import { assertMutable } from '../auth/access.ts';
import { loadMailbox } from '../mailboxes/mailboxes.service.ts';
import { recordActivity } from '../activity/activity.service.ts';
import { cancelQueuedJobs } from '../jobs/queue.ts';
import { decodeCursor, toPage, type Page } from '../http/cursor.ts';
import { parseTargetUrl, resolveTarget, SafeFetchError } from '../net/safe-fetch.ts';
import { webhookRuntime } from '../events/runtime.ts';
import { eventsId } from '../events/ids.ts';
import { iso } from '../time.ts';
import { newId } from '../ids.ts';
import { encryptSecret, generateSigningSecret } from './secrets.ts';
import { queueWebhookDeliveries, RETRY_TASK } from './outbox.ts';

// Webhook settings of a mailbox (mailbox-admin): one webhook per mailbox; the signing secret is
// shown once, when it is made (a new URL or rotate_secret); a new URL, a rotation or a delete
// cancels the deliveries still waiting (an attempt already under way may finish).

/** A public HTTPS URL (COMPAT.md rules), checked by resolving it as a delivery would. */
async function checkUrl(ctx: RequestCtx, raw: string): Promise<string> {
  const rt = ctx.events?.webhooks ?? webhookRuntime(ctx);
  try {
    const url = parseTargetUrl(raw.trim());
    await resolveTarget(url, { resolver: rt.resolver, allowPrivate: rt.allowPrivate });
    return url.href;
  } catch (err) {
    if (err instanceof SafeFetchError) throw new AppError('INVALID_EMAIL_WEBHOOK', `webhook_url: ${err.message}.`, { field: 'webhook_url', reason: err.kind });
    throw err;
  }
}

async function cancelWaiting(trx: Kysely<DB>, webhookId: string, now: Date, why: string): Promise<number> {
  const waiting = await trx.selectFrom('webhook_deliveries').select(['id', 'job_id']).where('webhook_id', '=', webhookId).where('status', 'in', ['pending', 'retrying']).execute();
  if (!waiting.length) return 0;
  for (let i = 0; i < waiting.length; i += 500) {
    const chunk = waiting.slice(i, i + 500);
    await trx
      .updateTable('webhook_deliveries')
      .set({ status: 'cancelled', last_error: why, next_attempt_at: null, finished_at: iso(now), updated_at: iso(now), job_id: null })
      .where('id', 'in', chunk.map((w) => w.id))
      .where('status', 'in', ['pending', 'retrying'])
      .execute();
    await cancelQueuedJobs(trx, RETRY_TASK, chunk.map((w) => w.job_id).filter((j): j is string => j !== null), now);
  }
  return waiting.length;
}

/**
 * Serializes webhook changes of one mailbox (Postgres; SQLite has one writer): two first PUTs
 * would otherwise both find no webhook and race to insert, the loser failing on the unique index.
 */
async function lockMailbox(ctx: RequestCtx, trx: Kysely<DB>, mailboxId: string): Promise<void> {
  if (ctx.dialect === 'postgres') await trx.selectFrom('mailboxes').select('id').where('id', '=', mailboxId).forUpdate().execute();
}

function findWebhook(db: Kysely<DB>, mailboxId: string): Promise<WebhooksTable | undefined> {
  return db.selectFrom('webhooks').selectAll().where('mailbox_id', '=', mailboxId).executeTakeFirst();
}

export async function getWebhook(ctx: RequestCtx, accountId: string | undefined, mailboxId: string): Promise<WebhooksTable | null> {
  const { mailbox } = await loadMailbox(ctx, accountId, mailboxId, 'admin');
  return (await findWebhook(ctx.db, mailbox.id)) ?? null;
}

export interface PutWebhookInput {
  accountId?: string;
  mailboxId: string;
  url: string;
  rotateSecret: boolean;
  reason: string | null;
}

/** Sets the webhook; `secret` is the new signing secret when one was made, else null. */
export async function putWebhook(ctx: RequestCtx, input: PutWebhookInput): Promise<{ webhook: WebhooksTable; secret: string | null }> {
  const { access, mailbox } = await loadMailbox(ctx, input.accountId, input.mailboxId, 'admin');
  assertMutable(access);
  const url = await checkUrl(ctx, input.url);
  const now = ctx.now();
  let secret: string | null = null;
  await ctx.db.transaction().execute(async (trx) => {
    await lockMailbox(ctx, trx, mailbox.id);
    const current = await findWebhook(trx, mailbox.id);
    if (current && current.url === url && !input.rotateSecret) return;
    secret = generateSigningSecret();
    const id = current?.id ?? eventsId('whk');
    const ciphertext = encryptSecret(ctx.secret, id, secret);
    if (current) {
      await trx.updateTable('webhooks').set({ url, secret_ciphertext: ciphertext, secret_created_at: iso(now), updated_at: iso(now) }).where('id', '=', id).execute();
      await cancelWaiting(trx, id, now, current.url === url ? 'cancelled: the signing secret was rotated' : 'cancelled: the webhook URL changed');
    } else {
      await trx
        .insertInto('webhooks')
        .values({ id, mailbox_id: mailbox.id, account_id: mailbox.account_id, url, secret_ciphertext: ciphertext, secret_created_at: iso(now), created_at: iso(now), updated_at: iso(now), dispatch_job_id: null, dispatch_until: null })
        .execute();
    }
    const action = !current ? 'email.webhook.create' : current.url === url ? 'email.webhook.rotate_secret' : 'email.webhook.update';
    await recordActivity(trx, ctx.actor, now, { accountId: mailbox.account_id, action, targetType: 'mailbox', targetId: mailbox.id, reason: input.reason });
  });
  return { webhook: (await findWebhook(ctx.db, mailbox.id))!, secret };
}

export async function deleteWebhook(ctx: RequestCtx, input: { accountId?: string; mailboxId: string; reason: string | null }): Promise<{ deleted: true; id: string }> {
  const { access, mailbox } = await loadMailbox(ctx, input.accountId, input.mailboxId, 'admin');
  assertMutable(access);
  const now = ctx.now();
  await ctx.db.transaction().execute(async (trx) => {
    await lockMailbox(ctx, trx, mailbox.id);
    const current = await findWebhook(trx, mailbox.id);
    if (!current) return;
    await cancelWaiting(trx, current.id, now, 'cancelled: the webhook was deleted');
    await trx.deleteFrom('webhooks').where('id', '=', current.id).execute();
    await recordActivity(trx, ctx.actor, now, { accountId: mailbox.account_id, action: 'email.webhook.delete', targetType: 'mailbox', targetId: mailbox.id, reason: input.reason });
  });
  return { deleted: true, id: mailbox.id };
}

export interface DeliveryWithAttempts extends WebhookDeliveriesTable {
  attemptLog: WebhookAttemptsTable[];
}

/** The mailbox's deliveries, newest first, each with its attempts. */
export async function listDeliveries(
  ctx: RequestCtx,
  input: { accountId?: string; mailboxId: string; limit: number; cursor?: string; status?: DeliveryStatus },
): Promise<Page<DeliveryWithAttempts>> {
  const { mailbox } = await loadMailbox(ctx, input.accountId, input.mailboxId, 'admin');
  const filters = { mailbox: mailbox.id, status: input.status };
  let q = ctx.db.selectFrom('webhook_deliveries').selectAll().where('mailbox_id', '=', mailbox.id);
  if (input.status) q = q.where('status', '=', input.status);
  if (input.cursor) {
    const [lastId] = decodeCursor(ctx.secret, input.cursor, 'webhook_deliveries', filters);
    q = q.where('id', '<', String(lastId));
  }
  const rows = await q.orderBy('id', 'desc').limit(input.limit + 1).execute();
  const page = toPage(rows, input.limit, (r) => [r.id], { secret: ctx.secret, list: 'webhook_deliveries', filters });
  const ids = page.items.map((d) => d.id);
  const attempts = ids.length ? await ctx.db.selectFrom('webhook_attempts').selectAll().where('delivery_id', 'in', ids).orderBy('attempt').execute() : [];
  return { ...page, items: page.items.map((d) => ({ ...d, attemptLog: attempts.filter((a) => a.delivery_id === d.id) })) };
}

/**
 * Sends a `webhook.test` event to the mailbox's webhook only (not to the live channel): one
 * delivery, signed and retried like any other, so its attempts show in the delivery log. The
 * dashboard's "Send test event" and `POST …/email/webhook/test` both call this.
 */
export async function sendTestEvent(ctx: RequestCtx, input: { accountId?: string; mailboxId: string }): Promise<{ event: { id: string; type: 'webhook.test'; created_at: string }; delivery: DeliveryWithAttempts }> {
  const { access, mailbox } = await loadMailbox(ctx, input.accountId, input.mailboxId, 'admin');
  assertMutable(access);
  const hook = await findWebhook(ctx.db, mailbox.id);
  if (!hook) throw new AppError('EMAIL_WEBHOOK_NOT_FOUND', 'Set a webhook URL first.', { mailbox_id: mailbox.id });
  const now = ctx.now();
  const id = newId('evt');
  const body = { id, type: 'webhook.test', created_at: iso(now), data: { mailbox_id: mailbox.id, account_id: mailbox.account_id, test: true } };
  const row = { id, type: 'webhook.test', account_id: mailbox.account_id, mailbox_id: mailbox.id, payload: JSON.stringify(body), created_at: iso(now) } as unknown as EventsTable;
  const [queued] = await ctx.db.transaction().execute(async (trx) => {
    await trx.insertInto('events').values(row).execute();
    return queueWebhookDeliveries(ctx, trx, [row]);
  });
  // Gone meanwhile (the webhook was removed in between): nothing was queued.
  if (!queued) throw new AppError('EMAIL_WEBHOOK_NOT_FOUND', 'Set a webhook URL first.', { mailbox_id: mailbox.id });
  // By its id: webhook_deliveries has no index on event_id, and keeps every delivery of its retention window.
  const delivery = await ctx.db.selectFrom('webhook_deliveries').selectAll().where('id', '=', queued.id).executeTakeFirstOrThrow();
  return { event: { id, type: 'webhook.test', created_at: body.created_at }, delivery: { ...delivery, attemptLog: [] } };
}
