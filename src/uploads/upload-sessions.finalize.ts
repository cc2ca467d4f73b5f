import type { UploadSessionFilesTable, UploadSessionsTable } from '../db/schema.ts';
import type { RequestCtx } from '../context.ts';
import { commitDurably } from '../db/durable-commit.ts';
import { AppError, invalidArgument } from '../errors.ts';
import { iso } from '../time.ts';
import { limitsFor } from '../accounts/limits.service.ts';
import { billingGroupId } from '../accounts/accounts.service.ts';
import { recordActivity } from '../activity/activity.service.ts';
import { loadMailbox, type LoadedMailbox } from '../mailboxes/mailboxes.service.ts';
import { MailboxChange } from '../files/mailbox-change.ts';
import { deleteFileVersion, writeFileVersions } from '../files/files.write.ts';
import { queueExtraction } from '../search/queue-extraction.ts';
import { groupUsage } from '../files/files.repo.ts';
import { cleanPath } from '../files/paths.ts';
import { ensureUploaded } from '../files/direct-uploads.service.ts';
import { countPruneCandidates, countUnsaved, lockMailboxRow, markSaved, markSkipped, nextUnsaved, pruneCandidates, updateLockProgress, type SessionCounts } from './upload-sessions.repo.ts';
import { closedError, closeSession, loadSession, recheckPending, requirePending } from './upload-sessions.lifecycle.ts';
import { forSessionWrite } from './upload-sessions.service.ts';
import type { SavedItem, SessionResult, SkipItem } from './upload-sessions.present.ts';
import { compiledListQuery } from '../db/compiled-query.ts';

export const DEFAULT_BATCH = 12;
export const MAX_BATCH = 100;
/** Files one finalize call writes or deletes; more answer 202 finalize_pending. */
export const FINALIZE_CHUNK = 300;

// Every save of a batch runs it: built once per batch length (src/db/compiled-query.ts).
const MARK_CONSUMED = compiledListQuery((db, ids: string[]) => db.updateTable('direct_uploads').set({ status: 'consumed' }).where('id', 'in', ids), 0);

/** Staging objects adopted at once (S3: each adoption is several requests). */
const ADOPT_CONCURRENCY = 8;

/**
 * Every file of the batch must have its bytes (S3: adopted now, several at a time); else
 * DIRECT_UPLOAD_NOT_FOUND (or UPLOAD_CHECKSUM_MISMATCH) naming the first such path, nothing saved.
 */
async function checkBytes(ctx: RequestCtx, rows: UploadSessionFilesTable[]): Promise<void> {
  if (!rows.length) return;
  const uploads = await ctx.db.selectFrom('direct_uploads').selectAll().where('id', 'in', rows.map((r) => r.direct_upload_id!)).execute();
  const byId = new Map(uploads.map((u) => [u.id, u]));
  const pending = rows.map((r) => byId.get(r.direct_upload_id!)!).filter((u) => u.status === 'pending');
  const failures: { index: number; err: unknown }[] = [];
  let next = 0;
  const worker = async () => {
    while (next < pending.length) {
      const index = next++;
      await ensureUploaded(ctx, pending[index]!).catch((err: unknown) => failures.push({ index, err }));
    }
  };
  await Promise.all(Array.from({ length: Math.min(ADOPT_CONCURRENCY, pending.length) }, worker));
  // Report the first failing file in batch order, whatever finished first.
  if (failures.length) throw failures.sort((a, b) => a.index - b.index)[0]!.err;
}

interface ChunkOutcome {
  session: UploadSessionsTable;
  counts: SessionCounts;
  saved: SavedItem[];
  skipped: SkipItem[];
  remaining: number;
}

/**
 * Saves the given session files in one transaction. Their file versions carry the session's
 * reserved mailbox version id and the mailbox's storage and file counts move with them; the
 * mailbox version itself is recorded when the session closes. In a final save, once nothing
 * is left to write, files the session did not name are deleted (delete_missing) within the
 * same budget, and the session is finalized when nothing remains.
 */
async function saveChunk(ctx: RequestCtx, loaded: LoadedMailbox, session: UploadSessionsTable, ids: string[], opts: { final: boolean; budget: number; reason: string | null }): Promise<ChunkOutcome> {
  const limits = limitsFor(loaded.access.account);
  const now = ctx.now();
  return commitDurably(ctx.commits, async (trx) => {
    const change = await MailboxChange.begin(trx, ctx.dialect, session.mailbox_id, { actor: ctx.actor, now, action: 'upload_session.finalize', sessionId: session.id, versionId: session.reserved_version_id });
    let s = await recheckPending(trx, session.id, now, ctx.config.uploadSessionIdleSeconds);
    const group = await groupUsage(trx, billingGroupId(loaded.access.account));
    const rows = ids.length
      ? await trx
          .selectFrom('upload_session_files as f')
          .innerJoin('direct_uploads as d', 'd.id', 'f.direct_upload_id')
          .selectAll('f')
          .select(['d.status as upload_status', 'd.checksum'])
          .where('f.id', 'in', ids)
          .where('f.status', '=', 'pending')
          .orderBy('f.id')
          .execute()
      : [];
    const saved: SavedItem[] = [];
    const skipped: SkipItem[] = [];
    const at = iso(now);
    for (const row of rows) {
      if (row.upload_status === 'pending') throw new AppError('DIRECT_UPLOAD_NOT_FOUND', `No bytes were uploaded for ${row.path}; upload them again, then retry.`, { path: row.path });
    }
    const results = await writeFileVersions(
      change,
      limits,
      group,
      rows.map((row) => ({
        ...cleanPath(row.path),
        name: row.name,
        sha256: row.sha256,
        byteSize: Number(row.byte_size),
        mimeType: row.content_type,
        reason: opts.reason,
        createdBySystem: 'api',
        policy: 'replace' as const,
      })),
    );
    for (const [i, row] of rows.entries()) {
      const r = results[i]!;
      if (r.skipped) {
        const reason = 'Identical content is already stored at this path.';
        await markSkipped(trx, row.id, r.skipCode, reason);
        skipped.push({ path: row.path, name: row.name, reason: 'duplicate', code: r.skipCode ?? 'DUPLICATE_FILE_VERSION', input_index: row.input_index, details: { message: reason } });
      } else {
        await markSaved(trx, row.id, { fileId: r.file.id, versionId: r.version.id, created: r.created, at });
        saved.push({ input_index: row.input_index, path: row.path, file: r.file, version: r.version, created: r.created });
      }
    }
    if (rows.length) await MARK_CONSUMED.execute(trx, rows.map((r) => r.direct_upload_id!));

    let remaining = await countUnsaved(trx, s.id);
    let pruned = 0;
    if (opts.final && remaining === 0 && s.delete_missing === 1 && opts.budget > rows.length) {
      for (const f of await pruneCandidates(trx, s, opts.budget - rows.length)) {
        await deleteFileVersion(change, f, opts.reason ?? 'Not in the upload session (delete_missing)');
        pruned++;
      }
      if (pruned) {
        s = { ...s, pruned_files_count: Number(s.pruned_files_count) + pruned };
        // The call's activity was recorded by recheckPending (its idle clock and the lock move together).
        await trx.updateTable('upload_sessions').set({ pruned_files_count: s.pruned_files_count }).where('id', '=', s.id).execute();
      }
    }
    if (opts.final) remaining += await countPruneCandidates(trx, s);
    if (change.hasChanges) {
      await queueExtraction(trx, ctx.dialect, now, change.written);
      await trx.updateTable('mailboxes').set({ storage_bytes: change.currentStorage, files_count: change.currentFiles, updated_at: at }).where('id', '=', s.mailbox_id).execute();
      await recordActivity(trx, ctx.actor, now, { accountId: s.account_id, action: 'upload_session.save', targetType: 'upload_session', targetId: s.id, reason: opts.reason });
    }
    const counts = await updateLockProgress(trx, s);
    if (opts.final && remaining === 0) s = await closeSession(trx, s, 'finalized', now, ctx.actor);
    return { session: s, counts, saved, skipped, remaining };
  });
}

export interface FinalizeInput {
  accountId?: string | null;
  mailboxId: string;
  sessionId: string;
  reason?: string | null;
}

/** Saves up to `limit` unsaved files of the session into the tree; never deletes anything. */
export async function finalizeBatch(ctx: RequestCtx, input: FinalizeInput & { limit?: number }): Promise<SessionResult> {
  const limit = input.limit ?? DEFAULT_BATCH;
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_BATCH) throw invalidArgument('limit', `must be an integer from 1 to ${MAX_BATCH}`);
  const loaded = await forSessionWrite(ctx, input.accountId, input.mailboxId);
  const session = await loadSession(ctx, loaded.mailbox.id, input.sessionId);
  requirePending(session);
  const rows = await nextUnsaved(ctx.db, session.id, limit);
  await checkBytes(ctx, rows);
  const r = await saveChunk(ctx, loaded, session, rows.map((x) => x.id), { final: false, budget: limit, reason: input.reason ?? null });
  return {
    ...r,
    message: r.saved.length || r.skipped.length ? `Saved ${r.saved.length} file(s); ${r.remaining} still unsaved.` : 'No uploaded files were waiting to be saved.',
  };
}

/**
 * complete (default): saves what remains, deletes omitted files once when delete_missing,
 * records one mailbox version and releases the lock; a bounded chunk per call, so a large
 * remainder answers finalize_pending (202) until done. complete=false cancels: unsaved files
 * are discarded and the lock released.
 */
export async function finalizeSession(ctx: RequestCtx, input: FinalizeInput & { complete?: boolean }, opts: { chunk?: number } = {}): Promise<SessionResult> {
  const complete = input.complete !== false;
  const loaded = complete ? await forSessionWrite(ctx, input.accountId, input.mailboxId) : await loadMailbox(ctx, input.accountId, input.mailboxId, 'write');
  const session = await loadSession(ctx, loaded.mailbox.id, input.sessionId);
  if (session.status === 'finalized') return { session, message: 'The session is already finalized; nothing changed.' };
  if (session.status !== 'pending') {
    if (!complete) return { session, message: `The session is already ${session.status}; nothing changed.` };
    throw closedError(session);
  }
  if (!complete) {
    const closed = await commitDurably(ctx.commits, async (trx) => {
      await lockMailboxRow(trx, session.mailbox_id);
      const s = await recheckPending(trx, session.id, ctx.now(), ctx.config.uploadSessionIdleSeconds);
      return closeSession(trx, s, 'failed', ctx.now(), ctx.actor);
    });
    return { session: closed, message: 'Upload session canceled; unsaved files were discarded and the mailbox lock released.' };
  }
  const chunk = opts.chunk ?? FINALIZE_CHUNK;
  const rows = await nextUnsaved(ctx.db, session.id, chunk);
  await checkBytes(ctx, rows);
  const r = await saveChunk(ctx, loaded, session, rows.map((x) => x.id), { final: true, budget: chunk, reason: input.reason ?? null });
  if (r.remaining > 0) {
    return { ...r, finalizePending: true, message: `Saved ${r.saved.length} file(s); ${r.remaining} remain. Call finalize again after Retry-After.` };
  }
  return { ...r, message: r.session.target_mailbox_version_id ? 'Upload session finalized in one mailbox version.' : 'Upload session finalized; nothing changed.' };
}
