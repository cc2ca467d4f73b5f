import { assertEmailFileReadable } from '../emails/withheld.ts';
import type { FileRole, FilesTable } from '../db/schema.ts';
import type { RequestCtx } from '../context.ts';
import { AppError, invalidArgument } from '../errors.ts';
import { assertMutable } from '../auth/access.ts';
import { limitsFor } from '../accounts/limits.service.ts';
import { billingGroupId } from '../accounts/accounts.service.ts';
import { recordActivity } from '../activity/activity.service.ts';
import { loadMailbox, type LoadedMailbox } from '../mailboxes/mailboxes.service.ts';
import { MailboxChange } from './mailbox-change.ts';
import { deleteFileVersion, writeFileVersion, type NewContent, type WriteResult } from './files.write.ts';
import { findFileByPath, findLiveFile, groupUsage } from './files.repo.ts';
import { cleanPath, isEmailPath, mimeFromName } from './paths.ts';
import { ensureUploaded, resolveSignedBlob } from './direct-uploads.service.ts';

export const FILE_ROLES: FileRole[] = ['source', 'reference', 'generated', 'agent_output', 'export', 'artifact'];
export const MAX_APPEND_BYTES = 1024 * 1024;

/** Loads a mailbox for a file write: write permission, writable account, not archived. */
async function forWrite(ctx: RequestCtx, accountId: string | null | undefined, mailboxId: string, need: 'write' | 'admin' = 'write'): Promise<LoadedMailbox> {
  const loaded = await loadMailbox(ctx, accountId, mailboxId, need);
  assertMutable(loaded.access);
  if (loaded.mailbox.archived_at) throw new AppError('MAILBOX_ARCHIVED', undefined, { mailbox_id: mailboxId });
  return loaded;
}

/** Runs one change to a mailbox's files in a transaction, with limits and activity. */
async function change<T>(
  ctx: RequestCtx,
  loaded: LoadedMailbox,
  action: string,
  opts: { expectedVersion?: string | null; reason?: string | null; targetId?: string | null },
  body: (c: MailboxChange, limits: ReturnType<typeof limitsFor>, group: { files: number; storage: number }) => Promise<T>,
): Promise<{ result: T; versionId: string | null }> {
  const limits = limitsFor(loaded.access.account);
  return ctx.db.transaction().execute(async (trx) => {
    const c = await MailboxChange.begin(trx, ctx.dialect, loaded.mailbox.id, { actor: ctx.actor, now: ctx.now(), action, expectedVersion: opts.expectedVersion });
    const group = await groupUsage(trx, billingGroupId(loaded.access.account));
    const result = await body(c, limits, group);
    const { versionId } = await c.commit();
    if (c.hasChanges) await recordActivity(trx, ctx.actor, c.now, { accountId: loaded.access.account.id, action, targetType: 'file', targetId: opts.targetId ?? null, reason: opts.reason });
    return { result, versionId };
  });
}

export interface SaveFileInput {
  accountId?: string | null;
  mailboxId: string;
  path: string;
  signedBlobId: string;
  name?: string | null;
  role?: FileRole;
  existingFilePolicy?: 'replace' | 'skip';
  expectedMailboxVersion?: string | null;
  reason?: string | null;
}

/** Saves uploaded bytes at a path: a new file, a new version, or a skip. */
export async function saveFile(ctx: RequestCtx, input: SaveFileInput): Promise<WriteResult & { loaded: LoadedMailbox }> {
  const loaded = await forWrite(ctx, input.accountId, input.mailboxId);
  const p = cleanPath(input.path);
  const upload = await resolveSignedBlob(ctx.db, ctx.secret, loaded.mailbox.id, input.signedBlobId);
  await ensureUploaded(ctx, upload);
  const content: NewContent = {
    ...p,
    name: input.name,
    role: input.role,
    sha256: upload.sha256,
    byteSize: Number(upload.byte_size),
    mimeType: upload.content_type || mimeFromName(p.basename),
    reason: input.reason,
    createdBySystem: 'api',
    policy: input.existingFilePolicy,
  };
  const { result } = await change(ctx, loaded, 'file.save', { expectedVersion: input.expectedMailboxVersion, reason: input.reason }, (c, limits, group) => writeFileVersion(c, limits, group, content));
  if (!result.skipped) await ctx.db.updateTable('direct_uploads').set({ status: 'consumed' }).where('id', '=', upload.id).execute();
  return { ...result, loaded: { ...loaded, mailbox: { ...loaded.mailbox } } };
}

/** Stores bytes that the server itself produced (append, copy of text, MCP text writes). */
async function storeBytes(ctx: RequestCtx, bytes: Buffer) {
  const stored = await ctx.blobs.putBuffer(bytes);
  await ctx.db
    .insertInto('blobs')
    .values({ sha256: stored.sha256, byte_size: stored.byteSize, md5: stored.md5Base64, created_at: new Date(ctx.now()).toISOString() })
    .onConflict((oc) => oc.column('sha256').doNothing())
    .execute();
  return stored;
}

export async function appendText(
  ctx: RequestCtx,
  input: { accountId?: string | null; mailboxId: string; path: string; content: string; newlineBefore?: boolean; expectedMailboxVersion?: string | null; reason?: string | null },
) {
  const loaded = await forWrite(ctx, input.accountId, input.mailboxId);
  const p = cleanPath(input.path);
  if (Buffer.byteLength(input.content) > MAX_APPEND_BYTES) throw invalidArgument('content', `must be at most ${MAX_APPEND_BYTES} bytes`);
  const file = await findFileByPath(ctx.db, loaded.mailbox.id, p.path);
  if (!file?.current_version_id) throw new AppError('MAILBOX_FILE_NOT_FOUND', `No file at ${p.path}.`, { path: p.path });
  const current = await ctx.db.selectFrom('file_versions').selectAll().where('id', '=', file.current_version_id).executeTakeFirstOrThrow();
  const existing = current.sha256 ? await readAll(ctx, current.sha256) : Buffer.alloc(0);
  const newlineInserted = input.newlineBefore === true && existing.length > 0 && existing[existing.length - 1] !== 0x0a;
  const added = Buffer.from((newlineInserted ? '\n' : '') + input.content, 'utf8');
  const bytes = Buffer.concat([existing, added]);
  const stored = await storeBytes(ctx, bytes);
  const { result } = await change(ctx, loaded, 'file.append', { expectedVersion: input.expectedMailboxVersion, reason: input.reason, targetId: file.id }, async (c, limits, group) => {
    // The file may have changed since it was read: append only to the version we read.
    const now = await findFileByPath(c.trx, loaded.mailbox.id, p.path);
    if (now?.current_version_id !== current.id) throw new AppError('MAILBOX_VERSION_CONFLICT', 'The file changed while appending; retry.', { path: p.path });
    return writeFileVersion(c, limits, group, { ...p, name: current.name, sha256: stored.sha256, byteSize: stored.byteSize, mimeType: current.mime_type, reason: input.reason, createdBySystem: 'api' });
  });
  return { ...result, path: p.path, appended: true as const, appended_bytes: added.length, newline_inserted: newlineInserted };
}

/** Largest text the MCP text write accepts in one call. */
export const MAX_TEXT_WRITE_BYTES = 1024 * 1024;

/**
 * Writes UTF-8 text at a path (a new file or a new version of it): the MCP tools' write,
 * which is text-only. Same permission, limits, version check and history as any save.
 */
export async function writeTextFile(ctx: RequestCtx, input: { accountId?: string | null; mailboxId: string; path: string; content: string; expectedMailboxVersion?: string | null; reason?: string | null }) {
  const loaded = await forWrite(ctx, input.accountId, input.mailboxId);
  const p = cleanPath(input.path);
  const bytes = Buffer.from(input.content, 'utf8');
  if (bytes.length > MAX_TEXT_WRITE_BYTES) throw invalidArgument('content', `must be at most ${MAX_TEXT_WRITE_BYTES} bytes`);
  const guessed = mimeFromName(p.basename);
  const mimeType = guessed === 'application/octet-stream' ? 'text/plain; charset=utf-8' : guessed;
  const stored = await storeBytes(ctx, bytes);
  const { result } = await change(ctx, loaded, 'file.write_text', { expectedVersion: input.expectedMailboxVersion, reason: input.reason }, (c, limits, group) =>
    writeFileVersion(c, limits, group, { ...p, sha256: stored.sha256, byteSize: stored.byteSize, mimeType, reason: input.reason, createdBySystem: 'mcp' }),
  );
  return { ...result, loaded };
}

/** A file's current bytes (for the MCP read of small text files). */
export function readFileBytes(ctx: RequestCtx, sha256: string): Promise<Buffer> {
  return readAll(ctx, sha256);
}

async function readAll(ctx: RequestCtx, sha256: string): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of await ctx.blobs.read(sha256)) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

export async function loadFile(ctx: RequestCtx, accountId: string | null | undefined, mailboxId: string, fileId: string, need: 'read' | 'write' | 'admin' = 'read') {
  const loaded = await loadMailbox(ctx, accountId, mailboxId, need);
  const file = /^df_[A-Za-z0-9]{1,64}$/.test(fileId) ? await findLiveFile(ctx.db, loaded.mailbox.id, fileId) : undefined;
  if (!file) throw new AppError('MAILBOX_FILE_NOT_FOUND', undefined, { file_id: fileId });
  await assertEmailFileReadable(ctx, loaded.mailbox.id, file.path);
  return { loaded, file };
}

function refuseEmailArea(file: FilesTable, action: string) {
  if (isEmailPath(file.path)) throw new AppError('EMAIL_PATH_READ_ONLY', `Files under _email/ cannot be ${action}; delete the email instead.`, { path: file.path });
}

export async function deleteFile(ctx: RequestCtx, input: { accountId?: string | null; mailboxId: string; fileId: string; expectedMailboxVersion?: string | null; reason?: string | null }) {
  const { loaded, file } = await loadFile(ctx, input.accountId, input.mailboxId, input.fileId, 'admin');
  assertMutable(loaded.access);
  if (loaded.mailbox.archived_at) throw new AppError('MAILBOX_ARCHIVED', undefined, { mailbox_id: loaded.mailbox.id });
  refuseEmailArea(file, 'deleted');
  const { result, versionId } = await change(ctx, loaded, 'file.delete', { expectedVersion: input.expectedMailboxVersion, reason: input.reason, targetId: file.id }, async (c) => {
    const fresh = await findLiveFile(c.trx, loaded.mailbox.id, file.id);
    if (!fresh) throw new AppError('MAILBOX_FILE_NOT_FOUND', undefined, { file_id: file.id });
    return deleteFileVersion(c, fresh, input.reason ?? null);
  });
  return { deleted: true as const, id: file.id, version: result, mailbox_version_id: versionId };
}

/** Rename (same folder, new basename), move (new path) and copy (new file from the current version). */
export async function relocateFile(
  ctx: RequestCtx,
  kind: 'rename' | 'move' | 'copy',
  input: { accountId?: string | null; mailboxId: string; fileId: string; target: string; expectedMailboxVersion?: string | null; reason?: string | null },
) {
  const { loaded, file } = await loadFile(ctx, input.accountId, input.mailboxId, input.fileId, 'write');
  assertMutable(loaded.access);
  if (loaded.mailbox.archived_at) throw new AppError('MAILBOX_ARCHIVED', undefined, { mailbox_id: loaded.mailbox.id });
  if (kind !== 'copy') refuseEmailArea(file, kind === 'rename' ? 'renamed' : 'moved');
  let targetPath: string;
  if (kind === 'rename') {
    if (input.target.includes('/')) throw invalidArgument('name', 'must be a file name without slashes; use move to change folders');
    targetPath = file.folder ? `${file.folder}/${input.target}` : input.target;
  } else targetPath = input.target;
  const p = cleanPath(targetPath, kind === 'rename' ? 'name' : 'path');
  if (p.path === file.path) throw invalidArgument(kind === 'rename' ? 'name' : 'path', 'is the current path');
  const current = await ctx.db.selectFrom('file_versions').selectAll().where('id', '=', file.current_version_id!).executeTakeFirstOrThrow();
  const { result } = await change(ctx, loaded, `file.${kind}`, { expectedVersion: input.expectedMailboxVersion, reason: input.reason, targetId: file.id }, async (c, limits, group) => {
    if (await findFileByPath(c.trx, loaded.mailbox.id, p.path)) throw new AppError('FILE_PATH_TAKEN', undefined, { path: p.path });
    const content: NewContent = { ...p, name: p.basename, role: file.role, sha256: current.sha256!, byteSize: Number(current.byte_size), mimeType: current.mime_type, reason: input.reason, createdBySystem: 'api' };
    if (kind === 'copy') return writeFileVersion(c, limits, group, content);
    // Rename and move keep the file's identity and history: the file takes the new path, and
    // the same content is recorded as a new version there.
    await c.trx.updateTable('files').set({ path: p.path, live_path: p.path, folder: p.folder, basename: p.basename }).where('id', '=', file.id).execute();
    return writeFileVersion(c, limits, group, { ...content, recordIdentical: true });
  });
  return { ...result, loaded };
}

export async function restoreVersion(ctx: RequestCtx, input: { accountId?: string | null; mailboxId: string; fileId: string; versionId: string; expectedMailboxVersion?: string | null; reason?: string | null }) {
  const { loaded, file } = await loadFile(ctx, input.accountId, input.mailboxId, input.fileId, 'write');
  assertMutable(loaded.access);
  refuseEmailArea(file, 'restored');
  const version = await ctx.db.selectFrom('file_versions').selectAll().where('id', '=', input.versionId).where('file_id', '=', file.id).executeTakeFirst();
  if (!version || version.deleted === 1 || !version.sha256) throw new AppError('FILE_VERSION_NOT_FOUND', undefined, { version_id: input.versionId });
  const p = cleanPath(file.path);
  const { result } = await change(ctx, loaded, 'file.restore', { expectedVersion: input.expectedMailboxVersion, reason: input.reason, targetId: file.id }, (c, limits, group) =>
    writeFileVersion(c, limits, group, { ...p, name: version.name, sha256: version.sha256!, byteSize: Number(version.byte_size), mimeType: version.mime_type, reason: input.reason ?? `Restored version ${version.version_number}`, createdBySystem: 'api' }),
  );
  return { ...result, loaded };
}

/** Read status is shared; only this call changes it. */
export async function setFileRead(ctx: RequestCtx, input: { accountId?: string | null; mailboxId: string; fileId: string; read: boolean }) {
  const { file } = await loadFile(ctx, input.accountId, input.mailboxId, input.fileId, 'read');
  const now = ctx.now().toISOString();
  const set = input.read
    ? { read_at: now, read_by_user_id: ctx.actor.userId, read_by_api_key_id: ctx.actor.apiKeyId }
    : { read_at: null, read_by_user_id: null, read_by_api_key_id: null };
  await ctx.db.updateTable('files').set(set).where('id', '=', file.id).execute();
  if (file.current_version_id) await ctx.db.updateTable('file_versions').set(set).where('id', '=', file.current_version_id).execute();
  return { ...file, ...set };
}
