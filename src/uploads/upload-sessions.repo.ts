import { sql, type Kysely } from 'kysely';
import type { DB, UploadSessionFilesTable, UploadSessionsTable } from '../db/schema.ts';
import { compiledQuery } from '../db/compiled-query.ts';

export const LOCK_KIND = 'upload_session';
/** Activity closer than this to the last recorded one does not move a session's idle clock (1 % of the idle time, at most 1 s). */
const touchGranularityMs = (idleSeconds: number) => Math.min(1000, idleSeconds * 10);

export interface SessionCounts {
  files_count: number;
  pending_files_count: number;
  uploaded_files_count: number;
  finalized_files_count: number;
  skipped_files_count: number;
  skipped_code_counts: Record<string, number>;
  failed_files_count: number;
  /** Declared and not yet saved, skipped or discarded (pending + uploaded). */
  unsaved: number;
}

// Read for each group of arriving files (src/files/record-uploads.ts): built once (src/db/compiled-query.ts).
const SESSION_CLOCK = compiledQuery((db, id: string) => db.selectFrom('upload_sessions').select(['id', 'mailbox_id', 'uploads_expire_at', 'updated_at']).where('id', '=', id).where('status', '=', 'pending'), 1);

const MARK_SAVED = compiledQuery(
  (db, id: string, fileId: string, versionId: string, created: number, at: string) =>
    db.updateTable('upload_session_files').set({ status: 'saved', file_id: fileId, file_version_id: versionId, created, saved_at: at }).where('id', '=', id),
  5,
);
const MARK_SKIPPED = compiledQuery(
  (db, id: string, code: string | null, reason: string) => db.updateTable('upload_session_files').set({ status: 'skipped', skip_code: code, skip_reason: reason }).where('id', '=', id),
  3,
);

/** A declared file saved as this file version (each file of a finalize). */
export async function markSaved(db: Kysely<DB>, id: string, saved: { fileId: string; versionId: string; created: boolean; at: string }): Promise<void> {
  await MARK_SAVED.execute(db, id, saved.fileId, saved.versionId, saved.created ? 1 : 0, saved.at);
}

/** A declared file not saved: the path already holds it (code and reason as answered). */
export async function markSkipped(db: Kysely<DB>, id: string, code: string | null, reason: string): Promise<void> {
  await MARK_SKIPPED.execute(db, id, code, reason);
}

export function findSession(db: Kysely<DB>, mailboxId: string, sessionId: string): Promise<UploadSessionsTable | undefined> {
  return db.selectFrom('upload_sessions').selectAll().where('id', '=', sessionId).where('mailbox_id', '=', mailboxId).executeTakeFirst();
}

export function pendingSessionByKey(db: Kysely<DB>, mailboxId: string, key: string): Promise<UploadSessionsTable | undefined> {
  return db.selectFrom('upload_sessions').selectAll().where('mailbox_id', '=', mailboxId).where('client_session_key', '=', key).where('status', '=', 'pending').executeTakeFirst();
}

/**
 * Counts by state. A declared file is "pending" until its bytes arrive and "uploaded" after
 * (the PUT endpoint marks its direct upload); superseded declarations are not counted.
 */
export async function sessionCounts(db: Kysely<DB>, sessionId: string): Promise<SessionCounts> {
  // Three small grouped selects rather than one join: the states come from the (session_id,
  // status) index alone, and only the few unsaved rows (and skipped ones, for their codes) are read
  // or joined. A session of thousands of files is counted after every declaration and save, so one
  // join over every row made declaring n files cost O(n²). One statement, so one snapshot: the
  // counts never mix states from before and after another request's commit.
  const { rows } = await sql<{ status: string; skip_code: string | null; upload_status: string | null; n: number | string }>`
    select status, null as skip_code, null as upload_status, count(*) as n from upload_session_files
      where session_id = ${sessionId} and status in ('saved', 'failed') group by status
    union all
    select status, skip_code, null, count(*) from upload_session_files
      where session_id = ${sessionId} and status = 'skipped' group by status, skip_code
    union all
    select f.status, null, d.status, count(*) from upload_session_files f left join direct_uploads d on d.id = f.direct_upload_id
      where f.session_id = ${sessionId} and f.status = 'pending' group by f.status, d.status
  `.execute(db);
  const c: SessionCounts = { files_count: 0, pending_files_count: 0, uploaded_files_count: 0, finalized_files_count: 0, skipped_files_count: 0, skipped_code_counts: {}, failed_files_count: 0, unsaved: 0 };
  for (const r of rows) {
    const n = Number(r.n);
    c.files_count += n;
    if (r.status === 'pending') {
      c.unsaved += n;
      if (r.upload_status === 'pending') c.pending_files_count += n;
      else c.uploaded_files_count += n;
    } else if (r.status === 'saved') c.finalized_files_count += n;
    else if (r.status === 'failed') c.failed_files_count += n;
    else if (r.status === 'skipped') {
      c.skipped_files_count += n;
      const code = r.skip_code ?? 'SKIPPED';
      c.skipped_code_counts[code] = (c.skipped_code_counts[code] ?? 0) + n;
    }
  }
  return c;
}

export async function countUnsaved(db: Kysely<DB>, sessionId: string): Promise<number> {
  const row = await db.selectFrom('upload_session_files').select((eb) => eb.fn.countAll<number>().as('n')).where('session_id', '=', sessionId).where('status', '=', 'pending').executeTakeFirstOrThrow();
  return Number(row.n);
}

/**
 * The next unsaved files to save, oldest first: those whose bytes are known to be there,
 * then the rest (their bytes are checked, and their absence reported, before saving).
 */
export async function nextUnsaved(db: Kysely<DB>, sessionId: string, limit: number): Promise<UploadSessionFilesTable[]> {
  const base = () =>
    db
      .selectFrom('upload_session_files as f')
      .innerJoin('direct_uploads as d', 'd.id', 'f.direct_upload_id')
      .selectAll('f')
      .where('f.session_id', '=', sessionId)
      .where('f.status', '=', 'pending')
      .orderBy('f.id')
      .limit(limit);
  const ready = await base().where('d.status', '!=', 'pending').execute();
  if (ready.length >= limit) return ready;
  const rest = await base().where('d.status', '=', 'pending').limit(limit - ready.length).execute();
  return [...ready, ...rest];
}

/** Live files of the mailbox that the session did not name (never under `_email/`): what delete_missing removes. */
function pruneQuery(db: Kysely<DB>, session: UploadSessionsTable) {
  return db
    .selectFrom('files')
    .where('files.mailbox_id', '=', session.mailbox_id)
    .where('files.live_path', 'is not', null)
    .where(sql<string>`substr(lower(files.live_path), 1, 7)`, '!=', '_email/')
    .where(({ not, exists, selectFrom }) =>
      not(
        exists(
          selectFrom('upload_session_files as f')
            .select('f.id')
            .where('f.session_id', '=', session.id)
            .where('f.status', '!=', 'superseded')
            .whereRef('f.path', '=', 'files.live_path'),
        ),
      ),
    );
}

export function pruneCandidates(db: Kysely<DB>, session: UploadSessionsTable, limit: number) {
  return pruneQuery(db, session).selectAll('files').orderBy('files.id').limit(limit).execute();
}

export async function countPruneCandidates(db: Kysely<DB>, session: UploadSessionsTable): Promise<number> {
  if (session.delete_missing !== 1) return 0;
  const row = await pruneQuery(db, session).select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
  return Number(row.n);
}

/**
 * Locks the mailbox row until the transaction ends, on both databases (an UPDATE takes a
 * row lock in Postgres; SQLite write transactions are serial already).
 */
export async function lockMailboxRow(db: Kysely<DB>, mailboxId: string): Promise<void> {
  await db.updateTable('mailboxes').set((eb) => ({ updated_at: eb.ref('updated_at') })).where('id', '=', mailboxId).execute();
}

/**
 * The time a pending session's lock and unsaved uploads last until: its hard deadline
 * (uploads_expire_at), or `idleSeconds` after its last activity, whichever is first. A client
 * that dies mid-session sends nothing more, so its lock lapses after the idle time.
 */
export function sessionDeadline(s: Pick<UploadSessionsTable, 'uploads_expire_at' | 'updated_at'>, idleSeconds: number): number {
  return Math.min(Date.parse(s.uploads_expire_at), Date.parse(s.updated_at) + idleSeconds * 1000);
}

/**
 * Records activity on pending sessions (a declaration, a save, bytes arriving): the idle clock
 * restarts and the mailbox lock the session holds is extended to the new deadline. Returns the
 * sessions whose clock moved.
 */
export async function touchSessions(db: Kysely<DB>, sessionIds: string[], now: Date, idleSeconds: number): Promise<Set<string>> {
  const touched = new Set<string>();
  if (!sessionIds.length) return touched;
  const at = now.toISOString();
  for (const id of sessionIds) {
    const r = await SESSION_CLOCK.executeTakeFirst(db, id);
    if (!r) continue;
    // Touched a moment ago: the clock is left as is (it runs at most that much early), sparing
    // two writes per group of arriving files to a session that is uploading.
    const since = now.getTime() - Date.parse(r.updated_at);
    if (since >= 0 && since < touchGranularityMs(idleSeconds)) continue;
    // The mailbox row first, then the session: the order every session write takes its locks in
    // (lockMailboxRow, then recheckPending), so bytes arriving (record-uploads' group commit)
    // while the same session declares more files cannot deadlock on Postgres.
    const until = new Date(sessionDeadline({ uploads_expire_at: r.uploads_expire_at, updated_at: at }, idleSeconds)).toISOString();
    await db.updateTable('mailboxes').set({ locked_until: until }).where('id', '=', r.mailbox_id).where('lock_kind', '=', LOCK_KIND).where('lock_progress', 'like', `{"session_id":"${r.id}"%`).execute();
    await db.updateTable('upload_sessions').set({ updated_at: at }).where('id', '=', r.id).execute();
    touched.add(r.id);
  }
  return touched;
}

/** Who holds the mailbox's upload-session lock, if anyone (ignoring expiry). */
export function lockHolder(m: { lock_kind: string | null; lock_progress: string | null }): string | null {
  if (m.lock_kind !== LOCK_KIND || !m.lock_progress) return null;
  return (JSON.parse(m.lock_progress) as { session_id?: string }).session_id ?? null;
}

export function lockProgress(session: UploadSessionsTable, counts?: Pick<SessionCounts, 'files_count' | 'finalized_files_count'>): string {
  return JSON.stringify({
    session_id: session.id,
    expected_file_count: session.expected_file_count,
    files_count: counts?.files_count ?? 0,
    finalized_files_count: counts?.finalized_files_count ?? 0,
  });
}

/** Writes the session's progress into the mailbox lock; returns the counts (for the response, saving a second count). */
export async function updateLockProgress(db: Kysely<DB>, session: UploadSessionsTable): Promise<SessionCounts> {
  const counts = await sessionCounts(db, session.id);
  await db.updateTable('mailboxes').set({ lock_progress: lockProgress(session, counts) }).where('id', '=', session.mailbox_id).where('lock_kind', '=', LOCK_KIND).where('lock_progress', 'like', `{"session_id":"${session.id}"%`).execute();
  return counts;
}

export interface SessionFileState {
  path: string;
  sha256: string;
  byte_size: number;
  /** declared: no bytes yet; received: bytes stored, not saved; saved; skipped (identical content); failed (discarded). */
  state: 'declared' | 'received' | 'saved' | 'skipped' | 'failed';
}

/** The live declarations of a session (not superseded), for a client resuming it. */
export async function sessionFileStates(db: Kysely<DB>, sessionId: string): Promise<SessionFileState[]> {
  const rows = await db
    .selectFrom('upload_session_files as f')
    .leftJoin('direct_uploads as d', 'd.id', 'f.direct_upload_id')
    .select(['f.path', 'f.sha256', 'f.byte_size', 'f.status', 'd.status as upload_status'])
    .where('f.session_id', '=', sessionId)
    .where('f.status', '!=', 'superseded')
    .orderBy('f.id')
    .execute();
  return rows.map((r) => ({
    path: r.path,
    sha256: r.sha256,
    byte_size: Number(r.byte_size),
    state: r.status === 'pending' ? (r.upload_status === 'pending' ? 'declared' : 'received') : r.status === 'saved' ? 'saved' : r.status === 'skipped' ? 'skipped' : 'failed',
  }));
}
