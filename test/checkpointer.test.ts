import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { setTimeout as pause } from 'node:timers/promises';
import BetterSqlite3 from 'better-sqlite3';
import { afterEach, expect, it } from 'vitest';
import { startCheckpointer, type Checkpointer } from '../src/db/checkpointer.ts';

// The WAL checkpoint thread (src/db/checkpointer.ts) keeps the WAL bounded under a steady stream of
// commits: PASSIVE checkpoints alone never let SQLite start it over, and it grew without end.

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

it('starts the WAL over while commits keep coming, once it passes its bound, and loses no row', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cubby-ckpt-'));
  cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'db.sqlite');
  const db = new BetterSqlite3(file);
  db.pragma('journal_mode = WAL');
  db.pragma('busy_timeout = 5000');
  db.pragma('wal_autocheckpoint = 0');
  db.exec('create table t (id integer primary key, body text not null)');
  const bound = 256 * 1024;
  let restarts = 0;
  const errors: string[] = [];
  const checkpointer: Checkpointer = startCheckpointer(file, {
    driver: createRequire(import.meta.url).resolve('better-sqlite3'),
    intervalMs: 20,
    restartAboveBytes: bound,
    onRestart: (restarted) => void (restarted && restarts++),
    onError: (m) => errors.push(m),
    onLost: () => errors.push('lost'),
  });
  cleanups.push(async () => {
    await checkpointer.close();
    db.close();
  });

  // A stream of commits of 20 rows each, as the group commit writes them, with a pause of 2 ms
  // between them: the writer's idle time between groups, which is when the RESTART can take the
  // write lock (its busy handler polls a few times within 20 ms; in a loop that never lets go of
  // the lock for more than a moment it rarely finds it free, as under CI's load). The WAL file keeps
  // the size it reached before the first restart (the thread starts while the stream already runs);
  // after that it must be reused, not grow with everything written.
  const body = 'x'.repeat(1000);
  const insert = db.prepare('insert into t (body) values (?)');
  const insertGroup = db.transaction(() => {
    for (let i = 0; i < 20; i++) insert.run(body);
  });
  const walBytes = () => fs.statSync(`${file}-wal`).size;
  let rows = 0;
  let atFirstRestart = 0;
  // Each row puts its 1,000-byte body into the WAL: a lower bound of what went through it.
  let bytesSince = 0;
  // Without restarts the WAL would grow for as long as the loop runs: it stops at 96 MiB.
  while ((restarts < 4 || bytesSince < 4 * atFirstRestart) && walBytes() < 96 * 1024 * 1024) {
    insertGroup();
    rows += 20;
    if (restarts > 0) {
      if (!atFirstRestart) atFirstRestart = walBytes();
      bytesSince += 20 * body.length;
    }
    await pause(2);
  }
  expect(errors).toEqual([]);
  expect(restarts).toBeGreaterThanOrEqual(4);
  // Four times the WAL's size went through it since; a WAL never started over would hold it all.
  expect(walBytes()).toBeLessThan(atFirstRestart + bytesSince / 2);
  expect(db.prepare('select count(*) as n from t').get()).toEqual({ n: rows });
});
