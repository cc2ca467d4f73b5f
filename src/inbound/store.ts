import type { Kysely } from 'kysely';
import type { AppDeps, Actor } from '../context.ts';
import type { DB, EmailsTable } from '../db/schema.ts';
import type { StoredBlob } from '../blobs/blob-store.ts';
import type { AuthSummary } from './authenticate.ts';
import type { AttachmentSummary, ParsedEmail } from './parse-types.ts';
import { MailboxChange } from '../files/mailbox-change.ts';
import { checkContentLimits, writeFileVersion, type GroupUsage } from '../files/files.write.ts';
import { groupUsage } from '../files/files.repo.ts';
import { limitsFor } from '../accounts/limits.service.ts';
import { billingGroupId } from '../accounts/accounts.service.ts';
import { recordEvent } from '../events/events.ts';
import { LABEL_EMAIL_TASK } from '../labels/task.ts';
import { AppError } from '../errors.ts';
import { newId } from '../ids.ts';
import { iso } from '../time.ts';
import { addReceivedUsage } from './usage.ts';
import { emailDirectory } from './layout.ts';

/** One received message for one mailbox, with its blobs already durable in the store. */
export interface InboundDelivery {
  emailId: string;
  mailboxId: string;
  deliveredTo: string;
  receivedAt: Date;
  raw: StoredBlob;
  parsed: ParsedEmail;
  /** message.json for this recipient (delivered_to differs per recipient). */
  messageJson: StoredBlob;
  /** Attachments whose bytes were stored, by sha256; the others count as omitted. */
  storedAttachments: AttachmentSummary[];
  envelope: { mailFrom: string | null; clientIp: string | null; helo: string | null };
  auth: AuthSummary | null;
  spamFlags: string[];
}

const SYSTEM: Actor = { userId: null, apiKeyId: null, agent: null, requestId: null };

/**
 * Stores received messages in one transaction: for each delivery the `_email/…/<id>/` files
 * (message.eml, message.json, attachments) as one mailbox version, the email row, the mailbox
 * counters and monthly usage, a labeling job and an `email.received` event. The caller answers
 * 250 only after this resolves; the blobs were fsynced before.
 */
export async function storeDeliveries(deps: AppDeps, deliveries: InboundDelivery[]): Promise<void> {
  await deps.db.transaction().execute(async (trx) => {
    const usage = new Map<string, GroupUsage>();
    const blobRows = new Map<string, { sha256: string; byte_size: number; md5: string; created_at: string }>();
    const at = iso(deps.now());
    for (const d of deliveries) {
      for (const b of [d.raw, d.messageJson]) blobRows.set(b.sha256, { sha256: b.sha256, byte_size: b.byteSize, md5: b.md5Base64, created_at: at });
      for (const a of d.storedAttachments) blobRows.set(a.sha256, { sha256: a.sha256, byte_size: a.size_bytes, md5: '', created_at: at });
    }
    // md5 is informational for blobs of our own making; keep the first known value.
    await trx.insertInto('blobs').values([...blobRows.values()]).onConflict((oc) => oc.column('sha256').doNothing()).execute();
    for (const d of deliveries) await storeOne(deps, trx, d, usage);
  });
}

async function storeOne(deps: AppDeps, trx: Kysely<DB>, d: InboundDelivery, usageByGroup: Map<string, GroupUsage>): Promise<EmailsTable> {
  const now = d.receivedAt;
  const change = await MailboxChange.begin(trx, deps.dialect, d.mailboxId, { actor: SYSTEM, now, action: 'email.received', ignoreUploadLock: true });
  const account = await trx.selectFrom('accounts').selectAll().where('id', '=', change.accountId).executeTakeFirstOrThrow();
  const limits = limitsFor(account);
  const groupId = billingGroupId(account);
  let group = usageByGroup.get(groupId);
  if (!group) usageByGroup.set(groupId, (group = await groupUsage(trx, groupId)));
  const before = { files: change.currentFiles, storage: change.currentStorage };

  const dir = emailDirectory(d.receivedAt, d.emailId);
  const base = { folder: dir, createdBySystem: 'email', knownNew: true, role: 'source' as const };
  const raw = await writeFileVersion(change, limits, group, { ...base, path: `${dir}/message.eml`, basename: 'message.eml', sha256: d.raw.sha256, byteSize: d.raw.byteSize, mimeType: 'message/rfc822' });
  const json = await writeFileVersion(change, limits, group, { ...base, path: `${dir}/message.json`, basename: 'message.json', sha256: d.messageJson.sha256, byteSize: d.messageJson.byteSize, mimeType: 'application/json' });

  const attachments = [];
  let omitted = d.parsed.omitted_attachment_count + (d.parsed.attachments.length - d.storedAttachments.length);
  for (const a of d.storedAttachments) {
    try {
      checkContentLimits(limits, a.filename, a.content_type, a.size_bytes);
    } catch {
      omitted++;
      continue;
    }
    const folder = `${dir}/attachments`;
    const w = await writeFileVersion(change, limits, group, { ...base, folder, path: `${folder}/${a.filename}`, basename: a.filename, sha256: a.sha256, byteSize: a.size_bytes, mimeType: a.content_type });
    attachments.push({ id: w.file.id, filename: a.filename, content_type: a.content_type, size_bytes: a.size_bytes, version_id: w.version.id, origin: a.disposition, content_id: a.content_id });
  }

  const mailbox = await trx.selectFrom('mailboxes').select(['email_seq']).where('id', '=', d.mailboxId).executeTakeFirstOrThrow();
  const seq = Number(mailbox.email_seq) + 1;
  const p = d.parsed;
  const refs = [...new Set([...p.references, ...p.in_reply_to])];
  const threadKey = p.conversation_hint ?? p.message_id;
  const conversationId = (await findConversation(trx, d.mailboxId, threadKey, refs)) ?? d.emailId;
  const row: EmailsTable = {
    id: d.emailId,
    mailbox_id: d.mailboxId,
    account_id: change.accountId,
    seq,
    direction: 'received',
    conversation_id: conversationId,
    thread_key: threadKey,
    subject: p.subject,
    subject_search: p.subject?.toLowerCase() ?? null,
    from_addresses: JSON.stringify(p.from_addresses),
    sender_address: p.from_addresses[0]?.address.toLowerCase() ?? null,
    to_addresses: JSON.stringify(p.to_addresses),
    cc_addresses: JSON.stringify(p.cc_addresses),
    reply_to_addresses: JSON.stringify(p.reply_to_addresses),
    message_id: p.message_id,
    in_reply_to: JSON.stringify(p.in_reply_to),
    reference_ids: JSON.stringify(p.references),
    delivered_to: d.deliveredTo,
    received_at: iso(now),
    body_status: p.body_status,
    body_text: p.body_text,
    attachment_count: attachments.length,
    omitted_attachment_count: omitted,
    attachments: JSON.stringify(attachments),
    size_bytes: d.raw.byteSize,
    raw_sha256: d.raw.sha256,
    directory: dir,
    raw_file_id: raw.file.id,
    raw_version_id: raw.version.id,
    json_file_id: json.file.id,
    mail_from: d.envelope.mailFrom,
    client_ip: d.envelope.clientIp,
    helo: d.envelope.helo,
    auth_results: d.auth ? JSON.stringify(d.auth) : null,
    spam_flags: JSON.stringify(d.spamFlags),
    labeling: 'pending',
    label: null,
    labeled_at: null,
    read_at: null,
    read_by_user_id: null,
    read_by_api_key_id: null,
    delivery: null,
    created_at: iso(now),
  };
  await trx.insertInto('emails').values(row).execute();
  await change.commit();
  await trx
    .updateTable('mailboxes')
    .set((eb) => ({
      email_seq: seq,
      message_count: eb('message_count', '+', 1),
      unread_count: eb('unread_count', '+', 1),
      last_received_at: iso(now),
      last_received_path: dir,
    }))
    .where('id', '=', d.mailboxId)
    .execute();
  group.files += change.currentFiles - before.files;
  group.storage += change.currentStorage - before.storage;
  await addReceivedUsage(trx, deps.dialect, [d.mailboxId, groupId], now, d.raw.byteSize);
  await deps.jobs.enqueue(trx, LABEL_EMAIL_TASK, { email_id: d.emailId });
  await recordEvent(deps, trx, {
    type: 'email.received',
    accountId: change.accountId,
    mailboxId: d.mailboxId,
    at: now,
    data: { account_id: change.accountId, mailbox_id: d.mailboxId, email_id: d.emailId, received_at: iso(now), attachment_count: attachments.length },
  });
  return row;
}

/**
 * The conversation a message joins: that of the earliest stored email it refers to (by Message-ID)
 * or that shares its thread root; null when it starts one.
 */
async function findConversation(trx: Kysely<DB>, mailboxId: string, threadKey: string | null, refs: string[]): Promise<string | null> {
  if (!threadKey && !refs.length) return null;
  const hit = await trx
    .selectFrom('emails')
    .select('conversation_id')
    .where('mailbox_id', '=', mailboxId)
    .where((eb) => {
      const ors = [];
      if (refs.length) ors.push(eb('message_id', 'in', refs.slice(0, 200)));
      if (threadKey) ors.push(eb('thread_key', '=', threadKey), eb('message_id', '=', threadKey));
      return eb.or(ors);
    })
    .orderBy('seq', 'asc')
    .limit(1)
    .executeTakeFirst();
  return hit?.conversation_id ?? null;
}

/** A storage fault while storing: the SMTP layer answers 451 so the sender retries. */
export function storageUnavailable(err: unknown): AppError {
  return err instanceof AppError ? err : new AppError('STORAGE_UNAVAILABLE', undefined, {});
}
