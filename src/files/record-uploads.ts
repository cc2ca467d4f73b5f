import type { Kysely } from 'kysely';
import type { DB, DirectUploadsTable } from '../db/schema.ts';
import type { DurableCommits } from '../db/durable-commit.ts';
import { iso } from '../time.ts';
import { touchSessions } from '../uploads/upload-sessions.repo.ts';
import { GroupCommit } from '../db/group-commit.ts';
import { insertBlobRows } from '../blobs/blob-rows.ts';
import { compiledListQuery } from '../db/compiled-query.ts';

// Marking direct uploads as received, through the group commit (src/db/group-commit.ts): every
// upload whose bytes became durable while the previous commit ran is recorded by the next one, in
// one transaction. A PUT is answered only once the commit that holds its row is durable; on SQLite
// the WAL's sync runs on libuv's pool (src/db/durable-commit.ts) while the next group commits.

interface Uploaded {
  row: DirectUploadsTable;
  md5: string;
  /** The bytes themselves, for a small upload kept in its blob row (src/blobs/inline-blobs.ts); null: in the store. */
  inline: Buffer | null;
}

type Deps = { db: Kysely<DB>; commits: DurableCommits; now: () => Date; config: { uploadSessionIdleSeconds: number } };

// Run by every group (one per few PUTs): built once per list length (src/db/compiled-query.ts).
const MARK_UPLOADED = compiledListQuery(
  (db, ids: string[], at: string) => db.updateTable('direct_uploads').set({ status: 'uploaded', uploaded_at: at }).where('id', 'in', ids).where('status', '=', 'pending'),
  1,
);

/** One group commit per database handle (several apps may share a test process). */
const groups = new WeakMap<Kysely<DB>, GroupCommit<Uploaded>>();

/**
 * Records that a direct upload's bytes are stored (and their blob row, holding `inline` when the
 * bytes are kept there instead of the store); resolves once durable.
 */
export async function recordUploaded(ctx: Deps, row: DirectUploadsTable, md5: string, inline: Buffer | null = null): Promise<void> {
  let group = groups.get(ctx.db);
  if (!group) groups.set(ctx.db, (group = new GroupCommit((items) => commitGroup(ctx, items, ctx.now()))));
  await group.submit([{ row, md5, inline }]);
  row.status = 'uploaded';
}

/** Resolves once committed, with the promise of its durability. */
async function commitGroup(ctx: Deps, group: Uploaded[], at: Date): Promise<{ durable: Promise<void> }> {
  const now = iso(at);
  const blobs = new Map(group.map((w) => [w.row.sha256, { sha256: w.row.sha256, byte_size: w.row.byte_size, md5: w.md5, created_at: now, inline_bytes: w.inline }]));
  const { durable } = await ctx.commits.commit(async (trx) => {
    await insertBlobRows(trx, [...blobs.values()]);
    await MARK_UPLOADED.execute(trx, group.map((w) => w.row.id), now);
    // Bytes arriving are activity of their upload session: its idle clock restarts.
    const sessions = [...new Set(group.map((w) => w.row.upload_session_id).filter((id): id is string => id !== null))];
    await touchSessions(trx, sessions, at, ctx.config.uploadSessionIdleSeconds);
  });
  return { durable };
}
