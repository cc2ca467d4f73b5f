import { Worker } from 'node:worker_threads';
import { WriteGate } from './write-gate.ts';

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
 *
 * A PASSIVE checkpoint never starts the WAL over: SQLite does that when a write begins while every
 * frame has been copied, and under a steady stream of commits new frames always arrive while the
 * checkpoint copies. The WAL then grew for as long as the stream lasted (1.5 GB after 40 seconds of
 * received mail at full speed). So once the WAL holds more than `restartAboveBytes` of frames,
 * a pass that copied every frame it saw ends with a RESTART checkpoint: it copies what arrived
 * during the PASSIVE one (little), waits for the write in progress to finish, and holds new writes
 * back until it is done (writers wait in SQLite's busy handler, a few milliseconds); the next write
 * starts the WAL from the beginning (the file keeps its size and is written over). It gives up
 * after RESTART_WAIT_MS (a long read still using the WAL) and tries again on a later pass. While it
 * runs, its `gate` (src/db/write-gate.ts) is closed: the event loop's queries wait for it to open
 * without stopping the event loop, instead of sleeping in SQLite's busy handler.
 */
export interface Checkpointer {
  /** Closed while a RESTART checkpoint holds the write lock. */
  readonly gate: WriteGate;
  close(): Promise<void>;
}

const WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
const fs = require('node:fs');
const Database = require(workerData.driver);
const gate = new Int32Array(workerData.gate);
const db = new Database(workerData.file);
db.pragma('busy_timeout = 1000');
db.pragma('synchronous = FULL');
const wal = workerData.file + '-wal';
const pageSize = db.pragma('page_size', { simple: true });
let checkpointedAt = 0;
const timer = setInterval(() => {
  let st;
  try { st = fs.statSync(wal); } catch { return; }
  if (st.mtimeMs === checkpointedAt) return;
  try {
    const [pass] = db.pragma('wal_checkpoint(PASSIVE)');
    checkpointedAt = st.mtimeMs;
    // The frames in use, not the file's size: a WAL started over keeps its file, and is written
    // from the beginning again. Only after a pass that copied every frame it saw: the RESTART then
    // copies just the frames written meanwhile (not what a reader kept this pass from copying)
    // while writers wait.
    if (pass.log * pageSize > workerData.restartAboveBytes && pass.busy === 0 && pass.checkpointed === pass.log) {
      // Writers wait while this is pending: wait for readers only briefly.
      db.pragma('busy_timeout = ' + workerData.restartWaitMs);
      // Closed before the RESTART asks for the write lock, so the event loop's next query waits
      // for the gate rather than for the lock (WriteGate's CLOSED is 1).
      Atomics.store(gate, 0, 1);
      Atomics.notify(gate, 0); // for whoever awaits the closing (tests)
      try {
        const [r] = db.pragma('wal_checkpoint(RESTART)');
        parentPort.postMessage({ restarted: r.busy === 0 });
      } finally {
        Atomics.store(gate, 0, 0);
        Atomics.notify(gate, 0);
        db.pragma('busy_timeout = 1000');
      }
    }
  } catch (err) { parentPort.postMessage({ error: String(err && err.message || err) }); }
}, workerData.intervalMs);
parentPort.on('message', () => { clearInterval(timer); db.close(); parentPort.close(); });
`;

/** WAL size past which a checkpoint pass also starts the WAL over (see above). */
export const RESTART_ABOVE_BYTES = 64 * 1024 * 1024;
/** How long a RESTART checkpoint waits for readers still using the WAL (new writes wait meanwhile). */
const RESTART_WAIT_MS = 20;

export interface CheckpointerOptions {
  driver: string;
  intervalMs?: number;
  /** Tests: a smaller WAL bound. */
  restartAboveBytes?: number;
  /** Tests: how long a RESTART waits for the WAL's readers (writers wait as long). */
  restartWaitMs?: number;
  onError?: (message: string) => void;
  /** Each RESTART checkpoint: whether the WAL was started over (false: a reader kept it). */
  onRestart?: (restarted: boolean) => void;
  onLost: () => void;
}

/** Starts the checkpoint thread for `file`; the caller has turned automatic checkpoints off. */
export function startCheckpointer(file: string, opts: CheckpointerOptions): Checkpointer {
  const gate = new WriteGate();
  const worker = new Worker(WORKER, {
    eval: true,
    workerData: { file, gate: gate.buffer, driver: opts.driver, intervalMs: opts.intervalMs ?? 1000, restartAboveBytes: opts.restartAboveBytes ?? RESTART_ABOVE_BYTES, restartWaitMs: opts.restartWaitMs ?? RESTART_WAIT_MS },
  });
  worker.unref();
  worker.on('message', (m: { error?: string; restarted?: boolean }) => {
    if (m.error) opts.onError?.(m.error);
    if (m.restarted !== undefined) opts.onRestart?.(m.restarted);
  });
  worker.on('error', (err) => opts.onError?.(err.message));
  let closing = false;
  // A thread that died unasked leaves the WAL growing: the caller turns automatic checkpoints back on.
  const exited = new Promise<void>((resolve) =>
    worker.once('exit', () => {
      gate.open(); // a thread stopped inside a RESTART must not leave writers waiting
      if (!closing) opts.onLost();
      resolve();
    }),
  );
  return {
    gate,
    async close() {
      closing = true;
      worker.ref(); // keeps the process alive until the thread has closed its connection
      worker.postMessage('close');
      await exited;
    },
  };
}
