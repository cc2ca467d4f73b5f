import { afterEach, expect, it } from 'vitest';
import pg from 'pg';
import { describeEachDatabase, type TestApp } from './harness.ts';
import { PermanentJobError, RetryJobAt, Worker } from '../src/jobs/worker.ts';
import { claimJobs, enqueue, enqueueEach, JOBS_CHANNEL } from '../src/jobs/queue.ts';

// The queue against the app's real database; the workers here are extra ones with their own tasks.
/** A coalesced job of a task of its own, queued: the task, its unique key and the job's id. */
async function queuedCoalescedJob(d: TestApp['started']['deps'], name: string): Promise<{ task: string; key: string; id: string }> {
  const task = `t.${name}.${Math.random()}`;
  const key = `coalesce:${task}`;
  const id = await enqueue(d.db, d.dialect, task, {}, new Date(), { uniqueKey: key });
  expect(id).toBeTruthy();
  return { task, key, id: id! };
}

describeEachDatabase('durable jobs', (app) => {
  const workers: Worker[] = [];
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((w) => w.stop()));
  });

  /** An extra worker; `notifiedOnly` (Postgres): it polls every ten minutes, so only a NOTIFY starts its jobs at once. */
  function worker(a: TestApp, opts: { now?: () => Date; notifiedOnly?: boolean } = {}) {
    const d = a.started.deps;
    const polling = opts.notifiedOnly ? { pollMs: 600_000, listen: { url: process.env.CUBBY_TEST_POSTGRES_URL! } } : { pollMs: 20 };
    const w = new Worker({ db: d.db, dialect: d.dialect, now: opts.now ?? (() => new Date()), log: { error: () => undefined }, ...polling });
    workers.push(w);
    return w;
  }

  /** Registers `task` on `w`: the payloads' `n` as the jobs run, and a promise of the `count`th run. */
  function collectRuns(w: Worker, task: string, count: number) {
    const seen: number[] = [];
    const ranAll = new Promise<void>((resolve) => w.register(task, { handler: async (p) => void (seen.push((p as { n: number }).n) === count && resolve()) }));
    return { seen, ranAll };
  }

  async function jobRow(a: TestApp, id: string) {
    return a.started.deps.db.selectFrom('jobs').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
  }

  it('runs a job enqueued inside a committed transaction, never one from a rolled-back transaction', async () => {
    const a = app();
    const task = `t.commit.${Math.random()}`;
    const seen: unknown[] = [];
    const w = worker(a);
    w.register(task, { handler: async (p) => void seen.push(p) });
    const db = a.started.deps.db;
    const id = await db.transaction().execute((trx) => enqueue(trx, a.started.deps.dialect, task, { n: 1 }, new Date()));
    await db
      .transaction()
      .execute(async (trx) => {
        await enqueue(trx, a.started.deps.dialect, task, { n: 2 }, new Date());
        throw new Error('roll back');
      })
      .catch(() => undefined);
    await w.start();
    await w.drain();
    expect(seen).toEqual([{ n: 1 }]);
    expect((await jobRow(a, id!)).status).toBe('done');
  });

  it('runs the queued jobs of an exclusive task one at a time (one claim used to take several and run them together)', async () => {
    const a = app();
    const task = `t.exclusive.${Math.random()}`;
    let running = 0;
    let most = 0;
    const done: number[] = [];
    const w = worker(a);
    w.register(task, {
      exclusive: true,
      handler: async (p: { n: number }) => {
        most = Math.max(most, ++running);
        await new Promise((r) => setImmediate(r));
        running--;
        done.push(p.n);
      },
    });
    for (const n of [1, 2, 3]) await enqueue(a.started.deps.db, a.started.deps.dialect, task, { n }, new Date());
    await w.start();
    await w.drain();
    expect(done.sort()).toEqual([1, 2, 3]);
    expect(most).toBe(1);
  });

  it('starts an exclusive task with minIntervalMs no sooner than that after it was seen due and after the previous run, with relaxed bookkeeping; drain() waits for it', async () => {
    const a = app();
    const d = a.started.deps;
    const task = `t.interval.${Math.random()}`;
    const w = new Worker({ db: d.db, dialect: d.dialect, now: () => new Date(), log: { error: () => undefined }, pollMs: 20, relaxed: (work) => d.commits.relaxed(work) });
    workers.push(w);
    const runs: { start: number; end: number; n: number }[] = [];
    w.register(task, {
      exclusive: true,
      minIntervalMs: 40,
      handler: async (p: { n: number }) => {
        const start = performance.now();
        await new Promise((r) => setImmediate(r));
        runs.push({ start, end: performance.now(), n: p.n });
      },
    });
    const ids = [];
    for (const n of [1, 2]) ids.push(await enqueue(d.db, d.dialect, task, { n }, new Date()));
    const started = performance.now();
    await w.start();
    await w.drain();
    expect(runs.map((r) => r.n).sort()).toEqual([1, 2]);
    // Lower bounds only: a busy machine makes the waits longer, never shorter.
    expect(runs[0]!.start - started).toBeGreaterThanOrEqual(39);
    expect(runs[1]!.start - runs[0]!.end).toBeGreaterThanOrEqual(39);
    for (const id of ids) expect((await jobRow(a, id!)).status).toBe('done');
  });

  it('retries temporary failures with backoff, fails permanent ones at once, and gives up after max attempts', async () => {
    const a = app();
    let t = Date.now();
    const w = worker(a, { now: () => new Date(t) });
    const flaky = `t.flaky.${Math.random()}`;
    const broken = `t.broken.${Math.random()}`;
    const hopeless = `t.hopeless.${Math.random()}`;
    let calls = 0;
    w.register(flaky, { handler: async () => void (++calls < 3 && (() => { throw new Error('try again'); })()), backoffMs: () => 1000 });
    w.register(broken, { handler: async () => { throw new PermanentJobError('bad payload'); } });
    w.register(hopeless, { handler: async () => { throw new Error('down'); }, backoffMs: () => 1000 });
    const d = a.started.deps;
    const ids = await Promise.all([
      enqueue(d.db, d.dialect, flaky, {}, new Date(t)),
      enqueue(d.db, d.dialect, broken, {}, new Date(t)),
      enqueue(d.db, d.dialect, hopeless, {}, new Date(t), { maxAttempts: 2 }),
    ]);
    await w.start();
    for (let i = 0; i < 4; i++) {
      await w.drain();
      t += 1500; // move the clock past each backoff
      w.wake();
    }
    await w.drain();
    const [f, b, h] = await Promise.all(ids.map((id) => jobRow(a, id!)));
    expect(f).toMatchObject({ status: 'done', attempts: 3 });
    expect(b).toMatchObject({ status: 'failed', attempts: 1 });
    expect(b.last_error).toContain('bad payload');
    expect(h).toMatchObject({ status: 'failed', attempts: 2 });
  });

  it('honours a retry time the handler names', async () => {
    const a = app();
    let t = Date.now();
    const w = worker(a, { now: () => new Date(t) });
    const task = `t.retry-at.${Math.random()}`;
    let calls = 0;
    w.register(task, { handler: async () => { if (++calls === 1) throw new RetryJobAt(new Date(t + 60_000), 'busy'); } });
    const d = a.started.deps;
    const id = await enqueue(d.db, d.dialect, task, {}, new Date(t));
    await w.start();
    await w.drain();
    expect((await jobRow(a, id!)).run_at).toBe(new Date(t + 60_000).toISOString());
    t += 61_000;
    w.wake();
    await w.drain();
    expect((await jobRow(a, id!)).status).toBe('done');
  });

  it('two workers never run one job twice; a job whose worker died is taken over after its lease', async () => {
    const a = app();
    const task = `t.once.${Math.random()}`;
    const runs = new Map<number, number>();
    const [w1, w2] = [worker(a), worker(a)];
    for (const w of [w1, w2]) w.register(task, { handler: async (p: { n: number }) => void runs.set(p.n, (runs.get(p.n) ?? 0) + 1) });
    const d = a.started.deps;
    for (let n = 0; n < 40; n++) await enqueue(d.db, d.dialect, task, { n }, new Date());
    await Promise.all([w1.start(), w2.start()]);
    await Promise.all([w1.drain(), w2.drain()]);
    expect([...runs.values()].every((c) => c === 1)).toBe(true);
    expect(runs.size).toBe(40);

    // A claimed job whose lease ran out (its worker was killed) is due again.
    const orphan = `t.orphan.${Math.random()}`;
    const id = await enqueue(d.db, d.dialect, orphan, {}, new Date());
    await d.db.updateTable('jobs').set({ status: 'running', attempts: 1, locked_by: 'wrk_dead', locked_until: new Date(Date.now() - 1000).toISOString() }).where('id', '=', id!).execute();
    let took = false;
    w1.register(orphan, { handler: async () => void (took = true) });
    await w1.drain();
    expect(took).toBe(true);
    expect(await jobRow(a, id!)).toMatchObject({ status: 'done', attempts: 2 });
  });

  it('unique keys keep one pending job; recurring tasks run once per period across workers', async () => {
    const a = app();
    const d = a.started.deps;
    const task = `t.unique.${Math.random()}`;
    const first = await enqueue(d.db, d.dialect, task, {}, new Date(), { uniqueKey: `k:${task}` });
    const second = await enqueue(d.db, d.dialect, task, {}, new Date(), { uniqueKey: `k:${task}` });
    expect(first).toBeTruthy();
    expect(second).toBeNull();

    const tick = `t.tick.${Math.random()}`;
    let ticks = 0;
    const [w1, w2] = [worker(a), worker(a)];
    for (const w of [w1, w2]) {
      w.register(tick, { handler: async () => void ticks++ });
      w.every(tick, 3_600_000);
    }
    await Promise.all([w1.start(), w2.start()]);
    await Promise.all([w1.drain(), w2.drain()]);
    expect(ticks).toBe(1);
  });

  it('leases each claimed job for its own task (regression: every job got the longest lease of any task)', async () => {
    const a = app();
    const d = a.started.deps;
    const quick = `t.quick.${Math.random()}`;
    const id = await enqueue(d.db, d.dialect, quick, {}, new Date());
    const w = worker(a);
    let release!: () => void;
    let started!: () => void;
    const blocked = new Promise<void>((r) => (release = r));
    const running = new Promise<void>((r) => (started = r));
    w.register(quick, { handler: () => (started(), blocked), leaseMs: 30_000 });
    w.register(`t.slow.${Math.random()}`, { handler: async () => undefined, leaseMs: 600_000 });
    await w.start();
    await running;
    const row = await jobRow(a, id!);
    expect(row.status).toBe('running');
    const leased = Date.parse(row.locked_until!) - Date.parse(row.updated_at);
    expect(leased).toBe(30_000);
    release();
  });

  it('coalescing keys allow one queued job, and release the key when it is claimed so late work queues one more run', async () => {
    const a = app();
    const d = a.started.deps;
    const task = `t.coalesce.${Math.random()}`;
    const key = `coalesce:${task}`;
    expect(await enqueue(d.db, d.dialect, task, {}, new Date(), { uniqueKey: key })).toBeTruthy();
    expect(await enqueue(d.db, d.dialect, task, {}, new Date(), { uniqueKey: key })).toBeNull();
    let runs = 0;
    let queuedDuringRun: string | null = null;
    const w = worker(a);
    w.register(task, {
      handler: async () => {
        runs++;
        // Work that arrives while the job runs must not be lost behind it.
        if (runs === 1) queuedDuringRun = await enqueue(d.db, d.dialect, task, {}, new Date(), { uniqueKey: key });
      },
    });
    await w.start();
    await w.drain();
    expect(queuedDuringRun).toBeTruthy();
    expect(runs).toBe(2);
  });

  // Found as a CI flake: mail received while the labeling sweep was being claimed stayed withheld.
  // SQLite has one writer at a time, so there the claim waits for the transaction by construction.
  it('on Postgres a queued coalesced job is not claimed while a transaction that counted on it is open; its run sees that work', async (ctx) => {
    const a = app();
    if (a.kind !== 'postgres') return ctx.skip();
    const d = a.started.deps;
    const { task, key, id: first } = await queuedCoalescedJob(d, 'coalesce-open');
    const claim = () => claimJobs(d.db, d.dialect, 'wrk_test', [task], new Date(), 60_000, 1);

    let commit!: () => void;
    const held = new Promise<void>((r) => (commit = r));
    let counted!: (id: string | null) => void;
    const enqueued = new Promise<string | null>((r) => (counted = r));
    const marker = `mrk_${Math.random().toString(36).slice(2)}`;
    const trx = d.db.transaction().execute(async (t) => {
      await enqueue(t, d.dialect, `${task}.marker`, { marker }, new Date(), { uniqueKey: marker });
      counted(await enqueue(t, d.dialect, task, {}, new Date(), { uniqueKey: key }));
      await held;
    });
    try {
      // The open transaction relied on the queued job: it got no job of its own.
      expect(await enqueued).toBeNull();
      // Before the fix this claimed the job, whose run could not see the marker and would never run again for it.
      expect(await claim()).toEqual([]);
      // Another transaction counting on the same job is not held up by the first (a shared lock).
      expect(await d.db.transaction().execute((t) => enqueue(t, d.dialect, task, {}, new Date(), { uniqueKey: key }))).toBeNull();
    } finally {
      commit();
      await trx;
    }
    const claimed = await claim();
    expect(claimed.map((j) => j.id)).toEqual([first]);
    const seen = await d.db.selectFrom('jobs').select('id').where('unique_key', '=', marker).execute();
    expect(seen).toHaveLength(1);
    // Released at the claim: work arriving now queues one more run.
    expect(await enqueue(d.db, d.dialect, task, {}, new Date(), { uniqueKey: key })).toBeTruthy();
  });

  it('on Postgres an enqueue that finds its coalesced job queued still wakes the workers at commit (they passed the job over while it was held)', async (ctx) => {
    const a = app();
    if (a.kind !== 'postgres') return ctx.skip();
    const d = a.started.deps;
    const { task, key } = await queuedCoalescedJob(d, 'coalesce-wake');
    const listener = new pg.Client({ connectionString: process.env.CUBBY_TEST_POSTGRES_URL });
    await listener.connect();
    try {
      const woken = new Promise<void>((resolve) => listener.on('notification', (n) => n.payload === task && resolve()));
      await listener.query(`listen ${JOBS_CHANNEL}`);
      expect(await d.db.transaction().execute((t) => enqueue(t, d.dialect, task, {}, new Date(), { uniqueKey: key }))).toBeNull();
      await woken;
    } finally {
      await listener.end();
    }
  });

  it('enqueueEach adds one job per item in one insert, leaves out items whose key is taken, and the worker runs them all', async () => {
    const a = app();
    const d = a.started.deps;
    const task = `t.each.${Math.random()}`;
    expect(await enqueue(d.db, d.dialect, task, { n: 0 }, new Date(), { uniqueKey: `${task}:0` })).toBeTruthy();
    const items = [0, 1, 2, 3].map((n) => ({ payload: { n }, opts: { uniqueKey: `${task}:${n}`, maxAttempts: 3 } }));
    expect(await d.db.transaction().execute((t) => enqueueEach(t, d.dialect, task, items, new Date()))).toBe(3);
    expect(await enqueueEach(d.db, d.dialect, task, [], new Date())).toBe(0);
    const rows = await d.db.selectFrom('jobs').select(['payload', 'max_attempts', 'status']).where('task', '=', task).orderBy('payload').execute();
    expect(rows.map((r) => JSON.parse(r.payload).n)).toEqual([0, 1, 2, 3]);
    expect(rows.map((r) => r.max_attempts)).toEqual([10, 3, 3, 3]);
    // Not for coalesced keys, whose share lock is per job; nothing is added.
    await expect(enqueueEach(d.db, d.dialect, task, [{ payload: {}, opts: { uniqueKey: `coalesce:${task}` } }], new Date())).rejects.toThrow(/coalesced/);
    const w = worker(a);
    const { seen, ranAll } = collectRuns(w, task, 4);
    await w.start();
    await ranAll;
    expect(seen.sort()).toEqual([0, 1, 2, 3]);
  });

  it('on Postgres enqueueEach wakes an idle worker at commit', async (ctx) => {
    const a = app();
    if (a.kind !== 'postgres') return ctx.skip();
    const d = a.started.deps;
    const w = worker(a, { notifiedOnly: true });
    const task = `t.each-notify.${Math.random()}`;
    const { seen, ranAll } = collectRuns(w, task, 3);
    await w.start();
    await d.db.transaction().execute((trx) => enqueueEach(trx, d.dialect, task, [1, 2, 3].map((n) => ({ payload: { n } })), new Date()));
    await ranAll; // with a ten-minute poll, only the notification can have started them
    expect(seen.sort()).toEqual([1, 2, 3]);
  });

  it('on Postgres a NOTIFY at commit wakes an idle worker on another connection at once', async (ctx) => {
    const a = app();
    if (a.kind !== 'postgres') return ctx.skip();
    const d = a.started.deps;
    const w = worker(a, { notifiedOnly: true });
    const task = `t.notify.${Math.random()}`;
    const ran = new Promise<void>((resolve) => w.register(task, { handler: async () => resolve() }));
    await w.start();
    await d.db.transaction().execute((trx) => enqueue(trx, d.dialect, task, {}, new Date()));
    await ran; // with a ten-minute poll, only the notification can have started it
  });
});

describeEachDatabase('durable jobs at shutdown', (app) => {
  it('stop({ graceMs }) lets a quick job finish and gives a slow one its lease back, attempt not counted; its late result is ignored', async () => {
    const a = app();
    const d = a.started.deps;
    const lines: unknown[] = [];
    const w = new Worker({ db: d.db, dialect: d.dialect, now: () => new Date(), log: { error: () => undefined, info: (o) => void lines.push(o) }, pollMs: 20 });
    const quick = `t.quick.${Math.random()}`;
    const slow = `t.slow.${Math.random()}`;
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const deferred = () => {
      let resolve!: () => void;
      const promise = new Promise<void>((r) => (resolve = r));
      return { promise, resolve };
    };
    const started = { quick: deferred(), slow: deferred() };
    let quickGate!: () => void;
    const quickHeld = new Promise<void>((r) => (quickGate = r));
    w.register(quick, { handler: async () => { started.quick.resolve(); await quickHeld; } });
    w.register(slow, { handler: async () => { started.slow.resolve(); await gate; } });
    const qid = (await enqueue(d.db, d.dialect, quick, {}, new Date()))!;
    const sid = (await enqueue(d.db, d.dialect, slow, {}, new Date()))!;
    await w.start();
    await Promise.all([started.quick.promise, started.slow.promise]);
    const stopping = w.stop({ graceMs: 300 });
    quickGate();
    await stopping;
    const row = (id: string) => d.db.selectFrom('jobs').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
    expect(await row(qid)).toMatchObject({ status: 'done' });
    expect(await row(sid)).toMatchObject({ status: 'queued', attempts: 0, locked_by: null, locked_until: null });
    // The handler finishing after the release changes nothing: another worker owns the job now.
    release();
    await new Promise((r) => setImmediate(r));
    expect(await row(sid)).toMatchObject({ status: 'queued', attempts: 0 });
    expect(lines).toEqual(expect.arrayContaining([
      { job: expect.objectContaining({ id: qid, task: quick, attempt: 1, outcome: 'done', ms: expect.any(Number) }) },
      { job: { id: sid, task: slow, attempt: 1, outcome: 'released' } },
    ]));
    await d.db.deleteFrom('jobs').where('id', 'in', [qid, sid]).execute();
  });
});
