import { sql, type Kysely } from 'kysely';
import type { DB, JobsTable } from '../db/schema.ts';
import type { Dialect } from '../db/database.ts';
import { newId } from '../ids.ts';
import { iso } from '../time.ts';
import { compiledInsert, compiledListQuery } from '../db/compiled-query.ts';

export const JOBS_CHANNEL = 'cubby_jobs';

export interface EnqueueOptions {
  /** Earliest start (default now). */
  runAt?: Date;
  maxAttempts?: number;
  /**
   * While a job with this key is queued or running, enqueueing another is a no-op. Keys that start
   * with `coalesce:` are released when the job is claimed: work that arrives while it runs queues
   * one more run, so a job that handles "everything pending" never misses late arrivals.
   */
  uniqueKey?: string;
}

export const COALESCE_PREFIX = 'coalesce:';

/**
 * Adds a job. Call it inside the transaction of the change it follows (the outbox): the job
 * exists exactly when the change does. On Postgres the wake-up NOTIFY is delivered at commit.
 * Returns the job id, or null when a job with the same unique key is pending.
 */
// Every change that queues work runs this; built once (src/db/compiled-query.ts).
const INSERT_JOB = compiledInsert('jobs', (qb) => qb.onConflict((oc: any) => oc.column('unique_key').doNothing()));

export async function enqueue(db: Kysely<DB>, dialect: Dialect, task: string, payload: unknown, now: Date, opts: EnqueueOptions = {}): Promise<string | null> {
  const row = jobRow(task, payload, now, opts);
  if (opts.uniqueKey?.startsWith(COALESCE_PREFIX)) return enqueueCoalesced(db, dialect, row);
  // Zero: the unique key is taken.
  return (await insertJobs(db, dialect, task, [row])) === 0 ? null : row.id;
}

/**
 * Adds one job of `task` per item, in one insert and, on Postgres, one wake-up: for changes that
 * queue a job per thing they store (text extraction of a group commit's attachments, of an upload
 * batch's documents), which made one insert and one NOTIFY each, two round trips per document
 * inside the transaction. Items whose unique key is taken are left out, as `enqueue` leaves them.
 * Not for coalesced keys (their share lock is per job). Resolves to the jobs added.
 */
export async function enqueueEach(db: Kysely<DB>, dialect: Dialect, task: string, items: { payload: unknown; opts?: EnqueueOptions }[], now: Date): Promise<number> {
  if (items.some((it) => it.opts?.uniqueKey?.startsWith(COALESCE_PREFIX))) throw new Error('enqueueEach: coalesced keys go through enqueue');
  if (!items.length) return 0;
  return insertJobs(db, dialect, task, items.map((it) => jobRow(task, it.payload, now, it.opts)));
}

/**
 * Inserts the rows (those whose unique key is taken are left out) and, on Postgres, wakes the
 * workers once if any was added (delivered at commit). Resolves to the rows added; a count the
 * driver did not give counts as all of them.
 */
async function insertJobs(db: Kysely<DB>, dialect: Dialect, task: string, rows: JobsTable[]): Promise<number> {
  const inserted = await INSERT_JOB(db, rows);
  const added = inserted === undefined ? rows.length : Number(inserted);
  if (added > 0 && dialect === 'postgres') await sql`select pg_notify(${JOBS_CHANNEL}, ${task})`.execute(db);
  return added;
}

function jobRow(task: string, payload: unknown, now: Date, opts: EnqueueOptions = {}): JobsTable {
  return {
    id: newId('job'),
    task,
    payload: JSON.stringify(payload ?? null),
    status: 'queued',
    run_at: iso(opts.runAt ?? now),
    attempts: 0,
    max_attempts: opts.maxAttempts ?? 10,
    locked_until: null,
    locked_by: null,
    last_error: null,
    unique_key: opts.uniqueKey ?? null,
    created_at: iso(now),
    updated_at: iso(now),
    finished_at: null,
  };
}

/**
 * A coalesced job already queued is share-locked (FOR KEY SHARE) until this transaction ends: a
 * claim (FOR UPDATE SKIP LOCKED) passes it over until this transaction's work is committed, so the
 * run sees that work; other enqueuers are not held up (the lock is shared). Without the lock the
 * job could be claimed and run between this enqueue and the commit, miss the work and leave it with
 * no job (received mail left withheld until the next arrival). If the job is claimed between the
 * insert and the lock, its key is gone: insert again. SQLite runs one writer at a time, so there a
 * claim waits for this transaction anyway.
 */
async function enqueueCoalesced(db: Kysely<DB>, dialect: Dialect, row: JobsTable): Promise<string | null> {
  if (dialect === 'postgres') return enqueueCoalescedPostgres(db, row);
  return (await INSERT_JOB(db, [row])) !== 0n ? row.id : null;
}

/**
 * The insert, else the share lock on the queued job, and the wake-up, in one statement: one round
 * trip instead of three inside every group commit of received mail, which holds its mailbox
 * meanwhile. Both parts read the statement's snapshot: a job committed after it began makes the
 * insert do nothing and stays unseen by the lock, and the next turn sees it.
 */
async function enqueueCoalescedPostgres(db: Kysely<DB>, row: JobsTable): Promise<string | null> {
  const insert = db
    .insertInto('jobs')
    .values(row)
    .onConflict((oc) => oc.column('unique_key').doNothing())
    .returning('id');
  // A turn ends the loop unless the job was claimed and its key taken again in between.
  for (let turn = 0; turn < 10; turn++) {
    const { rows } = await sql<{ inserted: string | null; held: string | null }>`with inserted as (${insert}),
      held as (select id from jobs where unique_key = ${row.unique_key} and not exists (select 1 from inserted) for key share),
      -- The worker passes a held job over: the wake-up at commit makes it look again.
      woken as (select pg_notify(${JOBS_CHANNEL}, ${row.task}) where exists (select 1 from inserted) or exists (select 1 from held))
      select (select id from inserted) as inserted, (select id from held) as held, (select count(*) from woken) as woken`.execute(db);
    if (rows[0]?.inserted) return row.id;
    if (rows[0]?.held) return null;
  }
  return null;
}

/**
 * Which of `tasks` have a job due (queued, or running with its lease run out): a read, so that a
 * worker looking for work writes nothing (and claims per task only) when there is some.
 */
// The job worker asks both several times a second: built once per dialect and task count.
const DUE_TASKS = compiledListQuery(
  (db, tasks, nowIso: string) =>
    db
      .selectFrom('jobs')
      .select('task')
      .distinct()
      .where('task', 'in', tasks)
      .where('run_at', '<=', nowIso)
      .where((eb) => eb.or([eb('status', '=', 'queued'), eb.and([eb('status', '=', 'running'), eb('locked_until', '<', nowIso)])])),
  1,
);

export async function dueTasks(db: Kysely<DB>, tasks: string[], now: Date): Promise<Set<string>> {
  if (tasks.length === 0) return new Set();
  const rows = await DUE_TASKS.execute(db, tasks, iso(now));
  return new Set(rows.map((r) => r.task));
}

/**
 * Claims up to `limit` due jobs for `workerId` with a lease. Jobs whose lease ran out (a
 * worker died) are due again. Postgres skips rows other workers hold (SKIP LOCKED).
 */
export async function claimJobs(db: Kysely<DB>, dialect: Dialect, workerId: string, tasks: string[], now: Date, leaseMs: number, limit: number): Promise<JobsTable[]> {
  if (tasks.length === 0) return [];
  return CLAIM[dialect].execute(db, tasks, iso(now), iso(now.getTime() + leaseMs), workerId, limit);
}

const claimQuery = (skipLocked: boolean) =>
  compiledListQuery((db, tasks, nowIso: string, lockedUntil: string, workerId: string, limit: number) => {
    let pick = db
      .selectFrom('jobs')
      .select('id')
      .where('task', 'in', tasks)
      .where('run_at', '<=', nowIso)
      .where((eb) => eb.or([eb('status', '=', 'queued'), eb.and([eb('status', '=', 'running'), eb('locked_until', '<', nowIso)])]))
      .orderBy('run_at')
      .orderBy('id')
      .limit(limit);
    if (skipLocked) pick = pick.forUpdate().skipLocked();
    return db
      .updateTable('jobs')
      .set((eb) => ({
        status: 'running',
        attempts: eb('attempts', '+', 1),
        locked_until: lockedUntil,
        locked_by: workerId,
        updated_at: nowIso,
        unique_key: sql<string | null>`case when substr(unique_key, 1, ${COALESCE_PREFIX.length}) = ${COALESCE_PREFIX} then null else unique_key end`,
      }))
      .where('id', 'in', pick)
      .returningAll();
  }, 4);
/** Built once per dialect and task count. Postgres skips rows other workers hold (SKIP LOCKED). */
const CLAIM: Record<Dialect, ReturnType<typeof claimQuery>> = { sqlite: claimQuery(false), postgres: claimQuery(true) };

/**
 * A finished job gives its unique key back so that the same work can be queued again, except
 * recurring ticks, whose key names their period: that period must not run twice.
 */
function keyAfterFinish(job: JobsTable): string | null {
  return job.unique_key?.startsWith('recurring:') ? job.unique_key : null;
}

export async function completeJob(db: Kysely<DB>, job: JobsTable, workerId: string, now: Date): Promise<void> {
  // The unique key is released so that a later job with the same key can be queued.
  await db
    .updateTable('jobs')
    .set({ status: 'done', locked_until: null, unique_key: keyAfterFinish(job), finished_at: iso(now), updated_at: iso(now) })
    .where('id', '=', job.id)
    .where('locked_by', '=', workerId)
    .execute();
}

export async function failJob(db: Kysely<DB>, job: JobsTable, workerId: string, now: Date, error: string, retryAt: Date | null): Promise<void> {
  const final = retryAt === null;
  await db
    .updateTable('jobs')
    .set({
      status: final ? 'failed' : 'queued',
      run_at: final ? job.run_at : iso(retryAt),
      locked_until: null,
      last_error: error.slice(0, 2000),
      unique_key: final ? keyAfterFinish(job) : job.unique_key,
      finished_at: final ? iso(now) : null,
      updated_at: iso(now),
    })
    .where('id', '=', job.id)
    .where('locked_by', '=', workerId)
    .execute();
}

/**
 * Gives running jobs of `workerId` back to the queue, due now, the attempt not counted (a
 * shutdown interrupted them; they did not fail). Returns how many were released.
 */
export async function releaseJobs(db: Kysely<DB>, ids: string[], workerId: string, now: Date): Promise<number> {
  if (!ids.length) return 0;
  const res = await db
    .updateTable('jobs')
    .set((eb) => ({ status: 'queued', run_at: iso(now), attempts: eb('attempts', '-', 1), locked_until: null, locked_by: null, updated_at: iso(now) }))
    .where('id', 'in', ids)
    .where('status', '=', 'running')
    .where('locked_by', '=', workerId)
    .executeTakeFirst();
  return Number(res.numUpdatedRows);
}

/** Removes finished jobs older than `keepMs`. */
export async function sweepFinishedJobs(db: Kysely<DB>, now: Date, keepMs = 7 * 86_400_000): Promise<number> {
  const res = await db
    .deleteFrom('jobs')
    .where('status', 'in', ['done', 'cancelled', 'failed'])
    .where('finished_at', '<', iso(now.getTime() - keepMs))
    .executeTakeFirst();
  return Number(res.numDeletedRows);
}

/** Cancels queued jobs of a task matching a payload field (e.g. deliveries of a webhook). */
export async function cancelQueuedJobs(db: Kysely<DB>, task: string, ids: string[], now: Date): Promise<number> {
  if (!ids.length) return 0;
  const res = await db
    .updateTable('jobs')
    .set({ status: 'cancelled', unique_key: null, finished_at: iso(now), updated_at: iso(now) })
    .where('task', '=', task)
    .where('status', '=', 'queued')
    .where('id', 'in', ids)
    .executeTakeFirst();
  return Number(res.numUpdatedRows);
}
