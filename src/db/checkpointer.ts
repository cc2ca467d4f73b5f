import { Worker } from 'node:worker_threads';

/**
 * WAL checkpoints on a thread of their own. SQLite checkpoints automatically at the commit that
 * takes the WAL past 1,000 pages, inside that commit: it copies the pages into the database file
 * and syncs both files, and with better-sqlite3 all of that ran on the event loop, stalling every
 * SMTP session and HTTP request for the length of two fsyncs and a few MB of writes. Here the
 * connection the app uses has `wal_autocheckpoint = 0`, and this thread's own connection runs a
 * PASSIVE checkpoint every second when the WAL was written since its last one (it never blocks the
 * writer or readers; what it could not copy is copied by a later one). The checkpoint
 * connection keeps `synchronous = FULL`: the WAL is synced before its pages are copied and the
 * database after, as the automatic checkpoint did.
 */
export interface Checkpointer {
  close(): Promise<void>;
}

const WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
const fs = require('node:fs');
const Database = require(workerData.driver);
const db = new Database(workerData.file);
db.pragma('busy_timeout = 1000');
db.pragma('synchronous = FULL');
const wal = workerData.file + '-wal';
let checkpointedAt = 0;
const timer = setInterval(() => {
  let mtime = 0;
  try { mtime = fs.statSync(wal).mtimeMs; } catch { return; }
  if (mtime === checkpointedAt) return;
  try {
    db.pragma('wal_checkpoint(PASSIVE)');
    checkpointedAt = mtime;
  } catch (err) { parentPort.postMessage({ error: String(err && err.message || err) }); }
}, workerData.intervalMs);
parentPort.on('message', () => { clearInterval(timer); db.close(); parentPort.close(); });
`;

/** Starts the checkpoint thread for `file`; the caller has turned automatic checkpoints off. */
export function startCheckpointer(file: string, opts: { driver: string; intervalMs?: number; onError?: (message: string) => void; onLost: () => void }): Checkpointer {
  const worker = new Worker(WORKER, {
    eval: true,
    workerData: { file, driver: opts.driver, intervalMs: opts.intervalMs ?? 1000 },
  });
  worker.unref();
  worker.on('message', (m: { error?: string }) => m.error && opts.onError?.(m.error));
  worker.on('error', (err) => opts.onError?.(err.message));
  let closing = false;
  // A thread that died unasked leaves the WAL growing: the caller turns automatic checkpoints back on.
  const exited = new Promise<void>((resolve) => worker.once('exit', () => (closing || opts.onLost(), resolve())));
  return {
    async close() {
      closing = true;
      worker.ref(); // keeps the process alive until the thread has closed its connection
      worker.postMessage('close');
      await exited;
    },
  };
}
