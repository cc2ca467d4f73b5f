import type { Kysely } from 'kysely';
import type { DB, DirectUploadsTable } from '../db/schema.ts';
import type { RequestCtx } from '../context.ts';
import { AppError, invalidArgument } from '../errors.ts';
import { newId } from '../ids.ts';
import { iso } from '../time.ts';
import { assertMutable } from '../auth/access.ts';
import { limitsFor } from '../accounts/limits.service.ts';
import { loadMailbox } from '../mailboxes/mailboxes.service.ts';
import { signId, signToken, verifySignedId } from '../http/signed.ts';
import { cleanPath } from './paths.ts';
import { checkContentLimits } from './files.write.ts';
import { findFileByPath, versionsById } from './files.repo.ts';
import { BlobMismatchError, type StoredBlob } from '../blobs/blob-store.ts';
import { recordUploaded } from './record-uploads.ts';
import { readSmallBlob } from '../blobs/inline-blobs.ts';
import type { AppDeps } from '../context.ts';
import type { Readable } from 'node:stream';
import { compiledQuery } from '../db/compiled-query.ts';

export { recordUploaded };

/** How long an upload URL and its unsaved bytes stay valid. */
export const UPLOAD_TTL_SECONDS = 6 * 3600;
export const SIGNED_BLOB = 'signed-blob';
export const UPLOAD_URL = 'upload-url';

export interface BlobDeclaration {
  filename: string;
  byte_size: number;
  checksum: string;
  content_type: string;
  sha256: string;
}

// Read for every PUT of bytes: built once (src/db/compiled-query.ts).
const UPLOAD_BY_ID = compiledQuery((db, id: string) => db.selectFrom('direct_uploads').selectAll().where('id', '=', id), 1);

export function findDirectUpload(db: Kysely<DB>, id: string): Promise<DirectUploadsTable | undefined> {
  return UPLOAD_BY_ID.executeTakeFirst(db, id);
}

export function checkDeclaration(b: BlobDeclaration, field: string): BlobDeclaration {
  if (!Number.isSafeInteger(b.byte_size) || b.byte_size < 0) throw invalidArgument(`${field}.byte_size`, 'must be a non-negative integer');
  if (!/^[A-Za-z0-9+/]{22}==$/.test(b.checksum)) throw invalidArgument(`${field}.checksum`, 'must be the base64 MD5 of the bytes (24 characters)');
  if (!/^[0-9a-fA-F]{64}$/.test(b.sha256)) throw invalidArgument(`${field}.sha256`, 'must be the hex SHA-256 of the bytes (64 characters)');
  if (!/^[\w.+-]{1,127}\/[\w.+-]{1,127}(\s*;.{0,200})?$/.test(b.content_type)) throw invalidArgument(`${field}.content_type`, 'must be a MIME type such as text/plain');
  if (!b.filename || b.filename.length > 255 || /[\u0000-\u001f\u007f/\\]/.test(b.filename)) throw invalidArgument(`${field}.filename`, 'must be 1 to 255 characters without slashes or control characters');
  return { ...b, sha256: b.sha256.toLowerCase() };
}

export interface DirectUploadInput {
  accountId?: string | null;
  mailboxId: string;
  path: string;
  existingFilePolicy?: 'replace' | 'skip';
  blob: BlobDeclaration;
  uploadSessionId?: string | null;
}

/**
 * Stores the bytes of a direct upload sent to Cubby's own endpoint (the fs store's upload URL, the
 * dashboard) and records the upload, resolving once durable. Bytes of up to CUBBY_BLOB_INLINE_MAX_BYTES
 * are kept in their blob row, written by the group commit that records the upload
 * (src/blobs/inline-blobs.ts); larger ones go to the store first. Rejects with BlobMismatchError when
 * the bytes are not the declared ones; then nothing is stored.
 */
export async function storeUploadedBytes(deps: Pick<AppDeps, 'db' | 'commits' | 'blobs' | 'now' | 'config' | 'metrics'>, row: DirectUploadsTable, body: Readable): Promise<void> {
  const byteSize = Number(row.byte_size);
  const expect = { byteSize, md5Base64: row.checksum, sha256Hex: row.sha256, maxBytes: byteSize };
  if (byteSize <= deps.config.blobs.inlineMaxBytes) {
    const { blob, bytes } = await readSmallBlob(body, expect);
    await recordUploaded(deps, row, blob.md5Base64, bytes);
    deps.metrics.blobInlineBytesWritten.inc(byteSize);
    return;
  }
  const stored = await deps.blobs.put(body, expect);
  await recordUploaded(deps, row, stored.md5Base64);
}

/** Creates the upload target for one file, or answers that no upload is needed. */
export async function createDirectUpload(ctx: RequestCtx, input: DirectUploadInput) {
  const { access, mailbox } = await loadMailbox(ctx, input.accountId, input.mailboxId, 'write');
  assertMutable(access);
  if (mailbox.archived_at) throw new AppError('MAILBOX_ARCHIVED', undefined, { mailbox_id: mailbox.id });
  const p = cleanPath(input.path);
  const blob = checkDeclaration(input.blob, 'blob');
  checkContentLimits(limitsFor(access.account), p.basename, blob.content_type, blob.byte_size, 'blob.byte_size');

  const existing = await findFileByPath(ctx.db, mailbox.id, p.path);
  if (existing) {
    const current = (await versionsById(ctx.db, [existing.current_version_id])).get(existing.current_version_id ?? '');
    if (current?.sha256 === blob.sha256) {
      return { kind: 'skipped' as const, duplicate: true, file: existing, version: current, reason: 'Identical content is already stored at this path.', code: 'DUPLICATE_FILE_VERSION' };
    }
    if (input.existingFilePolicy === 'skip' && current) {
      return { kind: 'skipped' as const, duplicate: false, file: existing, version: current, reason: 'A file exists at this path and existing_file_policy is skip.', code: 'FILE_EXISTS' };
    }
  }
  const now = ctx.now();
  const row: DirectUploadsTable = {
    id: newId('du'),
    account_id: access.account.id,
    mailbox_id: mailbox.id,
    path: p.path,
    filename: blob.filename,
    byte_size: blob.byte_size,
    checksum: blob.checksum,
    sha256: blob.sha256,
    content_type: blob.content_type,
    status: 'pending',
    upload_session_id: input.uploadSessionId ?? null,
    expires_at: iso(now.getTime() + UPLOAD_TTL_SECONDS * 1000),
    uploaded_at: null,
    created_by_user_id: ctx.actor.userId,
    created_by_api_key_id: ctx.actor.apiKeyId,
    created_at: iso(now),
  };
  await ctx.db.insertInto('direct_uploads').values(row).execute();
  return { kind: 'upload' as const, row, signedId: signId(ctx.secret, SIGNED_BLOB, row.id), target: await uploadTarget(ctx, row) };
}

export async function uploadTarget(ctx: RequestCtx, row: DirectUploadsTable): Promise<{ url: string; headers: Record<string, string> }> {
  const expiresIn = Math.max(1, Math.floor((Date.parse(row.expires_at) - ctx.now().getTime()) / 1000));
  const direct = await ctx.blobs.directUploadTarget(row.id, { byteSize: Number(row.byte_size), md5Base64: row.checksum, sha256Hex: row.sha256, contentType: row.content_type }, expiresIn);
  if (direct) return direct;
  const token = signToken(ctx.secret, UPLOAD_URL, { id: row.id, exp: Date.parse(row.expires_at) });
  return { url: `${ctx.publicUrl()}/blobs/uploads/${token}`, headers: { 'Content-Type': row.content_type, 'Content-MD5': row.checksum } };
}

/** The direct upload a signed blob id names, if it belongs to this mailbox. */
export async function resolveSignedBlob(db: Kysely<DB>, secret: string, mailboxId: string, signed: string, field = 'signed_blob_id'): Promise<DirectUploadsTable> {
  const id = verifySignedId(secret, SIGNED_BLOB, signed);
  const row = id ? await findDirectUpload(db, id) : undefined;
  if (!row || row.mailbox_id !== mailboxId) throw new AppError('DIRECT_UPLOAD_INVALID', undefined, { field });
  return row;
}

/**
 * Makes sure the bytes of an upload are in the store: already received through our own
 * endpoint, or (S3) adopted from the staging object now. Throws DIRECT_UPLOAD_NOT_FOUND.
 */
export async function ensureUploaded(ctx: Pick<RequestCtx, 'db' | 'commits' | 'blobs' | 'now' | 'config'>, row: DirectUploadsTable): Promise<void> {
  if (row.status !== 'pending') return;
  let adopted: StoredBlob | null = null;
  try {
    adopted = await ctx.blobs.adoptDirectUpload(row.id, { byteSize: Number(row.byte_size), sha256Hex: row.sha256, md5Base64: row.checksum });
  } catch (err) {
    // S3 (or a service that does not check the signed checksums) kept wrong bytes; the store has
    // removed them, so the same upload URL can be used again.
    if (err instanceof BlobMismatchError) {
      throw new AppError('UPLOAD_CHECKSUM_MISMATCH', `The bytes uploaded for ${row.path} do not match the declared size or checksums; upload them again, then retry.`, {
        path: row.path,
        which: err.which,
        expected: err.expected,
        actual: err.actual,
      });
    }
    throw err;
  }
  if (!adopted) throw new AppError('DIRECT_UPLOAD_NOT_FOUND', `No bytes were uploaded for ${row.path}; upload them again, then retry.`, { path: row.path, signed_blob_id: null });
  await recordUploaded(ctx, row, adopted.md5Base64);
}
