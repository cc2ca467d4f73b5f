import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setImmediate as tick } from 'node:timers/promises';
import { promisify } from 'node:util';
import BetterSqlite3 from 'better-sqlite3';
import { afterEach, expect, it } from 'vitest';
import { openDatabase, sql } from '../src/db/database.ts';
import { commitDurably } from '../src/db/durable-commit.ts';
import type { WriteGate } from '../src/db/write-gate.ts';

// While the checkpoint thread starts the WAL over (a RESTART checkpoint, src/db/checkpointer.ts) it
// holds SQLite's write lock. A write begun meanwhile used to wait in SQLite's busy handler, which
// sleeps the event loop: every SMTP session and request stopped until the RESTART ended (up to
// 38 ms under load). Queries now wait for the write gate (src/db/write-gate.ts) asynchronously.

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** Resolves when the checkpoint thread closes the gate (an event, not a poll). */
async function closing(gate: WriteGate): Promise<void> {
  while (!gate.closed) {
    const wait = Atomics.waitAsync(gate.state, 0, 0);
    if (wait.async) await wait.value;
  }
}

it('queries wait for a RESTART checkpoint without stopping the event loop, and nothing is lost', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cubby-gate-'));
  const file = path.join(dir, 'cubby.db');
  let restarted!: (r: boolean) => void;
  const firstRestart = new Promise<boolean>((resolve) => (restarted = resolve));
  // The first pass comes two seconds after the start, long after the rows and the reader below
  // (one transaction: one sync). The RESTART waits up to 30 s for the reader: the test ends the
  // reader well before.
  const database = await openDatabase(`sqlite:${file}`, undefined, {
    checkpoints: { intervalMs: 2000, restartAboveBytes: 64 * 1024, restartWaitMs: 30_000, onRestart: (r) => restarted(r) },
  });
  cleanups.push(async () => {
    await database.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  const gate = database.writeGate!;
  expect(gate.closed).toBe(false);
  await sql`create table t (id integer primary key, body text not null)`.execute(database.db);
  await database.db.transaction().execute(async (trx) => {
    for (let i = 0; i < 100; i++) await sql`insert into t (body) values (${'x'.repeat(1000)})`.execute(trx);
  });

  // A reader of its own whose snapshot uses the WAL's frames: the RESTART copies them, then waits
  // for it with the write lock held.
  const reader = new BetterSqlite3(file);
  cleanups.push(() => void reader.close());
  reader.exec('begin');
  expect(reader.prepare('select count(*) as n from t').get()).toEqual({ n: 100 });
  await closing(gate);

  // The group commit's way (received mail, uploads), an API request's transaction, a write outside
  // any transaction and a read: all wait for the gate, which the driver minds where it hands out
  // its one connection.
  const settled = new Set<string>();
  const track = <T>(name: string, p: Promise<T>) => p.finally(() => settled.add(name));
  const grouped = track('grouped', commitDurably(database.commits, (trx) => sql`insert into t (body) values ('grouped')`.execute(trx)));
  const request = track('request', database.db.transaction().execute((trx) => sql`insert into t (body) values ('request')`.execute(trx)));
  const single = track('single', sql`insert into t (body) values ('single')`.execute(database.db));
  const read = track('read', sql<{ n: number }>`select count(*) as n from t`.execute(database.db));
  // The event loop goes on turning while they wait: a write in the busy handler would have held it
  // (and settled before these turns came).
  for (let i = 0; i < 20; i++) await tick();
  expect(gate.closed).toBe(true);
  expect([...settled]).toEqual([]);

  reader.exec('commit'); // the RESTART finishes, the gate opens, the queries go through
  await Promise.all([grouped, request, single]);
  expect((await read).rows[0]!.n).toBeGreaterThanOrEqual(100);
  expect(gate.closed).toBe(false);
  expect(await firstRestart).toBe(true);
  const bodies = await sql<{ body: string }>`select body from t where id > 100 order by id`.execute(database.db);
  expect(bodies.rows.map((r) => r.body).sort()).toEqual(['grouped', 'request', 'single']);
});

it('a wait at the gate keeps the process alive until the gate opens', async () => {
  // Atomics.waitAsync alone does not keep Node running, and the checkpoint thread is unref'd: a
  // command whose last work was a waiting write exited without making it.
  const probe = path.join(path.dirname(new URL(import.meta.url).pathname), 'write-gate-probe.ts');
  const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', probe]);
  expect(stdout.trim()).toBe('opened');
});
