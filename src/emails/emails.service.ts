import { assertEmailContentReadable } from './withheld.ts';
import type { Kysely } from 'kysely';
import type { DB, EmailsTable } from '../db/schema.ts';
import type { RequestCtx } from '../context.ts';
import type { Permissions } from '../auth/access.ts';
import { assertMutable } from '../auth/access.ts';
import { AppError } from '../errors.ts';
import { iso } from '../time.ts';
import { recordActivity } from '../activity/activity.service.ts';
import { loadMailbox } from '../mailboxes/mailboxes.service.ts';
import { searchIndex } from '../search/search-index.ts';
import { MailboxChange } from '../files/mailbox-change.ts';
import { downloadLink, type DownloadLink } from '../files/blob.routes.ts';
import { labelRetryAfterSeconds } from '../labels/labeler.ts';
import { attachmentsOf, labelingPending, viewerOf } from './emails.present.ts';

const EMAIL_ID = /^eml_[A-Za-z0-9]{1,64}$/;

function notFound(emailId: string): AppError {
  return new AppError('EMAIL_NOT_FOUND', undefined, { email_id: emailId });
}

function findEmail(db: Kysely<DB>, mailboxId: string, emailId: string): Promise<EmailsTable | undefined> {
  return db.selectFrom('emails').selectAll().where('mailbox_id', '=', mailboxId).where('id', '=', emailId).executeTakeFirst();
}

/**
 * An email through its mailbox: the mailbox is reached only through the selected account and the
 * credential's permissions (loadMailbox), and the email must belong to that mailbox. A malformed,
 * missing or foreign id, or one of another mailbox, answers the same EMAIL_NOT_FOUND.
 */
export async function loadEmail(ctx: RequestCtx, accountId: string | null | undefined, mailboxId: string, emailId: string, need: keyof Permissions = 'read') {
  const loaded = await loadMailbox(ctx, accountId, mailboxId, need);
  const email = EMAIL_ID.test(emailId) ? await findEmail(ctx.db, loaded.mailbox.id, emailId) : undefined;
  if (!email) throw notFound(emailId);
  return { loaded, email };
}

function pendingError(ctx: RequestCtx, email: EmailsTable): AppError {
  const retryAfter = labelRetryAfterSeconds(email, ctx.now());
  return new AppError('EMAIL_LABELING_PENDING', undefined, { email_id: email.id, retry_after: retryAfter });
}

/** Detail read: API keys get 503 while labeling is pending (Junk reads as the withheld view). Never marks read. */
export async function readEmail(ctx: RequestCtx, input: { accountId?: string | null; mailboxId: string; emailId: string }): Promise<EmailsTable> {
  const { email } = await loadEmail(ctx, input.accountId, input.mailboxId, input.emailId, 'read');
  if (viewerOf(ctx).apiKey && labelingPending(email)) throw pendingError(ctx, email);
  return email;
}

/**
 * Sets or clears the shared read status. The row is changed only when the status really changes
 * (a guarded update), and the mailbox's unread_count moves in the same transaction only then, so
 * concurrent calls never count twice. Marking an already read email keeps its first reader.
 */
export async function setEmailRead(ctx: RequestCtx, input: { accountId?: string | null; mailboxId: string; emailId: string; read: boolean }): Promise<EmailsTable> {
  const { loaded, email } = await loadEmail(ctx, input.accountId, input.mailboxId, input.emailId, 'read');
  const now = iso(ctx.now());
  await ctx.db.transaction().execute(async (trx) => {
    const set = input.read
      ? { read_at: now, read_by_user_id: ctx.actor.userId, read_by_api_key_id: ctx.actor.apiKeyId }
      : { read_at: null, read_by_user_id: null, read_by_api_key_id: null };
    const res = await trx
      .updateTable('emails')
      .set(set)
      .where('id', '=', email.id)
      .where('mailbox_id', '=', loaded.mailbox.id)
      .where('read_at', input.read ? 'is' : 'is not', null)
      .executeTakeFirst();
    if (Number(res.numUpdatedRows) === 1) {
      await trx
        .updateTable('mailboxes')
        .set((eb) => ({ unread_count: eb('unread_count', input.read ? '-' : '+', 1) }))
        .where('id', '=', loaded.mailbox.id)
        .execute();
    }
  });
  const fresh = await findEmail(ctx.db, loaded.mailbox.id, email.id);
  // Deleted between the update and this read: the change went with it.
  if (!fresh) throw notFound(email.id);
  return fresh;
}

/** The files of an email: those the row names, and whatever else lies in its folder. */
async function emailFiles(trx: Kysely<DB>, mailboxId: string, email: EmailsTable) {
  const ids = new Set<string>([email.raw_file_id, email.json_file_id, ...attachmentsOf(email).map((a) => a.id)].filter((x): x is string => !!x));
  const folders = email.directory ? [email.directory, `${email.directory}/attachments`] : [];
  if (!ids.size && !folders.length) return [];
  return trx
    .selectFrom('files')
    .leftJoin('file_versions', 'file_versions.id', 'files.current_version_id')
    .select(['files.id', 'files.deleted_at', 'file_versions.byte_size'])
    .where('files.mailbox_id', '=', mailboxId)
    .where((eb) => eb.or([...(ids.size ? [eb('files.id', 'in', [...ids])] : []), ...(folders.length ? [eb('files.folder', 'in', folders)] : [])]))
    .execute();
}

/**
 * Deletes an email for good (no trash): its row, and its files under `_email/…/<id>/` with all
 * their versions, as one mailbox version with exact storage and file counts; message_count and
 * (when unread) unread_count go down with it. The blobs are collected later by the blob GC once
 * nothing refers to them.
 */
export async function deleteEmail(ctx: RequestCtx, input: { accountId?: string | null; mailboxId: string; emailId: string; reason?: string | null }) {
  const { loaded, email } = await loadEmail(ctx, input.accountId, input.mailboxId, input.emailId, 'admin');
  assertMutable(loaded.access);
  if (loaded.mailbox.archived_at) throw new AppError('MAILBOX_ARCHIVED', undefined, { mailbox_id: loaded.mailbox.id });
  await ctx.db.transaction().execute(async (trx) => {
    // Locks the mailbox row first: a concurrent delete of the same email waits here and then
    // finds the row gone. Only `_email/` changes, which an upload session never touches.
    const change = await MailboxChange.begin(trx, ctx.dialect, loaded.mailbox.id, { actor: ctx.actor, now: ctx.now(), action: 'email.delete', ignoreUploadLock: true });
    const fresh = await findEmail(trx, loaded.mailbox.id, email.id);
    if (!fresh) throw notFound(email.id);
    const files = await emailFiles(trx, loaded.mailbox.id, fresh);
    const ids = files.map((f) => f.id);
    for (const f of files) {
      change.version();
      if (f.deleted_at === null) {
        change.filesDelta -= 1;
        change.storageDelta -= Number(f.byte_size ?? 0);
      }
    }
    if (ids.length) {
      await trx.deleteFrom('file_versions').where('file_id', 'in', ids).execute();
      await trx.deleteFrom('files').where('id', 'in', ids).execute();
    }
    await trx.deleteFrom('emails').where('id', '=', fresh.id).execute();
    await searchIndex(ctx).removeEmails(trx, [fresh.id]);
    await change.commit();
    await trx
      .updateTable('mailboxes')
      .set((eb) => ({ message_count: eb('message_count', '-', 1), ...(fresh.read_at === null ? { unread_count: eb('unread_count', '-', 1) } : {}) }))
      .where('id', '=', loaded.mailbox.id)
      .execute();
    await recordActivity(trx, ctx.actor, change.now, { accountId: loaded.access.account.id, action: 'email.delete', targetType: 'email', targetId: fresh.id, reason: input.reason });
  });
  return { deleted: true as const, id: email.id };
}

/** Downloads of a withheld email: pending → 503 with Retry-After, Junk → 403 (API keys only). */
function assertDownloadable(ctx: RequestCtx, email: EmailsTable) {
  assertEmailContentReadable(ctx, email);
}

type DownloadInput = { accountId?: string | null; mailboxId: string; emailId: string };

async function currentBlob(db: Kysely<DB>, mailboxId: string, fileId: string | null, versionId: string | null) {
  if (!fileId) return undefined;
  let q = db
    .selectFrom('files')
    .innerJoin('file_versions', 'file_versions.file_id', 'files.id')
    .select(['file_versions.sha256', 'file_versions.byte_size'])
    .where('files.id', '=', fileId)
    .where('files.mailbox_id', '=', mailboxId)
    .where('files.deleted_at', 'is', null);
  q = versionId ? q.where('file_versions.id', '=', versionId) : q.whereRef('file_versions.id', '=', 'files.current_version_id');
  const v = await q.executeTakeFirst();
  return v?.sha256 ? { sha256: v.sha256, byteSize: Number(v.byte_size) } : undefined;
}

/** A link to the original message as received (`<email id>.eml`, message/rfc822). Does not mark read. */
export async function rawDownload(ctx: RequestCtx, input: DownloadInput): Promise<DownloadLink> {
  const { loaded, email } = await loadEmail(ctx, input.accountId, input.mailboxId, input.emailId, 'read');
  assertDownloadable(ctx, email);
  const blob = await currentBlob(ctx.db, loaded.mailbox.id, email.raw_file_id, email.raw_version_id);
  if (!blob) throw new AppError('EMAIL_NOT_FOUND', 'This email has no stored original message.', { email_id: email.id });
  return downloadLink(ctx, { sha256: blob.sha256, filename: `${email.id}.eml`, contentType: 'message/rfc822', byteSize: blob.byteSize });
}

/** A link to one stored attachment, by its `df_` id from the email detail. */
export async function attachmentDownload(ctx: RequestCtx, input: DownloadInput & { attachmentId: string }): Promise<DownloadLink> {
  const { loaded, email } = await loadEmail(ctx, input.accountId, input.mailboxId, input.emailId, 'read');
  assertDownloadable(ctx, email);
  const a = attachmentsOf(email).find((x) => x.id === input.attachmentId);
  const blob = a ? await currentBlob(ctx.db, loaded.mailbox.id, a.id, a.version_id) : undefined;
  if (!a || !blob) throw new AppError('EMAIL_ATTACHMENT_NOT_FOUND', undefined, { email_id: email.id, attachment_id: input.attachmentId });
  return downloadLink(ctx, { sha256: blob.sha256, filename: a.filename, contentType: a.content_type, byteSize: blob.byteSize });
}

