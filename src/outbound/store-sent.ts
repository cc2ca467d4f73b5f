import type { Kysely } from 'kysely';
import type { AppDeps, Actor } from '../context.ts';
import type { DB, EmailsTable } from '../db/schema.ts';
import type { PlanLimits } from '../accounts/plans.ts';
import type { StoredBlob } from '../blobs/blob-store.ts';
import type { ParsedEmail } from '../inbound/parse-types.ts';
import { MailboxChange } from '../files/mailbox-change.ts';
import { searchIndex } from '../search/search-index.ts';
import { emailDocsFor } from '../search/documents.ts';
import { writeFileVersion, type GroupUsage } from '../files/files.write.ts';
import { emailDirectory } from '../inbound/layout.ts';
import { iso } from '../time.ts';

export interface SentAttachment {
  filename: string;
  contentType: string;
  sha256: string;
  byteSize: number;
}

export interface SentEmail {
  emailId: string;
  mailboxId: string;
  /** The mailbox address it was sent from (the row's delivered_to). */
  fromAddress: string;
  acceptedAt: Date;
  raw: StoredBlob;
  messageJson: StoredBlob;
  /** The composed message read back by the inbound parser: the row's fields come from it, as for received mail. */
  parsed: ParsedEmail;
  attachments: SentAttachment[];
  conversationId: string;
  threadKey: string;
  delivery: unknown;
}

/**
 * Stores a sent message like a received one, in the caller's transaction: `_email/yyyy/mm/dd/<id>/`
 * with message.eml, message.json and attachments/ as one mailbox version, and the email row with
 * direction `sent` and the next per-mailbox `seq` (so `direction=sent|all` lists and polls it).
 * Sent mail is not labeled (its author wrote it) and does not count as unread or received.
 */
export async function storeSentEmail(deps: AppDeps, trx: Kysely<DB>, actor: Actor, limits: PlanLimits, group: GroupUsage, s: SentEmail): Promise<EmailsTable> {
  const at = iso(s.acceptedAt);
  const blobRows = [s.raw, s.messageJson].map((b) => ({ sha256: b.sha256, byte_size: b.byteSize, md5: b.md5Base64, created_at: at }));
  await trx.insertInto('blobs').values(blobRows).onConflict((oc) => oc.column('sha256').doNothing()).execute();
  const change = await MailboxChange.begin(trx, deps.dialect, s.mailboxId, { actor, now: s.acceptedAt, action: 'email.sent', ignoreUploadLock: true });
  const dir = emailDirectory(s.acceptedAt, s.emailId);
  const base = { folder: dir, createdBySystem: 'email', knownNew: true, role: 'source' as const };
  const raw = await writeFileVersion(change, limits, group, { ...base, path: `${dir}/message.eml`, basename: 'message.eml', sha256: s.raw.sha256, byteSize: s.raw.byteSize, mimeType: 'message/rfc822' });
  const json = await writeFileVersion(change, limits, group, { ...base, path: `${dir}/message.json`, basename: 'message.json', sha256: s.messageJson.sha256, byteSize: s.messageJson.byteSize, mimeType: 'application/json' });
  const attachments = [];
  const folder = `${dir}/attachments`;
  // Names as the parser saw them in the composed message (made safe and unique there).
  const names = s.parsed.attachments.map((a) => a.filename);
  for (const [i, a] of s.attachments.entries()) {
    const filename = names[i] ?? a.filename;
    const w = await writeFileVersion(change, limits, group, { ...base, folder, path: `${folder}/${filename}`, basename: filename, sha256: a.sha256, byteSize: a.byteSize, mimeType: a.contentType });
    attachments.push({ id: w.file.id, filename, content_type: a.contentType, size_bytes: a.byteSize, version_id: w.version.id, origin: 'attachment', content_id: null });
  }
  const mailbox = await trx.selectFrom('mailboxes').select('email_seq').where('id', '=', s.mailboxId).executeTakeFirstOrThrow();
  const seq = Number(mailbox.email_seq) + 1;
  const p = s.parsed;
  const row: EmailsTable = {
    id: s.emailId, mailbox_id: s.mailboxId, account_id: change.accountId, seq, direction: 'sent', conversation_id: s.conversationId, thread_key: s.threadKey,
    subject: p.subject, subject_search: p.subject?.toLowerCase() ?? null,
    from_addresses: JSON.stringify(p.from_addresses), sender_address: p.from_addresses[0]?.address.toLowerCase() ?? null,
    to_addresses: JSON.stringify(p.to_addresses), cc_addresses: JSON.stringify(p.cc_addresses), reply_to_addresses: JSON.stringify(p.reply_to_addresses),
    message_id: p.message_id, in_reply_to: JSON.stringify(p.in_reply_to), reference_ids: JSON.stringify(p.references),
    delivered_to: s.fromAddress, received_at: at, body_status: p.body_status, body_text: p.body_text,
    attachment_count: attachments.length, omitted_attachment_count: 0, attachments: JSON.stringify(attachments),
    size_bytes: s.raw.byteSize, raw_sha256: s.raw.sha256, directory: dir, raw_file_id: raw.file.id, raw_version_id: raw.version.id, json_file_id: json.file.id,
    mail_from: s.fromAddress, client_ip: null, helo: null, auth_results: null, spam_flags: '[]',
    labeling: 'done', label: null, labeled_at: null,
    // The author has seen what they wrote.
    read_at: at, read_by_user_id: actor.userId, read_by_api_key_id: actor.apiKeyId,
    delivery: JSON.stringify(s.delivery), created_at: at,
  };
  await trx.insertInto('emails').values(row).execute();
  await searchIndex(deps).putEmails(trx, await emailDocsFor(trx, [row]));
  await change.commit();
  await trx.updateTable('mailboxes').set({ email_seq: seq }).where('id', '=', s.mailboxId).execute();
  return row;
}
