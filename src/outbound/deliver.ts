import { sql } from 'kysely';
import type { AppDeps } from '../context.ts';
import type { JobsTable } from '../db/schema.ts';
import type { OutboundMessagesTable, OutboundRecipientsTable, RecipientStatus } from './outbound.schema.ts';
import { RetryJobAt } from '../jobs/worker.ts';
import { iso } from '../time.ts';
import { unseal } from './seal.ts';
import { SYSTEM_MAIL_PURPOSE, type DeliverPayload } from './queue.ts';
import { deliverLocal } from './local-delivery.ts';
import { deliverRemote, type RemoteOptions } from './remote-delivery.ts';
import { dkimKeyFor } from './dkim.ts';
import type { Outcome } from './outcome.ts';

const FINAL = new Set<RecipientStatus>(['sent', 'failed', 'bounced']);

/** Delay before retry `attempt` (1-based): 1 min doubling, capped at 2 h, ±10 % so retries spread. */
export function deliveryBackoffMs(attempt: number): number {
  const base = Math.min(2 * 3_600_000, 60_000 * 2 ** Math.min(Math.max(attempt - 1, 0), 12));
  return Math.round(base * (0.9 + Math.random() * 0.2));
}

/**
 * The `outbound.deliver` job: one attempt for one recipient. Our own addresses are stored through
 * the inbound pipeline; others go to the relay or the recipient's MX. The outcome is recorded with
 * the reply; a temporary failure is `deferred` and retried with backoff until the attempts run out
 * (`failed`). Re-running a finished recipient does nothing, so a job that runs twice sends once.
 */
export async function deliverOne(deps: AppDeps, remote: Omit<RemoteOptions, 'relayUrl'>, payload: DeliverPayload, job: JobsTable): Promise<void> {
  const row = await deps.db
    .selectFrom('outbound_recipients')
    .innerJoin('outbound_messages', 'outbound_messages.id', 'outbound_recipients.message_id')
    .selectAll('outbound_recipients')
    .select(['outbound_messages.kind', 'outbound_messages.envelope_from', 'outbound_messages.message_id as rfc_message_id', 'outbound_messages.raw_sha256', 'outbound_messages.sealed_raw'])
    .where('outbound_recipients.message_id', '=', payload.message_id)
    .where('outbound_recipients.address', '=', payload.address)
    .executeTakeFirst();
  if (!row || FINAL.has(row.status)) return;
  try {
    await attemptDelivery(deps, remote, row, job);
  } catch (err) {
    // An unexpected fault (database, blob store): the worker retries the job; on the last attempt
    // the recipient must not stay `queued` forever.
    if (!(err instanceof RetryJobAt) && job.attempts >= job.max_attempts) {
      await record(deps, row, { status: 'failed', reply: `gave up after ${job.attempts} attempts: internal error`, route: row.route ?? 'local' }, job.attempts);
    }
    throw err;
  }
}

type Row = OutboundRecipientsTable & Pick<OutboundMessagesTable, 'kind' | 'envelope_from' | 'raw_sha256' | 'sealed_raw'> & { rfc_message_id: string };

async function attemptDelivery(deps: AppDeps, remote: Omit<RemoteOptions, 'relayUrl'>, row: Row, job: JobsTable): Promise<void> {
  const raw = await loadRaw(deps, row);
  if (!raw) return record(deps, row, { status: 'failed', reply: 'message content is no longer stored', route: 'local' }, job.attempts);

  let outcome = await deliverLocal(deps, { raw, address: row.address, envelopeFrom: row.envelope_from, messageId: row.rfc_message_id });
  if (!outcome) {
    // Committed before the remote transaction starts: a crash from here until `sent` is recorded
    // leaves `sending`, and the next attempt knows it resends (docs/sending.md, "Exactly once").
    const interrupted = row.status === 'sending';
    await deps.db
      .updateTable('outbound_recipients')
      .set({ status: 'sending', attempt_started_at: iso(deps.now()), attempts: job.attempts, updated_at: iso(deps.now()) })
      .where('message_id', '=', row.message_id)
      .where('address', '=', row.address)
      .execute();
    const domain = row.envelope_from.slice(row.envelope_from.lastIndexOf('@') + 1);
    outcome = await deliverRemote({ ...remote, relayUrl: deps.config.outbound.relayUrl }, { raw, address: row.address, envelopeFrom: row.envelope_from, dkim: await dkimKeyFor(deps, domain) });
    if (interrupted) outcome = { ...outcome, reply: `${outcome.reply} (resent: an earlier attempt was interrupted)`.slice(0, 500) };
  }
  if (outcome.status === 'deferred' && job.attempts >= job.max_attempts) {
    outcome = { ...outcome, status: 'failed', reply: `gave up after ${job.attempts} attempts; last: ${outcome.reply}`.slice(0, 500) };
  }
  await record(deps, row, outcome, job.attempts);
  if (outcome.status === 'deferred') throw new RetryJobAt(new Date(deps.now().getTime() + deliveryBackoffMs(job.attempts)), outcome.reply);
}

async function loadRaw(deps: AppDeps, m: Pick<OutboundMessagesTable, 'raw_sha256' | 'sealed_raw'>): Promise<Buffer | null> {
  if (m.sealed_raw) return unseal(deps.secret, SYSTEM_MAIL_PURPOSE, m.sealed_raw);
  if (!m.raw_sha256) return null;
  try {
    const chunks: Buffer[] = [];
    for await (const c of await deps.blobs.read(m.raw_sha256)) chunks.push(c as Buffer);
    return Buffer.concat(chunks);
  } catch {
    return null;
  }
}

/** Records one outcome, and the email's `delivery` summary with it, in one transaction. */
async function record(deps: AppDeps, row: OutboundRecipientsTable & Pick<OutboundMessagesTable, 'kind'>, o: Outcome, attempts: number): Promise<void> {
  const at = iso(deps.now());
  await deps.db.transaction().execute(async (trx) => {
    // Recipients of one message finish concurrently: the message row lock makes each summary see
    // the others' committed statuses (otherwise the last writer's summary could miss one).
    if (deps.dialect === 'postgres') await sql`select id from outbound_messages where id = ${row.message_id} for update`.execute(trx);
    await trx
      .updateTable('outbound_recipients')
      .set({ status: o.status, last_reply: o.reply, route: o.route, attempts, sent_at: o.status === 'sent' ? at : null, updated_at: at })
      .where('message_id', '=', row.message_id)
      .where('address', '=', row.address)
      .execute();
    const all = await trx.selectFrom('outbound_recipients').select(['address', 'status']).where('message_id', '=', row.message_id).orderBy('position').execute();
    if (row.kind === 'email') {
      await trx.updateTable('emails').set({ delivery: JSON.stringify(deliverySummary(all)) }).where('id', '=', row.message_id).execute();
    } else if (all.every((r) => FINAL.has(r.status))) {
      // System mail may carry a sign-in code: keep its bytes no longer than needed.
      await trx.updateTable('outbound_messages').set({ sealed_raw: null }).where('id', '=', row.message_id).execute();
    }
  });
}

/**
 * `delivery` of a sent email: per-recipient status (`sending` shows as `queued`), and an overall
 * status: `queued` or `deferred` while any recipient is pending; then `sent` (all), `partially_sent`,
 * `bounced` (all refused) or `failed`.
 */
export function deliverySummary(rows: { address: string; status: RecipientStatus }[]) {
  const recipients: Record<string, string> = {};
  for (const r of rows) recipients[r.address] = r.status === 'sending' ? 'queued' : r.status;
  const statuses = Object.values(recipients);
  let status: string;
  if (statuses.some((s) => s === 'queued' || s === 'deferred')) status = statuses.includes('deferred') ? 'deferred' : 'queued';
  else if (statuses.every((s) => s === 'sent')) status = 'sent';
  else if (statuses.includes('sent')) status = 'partially_sent';
  else if (statuses.every((s) => s === 'bounced')) status = 'bounced';
  else status = 'failed';
  return { status, recipients };
}

