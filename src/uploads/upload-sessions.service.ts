import type { DirectUploadsTable, UploadSessionFilesTable, UploadSessionsTable } from '../db/schema.ts';
import type { RequestCtx } from '../context.ts';
import { AppError, invalidArgument } from '../errors.ts';
import { isUniqueViolation } from '../db/database.ts';
import { commitDurably } from '../db/durable-commit.ts';
import { compiledInsert } from '../db/compiled-query.ts';
import { newId } from '../ids.ts';
import { iso } from '../time.ts';
import { assertMutable } from '../auth/access.ts';
import { limitsFor } from '../accounts/limits.service.ts';
import { recordActivity } from '../activity/activity.service.ts';
import { loadMailbox, type LoadedMailbox } from '../mailboxes/mailboxes.service.ts';
import { signId } from '../http/signed.ts';
import { checkDeclaration, SIGNED_BLOB, uploadTarget } from '../files/direct-uploads.service.ts';
import { checkContentLimits } from '../files/files.write.ts';
import { versionsById } from '../files/files.repo.ts';
import { cleanPath, type CleanPath } from '../files/paths.ts';
import { LOCK_KIND, lockHolder, lockMailboxRow, lockProgress, sessionDeadline, pendingSessionByKey, updateLockProgress, type SessionCounts } from './upload-sessions.repo.ts';
import { expireDueSessionsOf, loadSession, recheckPending, requirePending } from './upload-sessions.lifecycle.ts';
import type { SessionResult, SkipItem, UploadItem } from './upload-sessions.present.ts';

/** Unsaved uploads of a session are discarded after this long, and its lock ends. */
export const SESSION_TTL_SECONDS = 6 * 3600;
export const MAX_FILES_PER_CALL = 100;
export const MAX_SESSION_FILES = 10_000;

// A declaration of up to 100 files inserts this many rows into each: built once per row count
// (src/db/compiled-query.ts), since building them cost more than inserting them.
const INSERT_UPLOADS = compiledInsert('direct_uploads');
const INSERT_SESSION_FILES = compiledInsert('upload_session_files');

/** Loads a mailbox for a session write: write permission, writable account, not archived. */
export async function forSessionWrite(ctx: RequestCtx, accountId: string | null | undefined, mailboxId: string): Promise<LoadedMailbox> {
  const loaded = await loadMailbox(ctx, accountId, mailboxId, 'write');
  assertMutable(loaded.access);
  if (loaded.mailbox.archived_at) throw new AppError('MAILBOX_ARCHIVED', undefined, { mailbox_id: mailboxId });
  return loaded;
}

export interface CreateSessionInput {
  accountId?: string | null;
  mailboxId: string;
  deleteMissing?: boolean;
  expectedFileCount?: number | null;
  clientSessionKey?: string | null;
  expectedMailboxVersion?: string | null;
  reason?: string | null;
}

/** Starts a batch upload and takes the mailbox write lock; the same client_session_key returns the pending session. */
export async function createUploadSession(ctx: RequestCtx, input: CreateSessionInput): Promise<SessionResult & { replayed: boolean }> {
  const loaded = await forSessionWrite(ctx, input.accountId, input.mailboxId);
  const mailboxId = loaded.mailbox.id;
  const deleteMissing = input.deleteMissing === true;
  if (deleteMissing && !loaded.perms.admin) {
    throw new AppError('PERMISSION_DENIED', 'delete_missing deletes files and needs mailbox-admin permission.', { required: 'admin', field: 'delete_missing', mailbox_id: mailboxId });
  }
  const key = input.clientSessionKey ?? null;
  if (key !== null && !/^[\x21-\x7e]{1,200}$/.test(key)) throw invalidArgument('client_session_key', 'must be 1 to 200 printable ASCII characters without spaces');
  const now = ctx.now();
  await expireDueSessionsOf(ctx.db, mailboxId, now, ctx.config.uploadSessionIdleSeconds);

  const replay = async (): Promise<(SessionResult & { replayed: boolean }) | null> => {
    if (key === null) return null;
    const existing = await pendingSessionByKey(ctx.db, mailboxId, key);
    if (!existing) return null;
    if ((existing.delete_missing === 1) !== deleteMissing) {
      throw new AppError('IDEMPOTENCY_KEY_CONFLICT', 'A pending session with this client_session_key has a different delete_missing.', { field: 'client_session_key', session_id: existing.id });
    }
    return { session: existing, replayed: true, message: 'The pending session with this client_session_key.' };
  };
  const found = await replay();
  if (found) return found;

  const session: UploadSessionsTable = {
    id: newId('bus'),
    account_id: loaded.access.account.id,
    mailbox_id: mailboxId,
    status: 'pending',
    pending_slot: mailboxId,
    client_session_key: key,
    delete_missing: deleteMissing ? 1 : 0,
    expected_file_count: input.expectedFileCount ?? null,
    base_mailbox_version_id: null,
    reserved_version_id: newId('bktrv'),
    target_mailbox_version_id: null,
    pruned_files_count: 0,
    uploads_expire_at: iso(now.getTime() + SESSION_TTL_SECONDS * 1000),
    session_closed_at: null,
    created_by_user_id: ctx.actor.userId,
    created_by_api_key_id: ctx.actor.apiKeyId,
    created_at: iso(now),
    updated_at: iso(now),
  };
  try {
    await commitDurably(ctx.commits, async (trx) => {
      await lockMailboxRow(trx, mailboxId);
      const m = await trx.selectFrom('mailboxes').select(['version_id', 'lock_kind', 'locked_until', 'lock_progress', 'archived_at', 'deleted_at']).where('id', '=', mailboxId).executeTakeFirstOrThrow();
      if (m.deleted_at) throw new AppError('MAILBOX_NOT_FOUND', undefined, { mailbox_id: mailboxId });
      if (m.archived_at) throw new AppError('MAILBOX_ARCHIVED', undefined, { mailbox_id: mailboxId });
      if (m.locked_until !== null && Date.parse(m.locked_until) > now.getTime()) throw lockedError(mailboxId, m, now);
      if (input.expectedMailboxVersion != null && input.expectedMailboxVersion !== (m.version_id ?? '')) {
        throw new AppError('MAILBOX_VERSION_CONFLICT', undefined, { mailbox_id: mailboxId, expected_mailbox_version: input.expectedMailboxVersion, current_mailbox_version: m.version_id });
      }
      session.base_mailbox_version_id = m.version_id;
      await trx.insertInto('upload_sessions').values(session).execute();
      await trx
        .updateTable('mailboxes')
        .set({
          lock_kind: LOCK_KIND,
          lock_message: 'A batch upload is in progress.',
          // The lock lapses with the session: at its hard deadline, or when it falls idle.
          locked_until: iso(sessionDeadline(session, ctx.config.uploadSessionIdleSeconds)),
          locked_by_user_id: ctx.actor.userId,
          locked_by_api_key_id: ctx.actor.apiKeyId,
          lock_progress: lockProgress(session),
        })
        .where('id', '=', mailboxId)
        .execute();
      await recordActivity(trx, ctx.actor, now, { accountId: session.account_id, action: 'upload_session.create', targetType: 'upload_session', targetId: session.id, reason: input.reason });
    });
  } catch (err) {
    // Another session started at the same moment: the same key gets that one, others wait.
    const locked = err instanceof AppError && err.code === 'MAILBOX_LOCKED';
    if (locked || isUniqueViolation(err)) {
      const again = await replay();
      if (again) return again;
      throw locked ? err : lockedError(mailboxId, null, now);
    }
    throw err;
  }
  return { session, replayed: false, message: 'Upload session started; the mailbox is locked for other writes until it is finalized, canceled or expires.' };
}

function lockedError(mailboxId: string, m: { lock_kind: string | null; locked_until: string | null; lock_progress: string | null } | null, now: Date): AppError {
  const until = m?.locked_until ?? null;
  return new AppError('MAILBOX_LOCKED', undefined, {
    mailbox_id: mailboxId,
    kind: m?.lock_kind ?? LOCK_KIND,
    locked_until: until,
    session_id: m ? lockHolder(m) : null,
    retry_after: until ? Math.max(1, Math.ceil((Date.parse(until) - now.getTime()) / 1000)) : 1,
  });
}

export interface FileDescriptor {
  path: string;
  name?: string | null;
  byte_size: number;
  content_type: string;
  checksum: string;
  sha256: string;
}

interface Prepared {
  index: number;
  p: CleanPath;
  name: string;
  decl: ReturnType<typeof checkDeclaration>;
}

/**
 * Declares files of a session: a fresh upload target for each (a repeated path supersedes
 * its earlier declaration), or a skip when the path already holds identical content.
 * Every descriptor is checked before anything is recorded.
 */
export async function requestUploads(ctx: RequestCtx, input: { accountId?: string | null; mailboxId: string; sessionId: string; files: FileDescriptor[] }): Promise<SessionResult> {
  const loaded = await forSessionWrite(ctx, input.accountId, input.mailboxId);
  const session = await loadSession(ctx, loaded.mailbox.id, input.sessionId);
  requirePending(session);
  if (input.files.length < 1 || input.files.length > MAX_FILES_PER_CALL) throw invalidArgument('files', `must hold 1 to ${MAX_FILES_PER_CALL} files`);
  const limits = limitsFor(loaded.access.account);
  const prepared: Prepared[] = input.files.map((f, index) => {
    const field = `files[${index}]`;
    const p = cleanPath(f.path, `${field}.path`);
    const name = f.name?.trim() || p.basename;
    const decl = checkDeclaration({ filename: name, byte_size: f.byte_size, checksum: f.checksum, content_type: f.content_type, sha256: f.sha256 }, field);
    checkContentLimits(limits, p.basename, decl.content_type, decl.byte_size, `${field}.byte_size`);
    return { index, p, name, decl };
  });
  const declared = await ctx.db.selectFrom('upload_session_files').select((eb) => eb.fn.countAll<number>().as('n')).where('session_id', '=', session.id).where('status', '!=', 'superseded').executeTakeFirstOrThrow();
  if (Number(declared.n) + prepared.length > MAX_SESSION_FILES) {
    throw invalidArgument('files', `a session holds at most ${MAX_SESSION_FILES} files; finalize this one and start another`, { max: MAX_SESSION_FILES });
  }

  const now = ctx.now();
  // A path named twice in one call: only its last declaration is live.
  const last = new Map(prepared.map((x) => [x.p.path, x.index]));
  const live = (path: string, index: number) => last.get(path) === index;
  const uploadRows: { item: Prepared; row: DirectUploadsTable }[] = [];
  const skipped: SkipItem[] = [];
  let counts: SessionCounts | undefined;
  let touched = session;
  await commitDurably(ctx.commits, async (trx) => {
    await lockMailboxRow(trx, session.mailbox_id);
    touched = await recheckPending(trx, session.id, now, ctx.config.uploadSessionIdleSeconds);
    const paths = [...last.keys()];
    const current = await trx.selectFrom('files').select(['live_path', 'current_version_id']).where('mailbox_id', '=', session.mailbox_id).where('live_path', 'in', paths).execute();
    const versions = await versionsById(trx, current.map((f) => f.current_version_id));
    const currentSha = new Map(current.map((f) => [f.live_path!, versions.get(f.current_version_id ?? '')?.sha256 ?? null]));
    // The latest declaration of a path wins; saved ones stay saved (a new declaration becomes a new version).
    await trx.updateTable('upload_session_files').set({ status: 'superseded' }).where('session_id', '=', session.id).where('path', 'in', paths).where('status', 'in', ['pending', 'skipped']).execute();
    const sessionFiles: UploadSessionFilesTable[] = [];
    for (const item of prepared) {
      const base: Omit<UploadSessionFilesTable, 'status' | 'direct_upload_id' | 'skip_code' | 'skip_reason'> = {
        id: newId('busf'),
        session_id: session.id,
        path: item.p.path,
        name: item.name,
        input_index: item.index,
        sha256: item.decl.sha256,
        byte_size: item.decl.byte_size,
        content_type: item.decl.content_type,
        file_id: null,
        file_version_id: null,
        created: 0,
        created_at: iso(now),
        saved_at: null,
      };
      // An earlier entry for the same path in this call is recorded as already superseded.
      const superseded = !live(item.p.path, item.index);
      if (currentSha.get(item.p.path) === item.decl.sha256) {
        const reason = 'Identical content is already stored at this path.';
        sessionFiles.push({ ...base, status: superseded ? 'superseded' : 'skipped', direct_upload_id: null, skip_code: 'DUPLICATE_FILE_VERSION', skip_reason: reason });
        skipped.push({ path: item.p.path, name: item.name, reason: 'duplicate', code: 'DUPLICATE_FILE_VERSION', input_index: item.index, details: { message: reason } });
        continue;
      }
      const row: DirectUploadsTable = {
        id: newId('du'),
        account_id: session.account_id,
        mailbox_id: session.mailbox_id,
        path: item.p.path,
        filename: item.name,
        byte_size: item.decl.byte_size,
        checksum: item.decl.checksum,
        sha256: item.decl.sha256,
        content_type: item.decl.content_type,
        status: 'pending',
        upload_session_id: session.id,
        expires_at: session.uploads_expire_at,
        uploaded_at: null,
        created_by_user_id: ctx.actor.userId,
        created_by_api_key_id: ctx.actor.apiKeyId,
        created_at: iso(now),
      };
      sessionFiles.push({ ...base, status: superseded ? 'superseded' : 'pending', direct_upload_id: row.id, skip_code: null, skip_reason: null });
      uploadRows.push({ item, row });
    }
    // One statement per table for the whole call (up to 100 files).
    if (uploadRows.length) await INSERT_UPLOADS(trx, uploadRows.map((u) => u.row));
    await INSERT_SESSION_FILES(trx, sessionFiles);
    counts = await updateLockProgress(trx, session);
  });

  const liveSkipped = skipped.filter((s) => live(s.path, s.input_index));
  const uploads: UploadItem[] = [];
  for (const { item, row } of uploadRows.filter((u) => live(u.item.p.path, u.item.index))) {
    uploads.push({ input_index: item.index, path: row.path, name: item.name, signed_blob_id: signId(ctx.secret, SIGNED_BLOB, row.id), upload: await uploadTarget(ctx, row) });
  }
  return {
    session: touched,
    counts,
    uploads,
    skipped: liveSkipped,
    remaining: counts!.unsaved,
    message: `${uploads.length} upload target(s)${liveSkipped.length ? `, ${liveSkipped.length} skipped` : ''}. PUT each file's bytes with exactly the returned headers, then call finalize_batch.`,
  };
}
