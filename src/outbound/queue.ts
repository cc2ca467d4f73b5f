import type { Kysely } from 'kysely';
import type { AppDeps } from '../context.ts';
import type { DB } from '../db/schema.ts';
import type { OutboundKind } from './outbound.schema.ts';
import { iso } from '../time.ts';
import { seal } from './seal.ts';

export const DELIVER_TASK = 'outbound.deliver';
export const SYSTEM_MAIL_PURPOSE = 'system-mail';

export interface OutboundMessage {
  id: string;
  kind: OutboundKind;
  mailboxId: string | null;
  accountId: string | null;
  envelopeFrom: string;
  messageId: string;
  /** A sent email's message.eml blob… */
  rawSha256?: string;
  /** …or the bytes themselves (system mail: sealed at rest). */
  raw?: Buffer;
  recipients: string[];
}

export interface DeliverPayload {
  message_id: string;
  address: string;
}

/**
 * Queues one message for delivery inside the caller's transaction (the outbox): the message row,
 * one `queued` row per recipient, and one durable delivery job per recipient. Nothing leaves before
 * the transaction commits; a crash after the commit leaves the jobs to the next worker.
 */
export async function queueOutbound(deps: AppDeps, trx: Kysely<DB>, m: OutboundMessage): Promise<void> {
  const at = iso(deps.now());
  await trx
    .insertInto('outbound_messages')
    .values({
      id: m.id,
      kind: m.kind,
      mailbox_id: m.mailboxId,
      account_id: m.accountId,
      envelope_from: m.envelopeFrom,
      message_id: m.messageId,
      raw_sha256: m.rawSha256 ?? null,
      sealed_raw: m.raw ? seal(deps.secret, SYSTEM_MAIL_PURPOSE, m.raw) : null,
      created_at: at,
    })
    .execute();
  const recipients = [...new Set(m.recipients.map((r) => r.toLowerCase()))];
  await trx
    .insertInto('outbound_recipients')
    .values(recipients.map((address, position) => ({ message_id: m.id, address, position, status: 'queued' as const, attempts: 0, last_reply: null, route: null, attempt_started_at: null, sent_at: null, updated_at: at })))
    .execute();
  for (const address of recipients) {
    const payload: DeliverPayload = { message_id: m.id, address };
    await deps.jobs.enqueue(trx, DELIVER_TASK, payload, { uniqueKey: `outbound:${m.id}:${address}`, maxAttempts: DELIVERY_MAX_ATTEMPTS });
  }
}

/**
 * Attempts per recipient before a temporary failure becomes `failed`. With the backoff in
 * deliver.ts (1 min doubling, capped at 2 h) that is a little over four days, as MTAs usually keep mail.
 */
export const DELIVERY_MAX_ATTEMPTS = 56;
