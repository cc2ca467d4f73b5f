import type { Kysely } from 'kysely';
import type { DB, DirectUploadsTable } from '../db/schema.ts';
import type { DurableCommits } from '../db/durable-commit.ts';
import { iso } from '../time.ts';
import { touchSessions } from '../uploads/upload-sessions.repo.ts';

// Marking direct uploads as received, with group commit: every upload whose bytes became durable
// while the previous commit ran is recorded by the next one, in one transaction. A caller's
// promise resolves only once the commit that holds its row is durable, so an answered PUT is as
// durable as before; a busy server makes one commit per wave instead of per file, and on SQLite
// the WAL's sync runs on libuv's pool (src/db/durable-commit.ts) while the next group commits.

interface Waiting {
  row: DirectUploadsTable;
  md5: string;
  settle(err?: unknown): void;
}

interface Queue {
  waiting: Waiting[];
  running: boolean;
}

/** Rows per commit at most. */
const MAX_GROUP = 200;
/** One queue per database handle (several apps may share a test process). */
const queues = new WeakMap<Kysely<DB>, Queue>();

type Deps = { db: Kysely<DB>; commits: DurableCommits; now: () => Date; config: { uploadSessionIdleSeconds: number } };

/** Records that a direct upload's bytes are stored (and their blob row); resolves once committed. */
export function recordUploaded(ctx: Deps, row: DirectUploadsTable, md5: string): Promise<void> {
  let queue = queues.get(ctx.db);
  if (!queue) queues.set(ctx.db, (queue = { waiting: [], running: false }));
  const q = queue;
  return new Promise<void>((resolve, reject) => {
    q.waiting.push({
      row,
      md5,
      settle: (err) => {
        if (err) return reject(err);
        row.status = 'uploaded';
        resolve();
      },
    });
    if (!q.running) void drain(ctx, q);
  });
}

async function drain(ctx: Deps, q: Queue): Promise<void> {
  q.running = true;
  try {
    while (q.waiting.length) {
      // One turn of the event loop first: uploads finishing meanwhile (their fsyncs complete on
      // the thread pool, and SQLite's commit blocks the loop) join this group.
      await new Promise<void>((resolve) => setImmediate(resolve));
      const group = q.waiting.splice(0, MAX_GROUP);
      try {
        const { durable } = await commitGroup(ctx, group, ctx.now());
        durable.then(
          () => group.forEach((w) => w.settle()),
          (err: unknown) => group.forEach((w) => w.settle(err)),
        );
      } catch (err) {
        for (const w of group) w.settle(err);
      }
    }
  } finally {
    q.running = false;
  }
}

/** Resolves once committed, with the promise of its durability. */
async function commitGroup(ctx: Deps, group: Waiting[], at: Date): Promise<{ durable: Promise<void> }> {
  const now = iso(at);
  const blobs = new Map(group.map((w) => [w.row.sha256, { sha256: w.row.sha256, byte_size: w.row.byte_size, md5: w.md5, created_at: now }]));
  const { durable } = await ctx.commits.commit(async (trx) => {
    await trx
      .insertInto('blobs')
      .values([...blobs.values()])
      .onConflict((oc) => oc.column('sha256').doNothing())
      .execute();
    await trx
      .updateTable('direct_uploads')
      .set({ status: 'uploaded', uploaded_at: now })
      .where('id', 'in', group.map((w) => w.row.id))
      .where('status', '=', 'pending')
      .execute();
    // Bytes arriving are activity of their upload session: its idle clock restarts.
    const sessions = [...new Set(group.map((w) => w.row.upload_session_id).filter((id): id is string => id !== null))];
    await touchSessions(trx, sessions, at, ctx.config.uploadSessionIdleSeconds);
  });
  return { durable };
}
