import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setImmediate as tick, setTimeout as pause } from 'node:timers/promises';
import { afterEach, expect, it } from 'vitest';
import { openDatabase, sql } from '../src/db/database.ts';
import { commitDurably } from '../src/db/durable-commit.ts';

// The checkpoint thread's RESTART checkpoint (src/db/checkpointer.ts) holds the write lock while it
// waits for the WAL's readers. A transaction that had read and then wrote meanwhile failed at once
// with SQLITE_BUSY (SQLite does not let a reader wait for a writer that waits for it), and its
// request answered 500: seen in `cubby sync` of 20,000 files. Our SQLite transactions take the
// write lock when they begin (src/db/sqlite-dialect.ts), so they wait like any write.

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

it('transactions that read, wait a turn, then write never fail while the WAL is started over and over', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cubby-lock-'));
  let restarts = 0;
  // A pass every 2 ms, and a RESTART once the WAL holds 64 KiB: a few times a second here.
  const database = await openDatabase(`sqlite:${path.join(dir, 'cubby.db')}`, undefined, {
    checkpoints: { intervalMs: 2, restartAboveBytes: 64 * 1024, onRestart: (restarted) => void (restarted && restarts++) },
  });
  cleanups.push(async () => {
    await database.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  await sql`create table t (id integer primary key, body text not null)`.execute(database.db);
  const body = 'x'.repeat(1000);
  let rows = 0;
  let transactions = 0;
  // Both ways the app writes: a plain transaction (an API request) and a durable commit (the
  // group commit of received mail and uploads). Before the change the first few failed.
  while (restarts < 8 || transactions < 200) {
    const write = async (trx: typeof database.db) => {
      const before = await sql<{ n: number }>`select count(*) as n from t`.execute(trx);
      await tick(); // another request's turn: the checkpoint thread runs meanwhile
      for (let i = 0; i < 5; i++) await sql`insert into t (body) values (${body})`.execute(trx);
      return before.rows[0]!.n;
    };
    const seen = transactions % 2 ? await database.db.transaction().execute(write) : await commitDurably(database.commits, write);
    expect(seen).toBe(rows);
    rows += 5;
    transactions++;
    // Idle between transactions, as a server is between requests: a RESTART takes the write lock
    // then (its busy handler polls a few times within 20 ms, and a loaded machine could let a loop
    // without pauses starve it).
    await pause(1);
  }
  expect((await sql<{ n: number }>`select count(*) as n from t`.execute(database.db)).rows[0]!.n).toBe(rows);
});
