import { sql } from 'kysely';
import type { RequestCtx } from '../context.ts';
import type { EmailsTable } from '../db/schema.ts';
import { AppError, invalidArgument } from '../errors.ts';
import { newId } from '../ids.ts';
import { assertMutable } from '../auth/access.ts';
import { loadMailbox } from '../mailboxes/mailboxes.service.ts';
import { limitsFor } from '../accounts/limits.service.ts';
import { billingGroupId } from '../accounts/accounts.service.ts';
import { isPaidPlan } from '../accounts/plans.ts';
import { groupUsage } from '../files/files.repo.ts';
import { recordActivity } from '../activity/activity.service.ts';
import { parseMessage } from '../inbound/parse.ts';
import { jsonArray } from '../emails/emails.present.ts';
import { composeMessage } from './compose.ts';
import { sendingBlockedReason } from './sending-state.ts';
import { assertRecipientsAllowed, replyDefault } from './rules.ts';
import { loadAttachments } from './attachments.ts';
import { assertSendRate, takeRecipientAllowance } from './allowance.ts';
import { storeSentEmail } from './store-sent.ts';
import { queueOutbound } from './queue.ts';
import { deliverySummary } from './deliver.ts';
import { assertEmailVerified } from '../accounts/signup.service.ts';

export const MAX_RECIPIENTS = 10;
export const MAX_BODY_BYTES = 1024 * 1024;

export interface SendInput {
  accountId?: string | null;
  mailboxId: string;
  to?: string[];
  cc?: string[];
  subject?: string | null;
  text: string;
  html?: string | null;
  inReplyTo?: string | null;
  attachmentIds?: string[];
  reason?: string | null;
}

const norm = (list: string[] | undefined) => (list ?? []).map((a) => a.trim().toLowerCase());

/** `Re: ` plus the original subject, unless it already starts with a reply prefix. */
export function replySubject(original: string | null): string {
  const s = (original ?? '').trim();
  return /^re:/i.test(s) ? s : `Re: ${s}`;
}

/**
 * Sends a new message or a reply from a mailbox (spec "Send rules"). Checks, in order: write
 * permission and account state, the mailbox's sending state, body sizes, the reply target, the
 * recipients (count, then rules), the attachments; then composes, stores the message under `_email/`
 * as a `sent` email and queues one delivery job per recipient, all in one transaction that also takes
 * the send rate and the monthly recipient allowance. Returns the stored row (delivery `queued`).
 */
export async function sendEmail(ctx: RequestCtx, input: SendInput): Promise<EmailsTable> {
  const { access, mailbox } = await loadMailbox(ctx, input.accountId, input.mailboxId, 'write');
  assertMutable(access);
  const blocked = sendingBlockedReason(mailbox, access.account);
  if (blocked) throw new AppError('EMAIL_SENDING_DISABLED', `This mailbox cannot send email (${blocked}).`, { reason: blocked });
  await assertEmailVerified(ctx.db, ctx.credential.user.id);
  for (const field of ['text', 'html'] as const) {
    const bytes = Buffer.byteLength(input[field] ?? '', 'utf8');
    if (bytes > MAX_BODY_BYTES) throw new AppError('EMAIL_BODY_TOO_LARGE', `${field} is ${bytes} bytes; at most ${MAX_BODY_BYTES}.`, { field, byte_size: bytes, max_bytes: MAX_BODY_BYTES });
  }

  let original: EmailsTable | undefined;
  if (input.inReplyTo) {
    original = /^eml_[A-Za-z0-9]{1,64}$/.test(input.inReplyTo)
      ? await ctx.db.selectFrom('emails').selectAll().where('mailbox_id', '=', mailbox.id).where('id', '=', input.inReplyTo).executeTakeFirst()
      : undefined;
    if (!original) throw new AppError('EMAIL_NOT_FOUND', undefined, { email_id: input.inReplyTo, field: 'in_reply_to' });
    if (original.direction !== 'received') throw new AppError('EMAIL_REPLY_TARGET_INVALID', undefined, { email_id: original.id });
  }

  let to = norm(input.to);
  if (!to.length && original) {
    const fallback = replyDefault(original);
    if (!fallback) throw new AppError('EMAIL_RECIPIENT_REQUIRED', undefined, { field: 'to', in_reply_to: original.id });
    to = [fallback];
  }
  if (!to.length) throw new AppError('EMAIL_RECIPIENT_REQUIRED', 'Give at least one address in `to`.', { field: 'to' });
  to = [...new Set(to)];
  const cc = [...new Set(norm(input.cc))].filter((a) => !to.includes(a));
  if (to.length + cc.length > MAX_RECIPIENTS) throw new AppError('EMAIL_TOO_MANY_RECIPIENTS', undefined, { count: to.length + cc.length, max: MAX_RECIPIENTS });
  const subject = original ? (input.subject?.trim() ? input.subject : replySubject(original.subject)) : input.subject;
  if (!subject?.trim()) throw invalidArgument('subject', 'is required without in_reply_to');

  const recipients = [...to, ...cc];
  await assertRecipientsAllowed(ctx.db, { mailboxId: mailbox.id, accountId: access.account.id, paid: isPaidPlan(access.account.plan) }, recipients);
  const attachments = await loadAttachments(ctx, mailbox.id, input.attachmentIds ?? []);

  const acceptedAt = ctx.now();
  const emailId = newId('eml');
  const references = original ? [...new Set([...jsonArray<string>(original.reference_ids), ...(original.message_id ? [original.message_id] : [])])] : [];
  const composed = await composeMessage({
    from: { address: mailbox.address!, name: mailbox.title },
    to,
    cc,
    subject,
    text: input.text,
    html: input.html ?? null,
    inReplyTo: original?.message_id ?? null,
    references,
    attachments: attachments.map((a) => ({ filename: a.filename, contentType: a.contentType, content: a.content })),
    date: acceptedAt,
    messageIdDomain: mailbox.address!.slice(mailbox.address!.lastIndexOf('@') + 1),
  });
  const parsed = await parseMessage(composed.raw, { deliveredTo: mailbox.address!, receivedAt: acceptedAt });
  const raw = await ctx.blobs.putBuffer(composed.raw);
  const messageJson = await ctx.blobs.putBuffer(Buffer.from(JSON.stringify({ ...parsed.messageJson(), delivered_to: mailbox.address }, null, 2)));
  const limits = limitsFor(access.account);
  const groupId = billingGroupId(access.account);

  return ctx.db.transaction().execute(async (trx) => {
    if (ctx.dialect === 'postgres') await sql`select id from mailboxes where id = ${mailbox.id} for update`.execute(trx);
    await assertSendRate(trx, mailbox.id, ctx.config.outbound.sendRatePerHour, acceptedAt);
    await takeRecipientAllowance(trx, ctx.dialect, groupId, limits, recipients, acceptedAt);
    const row = await storeSentEmail(ctx, trx, ctx.actor, limits, await groupUsage(trx, groupId), {
      emailId,
      mailboxId: mailbox.id,
      fromAddress: mailbox.address!,
      acceptedAt,
      raw,
      messageJson,
      parsed,
      attachments: attachments.map((a) => ({ filename: a.filename, contentType: a.contentType, sha256: a.sha256, byteSize: a.byteSize })),
      // A reply joins the original's conversation; a new message starts its own.
      conversationId: original?.conversation_id ?? emailId,
      threadKey: references[0] ?? composed.messageId,
      delivery: deliverySummary(recipients.map((address) => ({ address, status: 'queued' as const }))),
    });
    await queueOutbound(ctx, trx, { id: emailId, kind: 'email', mailboxId: mailbox.id, accountId: access.account.id, envelopeFrom: mailbox.address!, messageId: composed.messageId, rawSha256: raw.sha256, recipients });
    await recordActivity(trx, ctx.actor, acceptedAt, { accountId: access.account.id, action: 'email.send', targetType: 'email', targetId: emailId, reason: input.reason });
    return row;
  });
}
