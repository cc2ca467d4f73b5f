import fsp from 'node:fs/promises';
import { CompiledQuery, type Kysely } from 'kysely';
import type { DB } from './schema.ts';

/**
 * A transaction whose commit and whose durability are awaited separately: `commit` runs the work
 * in one transaction and resolves once it is committed (visible to other queries), with `durable`,
 * which resolves once the commit is on disk. Whoever acknowledges the write (an SMTP 250) waits for
 * `durable`; a group commit may meanwhile start its next transaction.
 *
 * Why: better-sqlite3 is synchronous, so with `synchronous = FULL` every commit's WAL fsync blocks
 * the event loop (0.5–3 ms on a quiet disk, tens of ms on a busy one) and no SMTP session is
 * served meanwhile. Here the transaction commits with `synchronous = NORMAL` (the WAL frames are
 * written, not synced) and the WAL file is then fdatasynced on libuv's pool before `durable`
 * resolves. That is the same guarantee as FULL for everything acknowledged: FULL's commit syncs the
 * WAL, and so does this, before the acknowledgement; checkpoints under NORMAL still sync the WAL
 * before copying it into the database and the database after (sqlite.org/pragma.html#pragma_synchronous).
 * The setting is changed for this transaction only, on the connection it holds: every other write
 * keeps FULL. On Postgres the commit is durable when it returns (synchronous_commit is left as is).
 */
export interface DurableCommits {
  commit<T>(work: (trx: Kysely<DB>) => Promise<T>): Promise<{ value: T; durable: Promise<void> }>;
  /**
   * Runs `work` (statements or a transaction of its own) whose commits need not be on disk when it
   * returns: on SQLite with `synchronous = NORMAL`, so they are written to the WAL without an fsync
   * on the event loop, and the next synced commit (any FULL write, or a `commit`'s sync) covers them.
   * The WAL is a log: a power loss can lose only its latest commits, never an earlier one while
   * keeping a later one, and a process crash loses nothing. For bookkeeping that is redone when
   * lost: job claims and completions (a job whose claim or completion is lost runs again, which
   * jobs must tolerate anyway) and the labeling a lost completion re-runs. On Postgres `work` runs
   * as is.
   */
  relaxed<T>(work: (db: Kysely<DB>) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

/**
 * One transaction, resolving once it is durable: for a write a client is told of (an HTTP answer),
 * with the disk's sync on libuv's pool instead of the event loop, where other requests go on
 * meanwhile (and writes committing close together share one sync).
 */
export async function commitDurably<T>(commits: DurableCommits, work: (trx: Kysely<DB>) => Promise<T>): Promise<T> {
  const { value, durable } = await commits.commit(work);
  await durable;
  return value;
}

export interface DurableOptions {
  /** Tests: awaited before a commit is made durable (a slow fsync). */
  beforeDurable?: () => Promise<void>;
}

const done = Promise.resolve();

// Run around every durable commit (each group of received mail or uploaded files): built once.
const SYNC_NORMAL = CompiledQuery.raw('PRAGMA synchronous = NORMAL');
const SYNC_FULL = CompiledQuery.raw('PRAGMA synchronous = FULL');

export function postgresCommits(db: Kysely<DB>, opts: DurableOptions = {}): DurableCommits {
  return {
    async commit(work) {
      const value = await db.transaction().execute(work);
      return { value, durable: opts.beforeDurable ? opts.beforeDurable() : done };
    },
    relaxed: (work) => work(db),
    close: async () => undefined,
  };
}

export function sqliteCommits(db: Kysely<DB>, file: string, opts: DurableOptions = {}): DurableCommits {
  const wal = file === ':memory:' ? null : new WalSync(`${file}-wal`);
  return {
    async commit(work) {
      if (!wal) return { value: await db.transaction().execute(work), durable: opts.beforeDurable ? opts.beforeDurable() : done };
      // One connection held throughout, so no other transaction commits while NORMAL is set.
      const value = await db.connection().execute(async (conn) => {
        await conn.executeQuery(SYNC_NORMAL);
        try {
          return await conn.transaction().execute(work);
        } finally {
          await conn.executeQuery(SYNC_FULL);
        }
      });
      const durable = opts.beforeDurable ? opts.beforeDurable().then(() => wal.sync()) : wal.sync();
      return { value, durable };
    },
    async relaxed(work) {
      if (!wal) return work(db);
      return db.connection().execute(async (conn) => {
        await conn.executeQuery(SYNC_NORMAL);
        try {
          return await work(conn);
        } finally {
          await conn.executeQuery(SYNC_FULL);
        }
      });
    },
    close: async () => wal?.close(),
  };
}

/**
 * fdatasync of the WAL file on libuv's pool. Each sync() resolves after an fdatasync that started
 * after the call, so it covers every frame written before it; calls made while one runs share the
 * next one (a busy disk gets one sync per round, not one per commit).
 */
class WalSync {
  private handle: fsp.FileHandle | null = null;
  private running: Promise<void> | null = null;
  private queued: Promise<void> | null = null;

  constructor(private readonly path: string) {}

  sync(): Promise<void> {
    if (!this.running) {
      this.running = this.run().finally(() => (this.running = null));
      return this.running;
    }
    this.queued ??= this.running.catch(() => undefined).then(() => {
      this.queued = null;
      return this.sync();
    });
    return this.queued;
  }

  async close(): Promise<void> {
    await this.running?.catch(() => undefined);
    await this.handle?.close().catch(() => undefined);
    this.handle = null;
  }

  private async run(): Promise<void> {
    // Opened once: SQLite keeps the -wal file (the same inode) for as long as any connection to the
    // database is open, and the app's connection, whose commits this syncs, is open until close().
    // Another connection closing leaves it; a checkpoint that starts the WAL over writes the same
    // file. (A stat of the path before each sync, to catch a replaced file, cost one system call
    // per group commit on the event loop.)
    this.handle ??= await fsp.open(this.path, 'r');
    await this.handle.datasync();
  }
}
