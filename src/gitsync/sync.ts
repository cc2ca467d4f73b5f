import fs from 'node:fs';
import { createHash } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { AppDeps, Actor } from '../context.ts';
import type { DB } from '../db/schema.ts';
import { AppError } from '../errors.ts';
import { iso } from '../time.ts';
import { limitsFor } from '../accounts/limits.service.ts';
import { billingGroupId } from '../accounts/accounts.service.ts';
import { recordActivity } from '../activity/activity.service.ts';
import { MailboxChange } from '../files/mailbox-change.ts';
import { deleteFileVersion, writeFileVersion } from '../files/files.write.ts';
import { findFileByPath, groupUsage } from '../files/files.repo.ts';
import { cleanPath, isEmailPath, mimeFromName } from '../files/paths.ts';
import { RetryJobAt } from '../jobs/worker.ts';
import { systemHostResolver } from '../net/resolve.ts';
import { queueBuild } from '../sites/publish.service.ts';
import { findPublication } from '../sites/publications.repo.ts';
import { sitesChanged } from '../sites/changes.ts';
import { GitSyncError } from './errors.ts';
import { gitHttpClient } from './git-http.ts';
import { fetchTree, remoteHead, type SkippedEntry } from './remote.ts';
import { unseal } from './secrets.ts';
import type { GitSyncsTable, GitSyncTrigger } from './gitsync.schema.ts';

// One sync: the branch head is read; when it moved (or a person asked), the tree is fetched and
// written into the bucket as ONE mailbox version with the file service's own write functions
// (limits, history, search extraction): new and changed files written, files the previous sync
// wrote and the repository no longer has deleted. Nothing under _email/ is touched, and files the
// repository never had are left alone. Any failure leaves the bucket as it was and is recorded as
// the connection's error.

export const SYNC_TASK = 'git_sync.run';
export const SCHEDULE_TASK = 'git_sync.schedule';
/** One sync may run this long (fetch and write) before it is abandoned. */
export const SYNC_DEADLINE_MS = 5 * 60_000;

export interface SyncPayload {
  bucket_id: string;
  trigger: GitSyncTrigger;
}

/** Another sync or a disconnect changed the connection while this one ran. */
class Overtaken extends Error {}

type Manifest = Record<string, { oid: string; sha256: string; size: number }>;

/** Queues a sync of the bucket (inside the caller's transaction). Pushes during a run queue one more. */
export function queueSync(deps: AppDeps, trx: Kysely<DB>, bucketId: string, trigger: GitSyncTrigger): Promise<string | null> {
  return deps.jobs.enqueue(trx, SYNC_TASK, { bucket_id: bucketId, trigger } satisfies SyncPayload, { uniqueKey: `coalesce:git_sync:${bucketId}`, maxAttempts: 5 });
}

let caCache: { file: string; pem: string } | undefined;
function extraCa(deps: AppDeps): string[] {
  const file = deps.config.gitSync.caFile;
  if (!file) return [];
  if (caCache?.file !== file) caCache = { file, pem: fs.readFileSync(file, 'utf8') };
  return [caCache.pem];
}

/** Why a repository path is not written into the bucket, or null when it is. */
function pathProblem(p: string): SkippedEntry['reason'] | null {
  if (isEmailPath(p)) return 'email_area';
  try {
    cleanPath(p);
    return null;
  } catch (err) {
    return err instanceof AppError && err.code === 'FILE_TYPE_FORBIDDEN' ? 'forbidden_type' : 'invalid_path';
  }
}

async function recordFailure(deps: AppDeps, bucketId: string, err: GitSyncError | AppError): Promise<void> {
  const now = iso(deps.now());
  await deps.db
    .updateTable('git_syncs')
    .set({ sync_state: 'failed', error_code: err.code, error_message: err.message.slice(0, 1000), last_checked_at: now, updated_at: now })
    .where('mailbox_id', '=', bucketId)
    .execute();
}

export async function runSync(deps: AppDeps, payload: SyncPayload): Promise<void> {
  const conn = await deps.db.selectFrom('git_syncs').selectAll().where('mailbox_id', '=', payload.bucket_id).executeTakeFirst();
  if (!conn || !deps.config.gitSync.enabled) return;
  const mailbox = await deps.db.selectFrom('mailboxes').select(['id', 'archived_at', 'deleted_at', 'account_id']).where('id', '=', conn.mailbox_id).executeTakeFirst();
  if (!mailbox || mailbox.deleted_at || mailbox.archived_at) return;
  const account = await deps.db.selectFrom('accounts').selectAll().where('id', '=', mailbox.account_id).executeTakeFirstOrThrow();
  if (account.suspended_at || account.status === 'read_only') {
    return recordFailure(deps, conn.mailbox_id, new AppError(account.suspended_at ? 'ACCOUNT_SUSPENDED' : 'ACCOUNT_READ_ONLY'));
  }
  await deps.db.updateTable('git_syncs').set({ sync_state: 'syncing', last_trigger: payload.trigger, updated_at: iso(deps.now()) }).where('mailbox_id', '=', conn.mailbox_id).execute();
  try {
    await syncNow(deps, conn, account, payload.trigger);
  } catch (err) {
    if (err instanceof AppError && err.code === 'MAILBOX_LOCKED') {
      // A batch upload holds the bucket: try again when its lock runs out.
      await deps.db.updateTable('git_syncs').set({ sync_state: 'queued', updated_at: iso(deps.now()) }).where('mailbox_id', '=', conn.mailbox_id).execute();
      throw new RetryJobAt(new Date(deps.now().getTime() + 1000 * Number(err.details.retry_after ?? 30)), 'the bucket is locked by a batch upload');
    }
    if (err instanceof Overtaken) {
      await deps.db.updateTable('git_syncs').set({ sync_state: 'queued', updated_at: iso(deps.now()) }).where('mailbox_id', '=', conn.mailbox_id).execute();
      throw new RetryJobAt(new Date(deps.now().getTime() + 1000), 'another sync finished first; running again from its state');
    }
    if (err instanceof GitSyncError || err instanceof AppError) return recordFailure(deps, conn.mailbox_id, err);
    deps.log.error({ err, bucket_id: conn.mailbox_id }, 'git sync failed');
    return recordFailure(deps, conn.mailbox_id, new GitSyncError('GIT_REPOSITORY_UNREACHABLE', 'The sync failed on our side; the next sync tries again.'));
  }
}

async function syncNow(deps: AppDeps, conn: GitSyncsTable, account: DB['accounts'], trigger: GitSyncTrigger): Promise<void> {
  const cfg = deps.config.gitSync;
  const url = new URL(conn.repository_url);
  const http = gitHttpClient({
    origin: url.origin,
    token: conn.token_ciphertext ? unseal(deps.secret, conn.mailbox_id, 'token', conn.token_ciphertext) : null,
    // The DNS outbound webhooks use (tests serve their own).
    resolver: deps.events?.webhooks.resolver ?? systemHostResolver,
    allowPrivate: cfg.allowPrivate,
    extraCa: extraCa(deps),
    maxBytes: cfg.maxRepoBytes,
    deadline: Date.now() + SYNC_DEADLINE_MS,
  });
  const head = await remoteHead(http, conn.repository_url, conn.branch);
  const now = deps.now();
  // Checks (schedule, push) skip the download when the branch has not moved since a good sync.
  if ((trigger === 'schedule' || trigger === 'webhook') && head === conn.last_commit && conn.error_code === null) {
    await deps.db.updateTable('git_syncs').set({ sync_state: 'synced', last_checked_at: iso(now), updated_at: iso(now) }).where('mailbox_id', '=', conn.mailbox_id).execute();
    return;
  }
  const tree = await fetchTree(http, conn.repository_url, conn.branch, conn.subdirectory, { maxFiles: cfg.maxFiles }, pathProblem);
  try {
    const previous = JSON.parse(conn.manifest) as Manifest;
    const live = await liveShas(deps.db, conn.mailbox_id);
    const manifest: Manifest = {};
    const writes: { path: string; sha256: string; size: number }[] = [];
    for (const f of tree.files) {
      const before = previous[f.path];
      if (before && before.oid === f.oid && live.get(f.path) === before.sha256) {
        manifest[f.path] = before;
        continue;
      }
      const bytes = await tree.readBlob(f.oid);
      if (bytes.length > cfg.maxFileBytes) throw new GitSyncError('GIT_FILE_TOO_LARGE', `${f.path} is ${bytes.length} bytes; at most ${cfg.maxFileBytes} are synced.`, { path: f.path, byte_size: bytes.length, max_bytes: cfg.maxFileBytes });
      const sha256 = createHash('sha256').update(bytes).digest('hex');
      manifest[f.path] = { oid: f.oid, sha256, size: bytes.length };
      if (live.get(f.path) === sha256) continue;
      await storeBlob(deps, bytes);
      writes.push({ path: f.path, sha256, size: bytes.length });
    }
    const deletes = Object.keys(previous).filter((p) => !(p in manifest) && !isEmailPath(p));
    await applyChange(deps, conn, account, { commit: tree.commit, manifest, writes, deletes, skipped: tree.skipped, trigger });
  } finally {
    await tree.close();
  }
}

/** Current content of the bucket's live files outside _email/, by path. */
async function liveShas(db: Kysely<DB>, mailboxId: string): Promise<Map<string, string | null>> {
  const rows = await db
    .selectFrom('files')
    .innerJoin('file_versions', 'file_versions.id', 'files.current_version_id')
    .select(['files.live_path', 'file_versions.sha256'])
    .where('files.mailbox_id', '=', mailboxId)
    .where('files.live_path', 'is not', null)
    .execute();
  return new Map(rows.filter((r) => !isEmailPath(r.live_path!)).map((r) => [r.live_path!, r.sha256]));
}

async function storeBlob(deps: AppDeps, bytes: Buffer): Promise<void> {
  const stored = await deps.blobs.putBuffer(bytes);
  await deps.db
    .insertInto('blobs')
    .values({ sha256: stored.sha256, byte_size: stored.byteSize, md5: stored.md5Base64, created_at: iso(deps.now()) })
    .onConflict((oc) => oc.column('sha256').doNothing())
    .execute();
}

async function applyChange(
  deps: AppDeps,
  conn: GitSyncsTable,
  account: DB['accounts'],
  c: { commit: string; manifest: Manifest; writes: { path: string; sha256: string; size: number }[]; deletes: string[]; skipped: SkippedEntry[]; trigger: GitSyncTrigger },
): Promise<void> {
  const now = deps.now();
  const actor: Actor = { userId: conn.created_by_user_id, apiKeyId: null, agent: null, requestId: null };
  const reason = `git sync ${c.commit.slice(0, 12)} (${c.trigger})`;
  let published = false;
  await deps.db.transaction().execute(async (trx) => {
    const change = await MailboxChange.begin(trx, deps.dialect, conn.mailbox_id, { actor, now, action: 'git.sync' });
    const limits = limitsFor(account);
    const group = await groupUsage(trx, billingGroupId(account));
    for (const w of c.writes) {
      const p = cleanPath(w.path);
      await writeFileVersion(change, limits, group, { ...p, sha256: w.sha256, byteSize: w.size, mimeType: mimeFromName(p.basename), reason, createdBySystem: 'git' });
    }
    for (const path of c.deletes) {
      const file = await findFileByPath(trx, conn.mailbox_id, path);
      if (file) await deleteFileVersion(change, file, reason);
    }
    const { versionId } = await change.commit();
    if (change.hasChanges) {
      await recordActivity(trx, actor, now, { accountId: conn.account_id, action: 'git.sync', targetType: 'mailbox', targetId: conn.mailbox_id, reason });
      if (conn.auto_publish === 1) published = await rebuildSite(deps, trx, conn.mailbox_id, now);
    }
    // Only over the state this sync started from: a sync that finished meanwhile (two runs of one
    // bucket on two workers) or a disconnect makes this one roll back and run again from the new state.
    const saved = await trx
      .updateTable('git_syncs')
      .set({
        sync_state: 'synced',
        last_commit: c.commit,
        last_synced_at: iso(now),
        last_checked_at: iso(now),
        ...(change.hasChanges ? { last_version_id: versionId } : {}),
        error_code: null,
        error_message: null,
        manifest: JSON.stringify(c.manifest),
        skipped: JSON.stringify(c.skipped.slice(0, 50)),
        updated_at: iso(now),
      })
      .where('mailbox_id', '=', conn.mailbox_id)
      .where('last_synced_at', conn.last_synced_at === null ? 'is' : '=', conn.last_synced_at)
      .where('repository_url', '=', conn.repository_url)
      .executeTakeFirst();
    if (Number(saved.numUpdatedRows) === 0) throw new Overtaken();
  });
  if (published) sitesChanged(deps.db);
}

/** Rebuilds the bucket's live (or going-live) main site with its saved settings. */
async function rebuildSite(deps: AppDeps, trx: Kysely<DB>, bucketId: string, now: Date): Promise<boolean> {
  const p = await findPublication(trx, bucketId, 'main');
  if (!p || (p.status !== 'published' && p.status !== 'publishing')) return false;
  const seq = Number(p.request_seq) + 1;
  await trx
    .updateTable('publications')
    .set({ publish_state: 'queued', request_seq: seq, publish_error: null, publish_enqueued_at: iso(now), publish_started_at: null, publish_completed_at: null, updated_at: iso(now) })
    .where('id', '=', p.id)
    .execute();
  await queueBuild(deps, trx, p.id, seq);
  return true;
}

/** The scheduler: queues a check of every connection not checked for CUBBY_GIT_SYNC_INTERVAL_S. */
export async function scheduleSyncs(deps: AppDeps): Promise<number> {
  if (!deps.config.gitSync.enabled) return 0;
  const cutoff = iso(deps.now().getTime() - deps.config.gitSync.intervalMs);
  const due = await deps.db
    .selectFrom('git_syncs')
    .innerJoin('mailboxes', 'mailboxes.id', 'git_syncs.mailbox_id')
    .select('git_syncs.mailbox_id')
    .where('mailboxes.deleted_at', 'is', null)
    .where('mailboxes.archived_at', 'is', null)
    .where('git_syncs.sync_state', 'in', ['synced', 'failed'])
    .where((eb) => eb.or([eb('git_syncs.last_checked_at', 'is', null), eb('git_syncs.last_checked_at', '<', cutoff)]))
    .orderBy('git_syncs.last_checked_at')
    .limit(200)
    .execute();
  for (const row of due) {
    await deps.db.transaction().execute(async (trx) => {
      await trx.updateTable('git_syncs').set({ sync_state: 'queued', updated_at: iso(deps.now()) }).where('mailbox_id', '=', row.mailbox_id).where('sync_state', 'in', ['synced', 'failed']).execute();
      await queueSync(deps, trx, row.mailbox_id, 'schedule');
    });
  }
  return due.length;
}
