import type { FilesTable, FileVersionsTable, UploadSessionsTable } from '../db/schema.ts';
import type { RequestCtx } from '../context.ts';
import { presentFiles, presentVersions } from '../files/files.present.ts';
import { sessionCounts, sessionDeadline, type SessionCounts } from './upload-sessions.repo.ts';

/** Responses list at most this many saved files and skips (the rest are counted). */
export const MAX_LISTED = 250;

export interface UploadItem {
  input_index: number;
  path: string;
  name: string;
  signed_blob_id: string;
  upload: { url: string; headers: Record<string, string> };
}

export interface SkipItem {
  path: string;
  name: string | null;
  reason: string;
  code: string;
  input_index: number;
  details: Record<string, unknown>;
}

export interface SavedItem {
  input_index: number;
  path: string;
  file: FilesTable;
  version: FileVersionsTable;
  created: boolean;
}

/** What one call did to a session; the response lists this call's targets, saves and skips. */
export interface SessionResult {
  session: UploadSessionsTable;
  /** The session's counts as the call's own transaction left them (else they are read again). */
  counts?: SessionCounts;
  uploads?: UploadItem[];
  saved?: SavedItem[];
  skipped?: SkipItem[];
  finalizePending?: boolean;
  /** Files the session still has to save (and, in a final save, to delete). */
  remaining?: number;
  message: string;
}

export function presentSession(s: UploadSessionsTable, c: SessionCounts, idleSeconds: number) {
  // A pending session lasts until its hard deadline or until it falls idle, whichever is first.
  const pending = s.status === 'pending';
  return {
    id: s.id,
    mailbox_id: s.mailbox_id,
    status: s.status,
    base_mailbox_version_id: s.base_mailbox_version_id,
    target_mailbox_version_id: s.target_mailbox_version_id,
    uploads_expire_at: pending ? new Date(sessionDeadline(s, idleSeconds)).toISOString() : s.uploads_expire_at,
    idle_timeout_seconds: idleSeconds,
    session_closed_at: s.session_closed_at,
    files_count: c.files_count,
    pending_files_count: c.pending_files_count,
    uploaded_files_count: c.uploaded_files_count,
    finalized_files_count: c.finalized_files_count,
    skipped_files_count: c.skipped_files_count,
    skipped_code_counts: c.skipped_code_counts,
    failed_files_count: c.failed_files_count,
    delete_missing: s.delete_missing === 1,
    expected_file_count: s.expected_file_count,
    client_session_key: s.client_session_key,
    created_at: s.created_at,
  };
}

/** The session response body (without envelope): the record under `mailbox_upload_session` and this call's results. */
export async function sessionResponse(ctx: RequestCtx, r: SessionResult) {
  const counts = r.counts ?? (await sessionCounts(ctx.db, r.session.id));
  const saved = r.saved ?? [];
  const listed = saved.slice(0, MAX_LISTED);
  const [files, versions] = await Promise.all([presentFiles(ctx.db, listed.map((x) => x.file)), presentVersions(ctx.db, listed.map((x) => x.version))]);
  const skipped = r.skipped ?? [];
  const created = saved.filter((x) => x.created).length;
  return {
    mailbox_upload_session: presentSession(r.session, counts, ctx.config.uploadSessionIdleSeconds),
    uploads: r.uploads ?? [],
    uploaded: listed.map((x, i) => ({ input_index: x.input_index, path: x.path, file: files[i], version: versions[i], created: x.created })),
    uploaded_count: saved.length,
    uploaded_truncated: saved.length > MAX_LISTED,
    created_count: created,
    updated_count: saved.length - created,
    skipped: skipped.slice(0, MAX_LISTED),
    skipped_count: skipped.length,
    skipped_truncated: skipped.length > MAX_LISTED,
    finalize_pending: r.finalizePending ?? false,
    remaining_files_count: r.remaining ?? counts.unsaved,
    message: r.message,
  };
}
