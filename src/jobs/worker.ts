import pg from 'pg';
import { performance } from 'node:perf_hooks';
import type { Kysely } from 'kysely';
import type { DB, JobsTable } from '../db/schema.ts';
import type { Dialect } from '../db/database.ts';
import { randomToken } from '../ids.ts';
import { claimJobs, completeJob, dueTasks, enqueue, failJob, JOBS_CHANNEL, releaseJobs } from './queue.ts';
import type { Metrics } from '../ops/metrics.ts';

/** Thrown by a handler when retrying cannot help: the job fails at once. */
export class PermanentJobError extends Error {
  override readonly name = 'PermanentJobError';
}

/** Thrown by a handler to retry at a time it knows (e.g. a Retry-After). */
export class RetryJobAt extends Error {
  override readonly name = 'RetryJobAt';
  constructor(
    readonly at: Date,
    message: string,
  ) {
    super(message);
  }
}

export interface TaskDefinition {
  handler: (payload: any, job: JobsTable) => Promise<void>;
  /** Delay before retry number `attempt` (1-based), in ms. Default: exponential with jitter, capped at an hour. */
  backoffMs?: (attempt: number) => number;
  /** How long a claimed job may run before another worker may take it over. */
  leaseMs?: number;
  /** At most one job of this task runs at a time in this worker (sweeps that handle "everything pending"). */
  exclusive?: boolean;
  /**
   * With `exclusive`: a job of this task starts at least this long after this worker first saw it
   * due and after the previous one ended, so that a sweep queued again and again by a stream of
   * changes (labeling, behind every group commit of received mail) handles them in batches
   * instead of one run each.
   */
  minIntervalMs?: number;
}

/**
 * Wake-ups (an enqueue, a NOTIFY, a finished job) within this long share one look for work: a
 * burst of received mail (a group commit every few ms, each queueing labeling) costs a few claims
 * a second instead of one per commit, for at most this much more wait.
 */
const WAKE_DELAY_MS = 10;

export interface RecurringTask {
  task: string;
  everyMs: number;
}

export function defaultBackoff(attempt: number): number {
  const base = Math.min(3_600_000, 1000 * 2 ** Math.min(attempt, 20));
  return Math.round(base / 2 + (Math.random() * base) / 2);
}

export interface WorkerOptions {
  db: Kysely<DB>;
  dialect: Dialect;
  now: () => Date;
  log: { error: (obj: unknown, msg: string) => void; info?: (obj: unknown, msg: string) => void; warn?: (obj: unknown, msg: string) => void };
  /** Job outcomes and run times (src/ops/metrics.ts). */
  metrics?: Metrics;
  /** Postgres connection for LISTEN (cross-node wake-ups); absent on SQLite. */
  listen?: { url: string; schema?: string };
  concurrency?: number;
  /** Idle poll interval: wake-ups make most work start sooner. */
  pollMs?: number;
  /**
   * Runs the job table's bookkeeping (claims, completions, failures) without waiting for the disk
   * (DurableCommits.relaxed): a claim or completion lost to a power loss only makes the job run
   * again. Default: as is.
   */
  relaxed?: <T>(work: (db: Kysely<DB>) => Promise<T>) => Promise<T>;
}

/**
 * Runs registered tasks from the job table: claims due jobs with a lease, runs them with
 * bounded concurrency, completes or retries them with backoff, and enqueues recurring ticks.
 * Several workers (processes or nodes) may run against one database.
 */
export class Worker {
  readonly id = `wrk_${randomToken(10)}`;
  private tasks = new Map<string, TaskDefinition>();
  private recurring: RecurringTask[] = [];
  private lastPeriod = new Map<string, number>();
  private running = 0;
  private readonly runningJobs = new Map<string, JobsTable>();
  private runningByTask = new Map<string, number>();
  private lastEnded = new Map<string, number>();
  /** When this worker first saw a job of a task with minIntervalMs due (real time, whatever `now` says). */
  private dueSince = new Map<string, number>();
  private stopped = true;
  private timer: NodeJS.Timeout | undefined;
  private timerAt = 0;
  private recurringTimer: NodeJS.Timeout | undefined;
  private listener: pg.Client | undefined;
  private pumping = false;
  /** Settles when the pump in progress (if any) is done: stop() waits for it, so a claim never runs on a closed database. */
  private pumpDone: Promise<void> = Promise.resolve();
  private pumpAgain = false;
  private idleWaiters: (() => void)[] = [];

  constructor(private readonly opts: WorkerOptions) {}

  private relaxed<T>(work: (db: Kysely<DB>) => Promise<T>): Promise<T> {
    return this.opts.relaxed ? this.opts.relaxed(work) : work(this.opts.db);
  }

  register(task: string, def: TaskDefinition): void {
    this.tasks.set(task, def);
  }

  every(task: string, everyMs: number): void {
    this.recurring.push({ task, everyMs });
  }

  async start(): Promise<void> {
    this.stopped = false;
    if (this.opts.listen) {
      this.listener = new pg.Client({ connectionString: this.opts.listen.url });
      this.listener.on('notification', () => this.wake());
      this.listener.on('error', (err) => this.opts.log.error({ err }, 'job listener failed'));
      await this.listener.connect();
      await this.listener.query(`LISTEN ${JOBS_CHANNEL}`);
    }
    await this.tickRecurring();
    this.recurringTimer = setInterval(() => void this.tickRecurring(), 1000);
    this.recurringTimer.unref();
    this.schedule(0);
  }

  /**
   * Stops claiming work and waits for the jobs that are running. With `graceMs`, jobs still
   * running after it give their lease back (queued again, due now, the attempt not counted), so
   * another worker takes them at once instead of after the lease; a result they record later is
   * ignored (completion is guarded on the lease holder).
   */
  async stop(opts: { graceMs?: number } = {}): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    clearInterval(this.recurringTimer);
    await this.listener?.end().catch(() => undefined);
    await this.pumpDone;
    const idle = (async () => {
      while (this.running > 0) await new Promise<void>((r) => this.idleWaiters.push(r));
    })();
    if (opts.graceMs === undefined) return idle;
    let timer: NodeJS.Timeout | undefined;
    const late = await Promise.race([idle.then(() => false), new Promise<boolean>((r) => (timer = setTimeout(() => r(true), opts.graceMs)))]);
    clearTimeout(timer);
    if (!late || this.runningJobs.size === 0) return;
    const jobs = [...this.runningJobs.values()];
    const released = await releaseJobs(this.opts.db, jobs.map((j) => j.id), this.id, this.opts.now()).catch((err) => {
      this.opts.log.error({ err }, 'releasing job leases failed');
      return 0;
    });
    for (const job of jobs) {
      this.opts.metrics?.jobRuns.inc({ task: job.task, outcome: 'released' });
      this.opts.log.info?.({ job: { id: job.id, task: job.task, attempt: job.attempts, outcome: 'released' } }, 'job run');
    }
    this.opts.log.warn?.({ jobs: jobs.length, released }, 'shutdown grace ran out: running jobs gave their lease back');
  }

  /** Look for work soon (after a commit that enqueued some, or a NOTIFY): within WAKE_DELAY_MS. */
  wake(): void {
    if (!this.stopped) this.schedule(WAKE_DELAY_MS);
  }

  /** Resolves when no job is running and none is due: for tests and orderly shutdown. */
  async drain(): Promise<void> {
    for (;;) {
      await this.pump();
      if (this.running === 0) {
        const due = await this.opts.db
          .selectFrom('jobs')
          .select('id')
          .where('status', 'in', ['queued', 'running'])
          .where('run_at', '<=', this.opts.now().toISOString())
          .where('task', 'in', [...this.tasks.keys()])
          .limit(1)
          .execute();
        if (due.length === 0) return;
      }
      await new Promise<void>((r) => (this.running > 0 ? this.idleWaiters.push(r) : setTimeout(r, 10)));
    }
  }

  /** Pumps in `ms`, unless a pump is already due sooner. */
  private schedule(ms: number) {
    const at = performance.now() + ms;
    if (this.timer && this.timerAt <= at) return;
    clearTimeout(this.timer);
    this.timerAt = at;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.pump();
    }, ms);
    this.timer.unref();
  }

  private async pump(): Promise<void> {
    if (this.pumping) {
      this.pumpAgain = true;
      return;
    }
    this.pumping = true;
    let settle!: () => void;
    this.pumpDone = new Promise<void>((r) => (settle = r));
    try {
      do {
        this.pumpAgain = false;
        const free = (this.opts.concurrency ?? 4) - this.running;
        if (free <= 0 || this.stopped) break;
        // Each job is leased for its own task's time, so a job of a crashed worker is taken over
        // after its task's lease (a minute for most), not the longest lease of any task.
        const byLease = new Map<number, string[]>();
        const exclusive: [string, number][] = [];
        // One read first: most looks find nothing due, and then no claim (a write per lease group) runs.
        const due = await dueTasks(this.opts.db, [...this.tasks.keys()], this.opts.now());
        for (const [task, def] of this.tasks) {
          if (!due.has(task)) continue;
          const lease = def.leaseMs ?? 60_000;
          if (def.exclusive) {
            if (this.runningByTask.get(task)) continue;
            const interval = def.minIntervalMs ?? 0;
            const t = performance.now();
            if (interval && !this.dueSince.has(task)) this.dueSince.set(task, t);
            const wait = Math.max((this.lastEnded.get(task) ?? -Infinity) + interval, (this.dueSince.get(task) ?? -Infinity) + interval) - t;
            if (wait > 0) this.schedule(Math.ceil(wait));
            else {
              this.dueSince.delete(task);
              exclusive.push([task, lease]);
            }
            continue;
          }
          byLease.set(lease, [...(byLease.get(lease) ?? []), task]);
        }
        const jobs = [];
        // An exclusive task is claimed alone and one job at a time: claimed with the others, two of
        // its queued jobs (a retry and a new run) could be taken by one claim and run together.
        for (const [task, leaseMs] of exclusive) {
          if (jobs.length >= free) break;
          jobs.push(...(await this.relaxed((db) => claimJobs(db, this.opts.dialect, this.id, [task], this.opts.now(), leaseMs, 1))));
        }
        for (const [leaseMs, tasks] of byLease) {
          if (jobs.length >= free) break;
          jobs.push(...(await this.relaxed((db) => claimJobs(db, this.opts.dialect, this.id, tasks, this.opts.now(), leaseMs, free - jobs.length))));
        }
        for (const job of jobs) void this.run(job);
        if (jobs.length === free) this.pumpAgain = true;
      } while (this.pumpAgain && !this.stopped);
    } catch (err) {
      this.opts.log.error({ err }, 'claiming jobs failed');
    } finally {
      this.pumping = false;
      settle();
      if (!this.stopped) this.schedule(this.opts.pollMs ?? (this.opts.dialect === 'sqlite' ? 250 : 2000));
    }
  }

  private async run(job: JobsTable): Promise<void> {
    this.running++;
    this.runningJobs.set(job.id, job);
    this.runningByTask.set(job.task, (this.runningByTask.get(job.task) ?? 0) + 1);
    const def = this.tasks.get(job.task)!;
    const t0 = performance.now();
    let outcome: 'done' | 'retry' | 'failed' = 'done';
    try {
      await def.handler(JSON.parse(job.payload), job);
      await this.relaxed((db) => completeJob(db, job, this.id, this.opts.now()));
    } catch (err) {
      const e = err as Error;
      const now = this.opts.now();
      let retryAt: Date | null = null;
      if (err instanceof RetryJobAt) retryAt = err.at;
      else if (!(err instanceof PermanentJobError) && job.attempts < job.max_attempts) retryAt = new Date(now.getTime() + (def.backoffMs ?? defaultBackoff)(job.attempts));
      if (err instanceof RetryJobAt && job.attempts >= job.max_attempts) retryAt = null;
      await this.relaxed((db) => failJob(db, job, this.id, now, `${e?.name ?? 'Error'}: ${e?.message ?? String(err)}`, retryAt)).catch((failErr) =>
        this.opts.log.error({ err: failErr }, 'recording a job failure failed'),
      );
      outcome = retryAt === null ? 'failed' : 'retry';
      if (retryAt === null) this.opts.log.error({ err, task: job.task, job: job.id }, 'job failed permanently');
    } finally {
      const ms = Math.round(performance.now() - t0);
      // A job released at shutdown was already reported as such.
      if (this.runningJobs.delete(job.id)) {
        this.opts.metrics?.jobRuns.inc({ task: job.task, outcome });
        this.opts.metrics?.jobDuration.observe({ task: job.task }, ms / 1000);
        this.opts.log.info?.({ job: { id: job.id, task: job.task, attempt: job.attempts, outcome, ms } }, 'job run');
      }
      this.running--;
      this.runningByTask.set(job.task, (this.runningByTask.get(job.task) ?? 1) - 1);
      if (def.minIntervalMs) this.lastEnded.set(job.task, performance.now());
      if (this.running === 0) for (const w of this.idleWaiters.splice(0)) w();
      this.wake();
    }
  }

  /** Enqueues one job per recurring task per period; the unique key makes it once across nodes. */
  private async tickRecurring(): Promise<void> {
    const now = this.opts.now();
    for (const r of this.recurring) {
      const period = Math.floor(now.getTime() / r.everyMs);
      if (this.lastPeriod.get(r.task) === period) continue;
      try {
        await enqueue(this.opts.db, this.opts.dialect, r.task, { period }, now, { uniqueKey: `recurring:${r.task}:${period}`, maxAttempts: 1 });
        this.lastPeriod.set(r.task, period);
      } catch (err) {
        this.opts.log.error({ err, task: r.task }, 'enqueueing a recurring task failed');
      }
    }
  }
}
