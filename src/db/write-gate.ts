/**
 * A flag shared with the checkpoint thread (src/db/checkpointer.ts), closed while its RESTART
 * checkpoint runs. A RESTART holds SQLite's write lock for its whole length (it waits for the WAL's
 * readers, copies what is left and syncs the WAL and the database file: 5–40 ms under load here).
 * A write begun meanwhile on the event loop waited in SQLite's busy handler, which sleeps the
 * calling thread (1, 2, 5, 10, … ms): every SMTP session and HTTP request stopped with it, and the
 * longest such stall measured 38 ms. The SQLite driver (src/db/sqlite-dialect.ts) now waits for
 * the gate, asynchronously, whenever it hands out its one connection: the queries wait a few
 * milliseconds and the event loop goes on serving sessions and requests meanwhile.
 *
 * Nothing depends on the gate for correctness: a write that checked it just before it closed, or
 * another process's write, waits in SQLite's busy handler as before.
 */
export class WriteGate {
  /** 1 while the checkpoint thread holds (or is about to take) the write lock; 0 otherwise. */
  readonly state: Int32Array;

  constructor(readonly buffer: SharedArrayBuffer = new SharedArrayBuffer(4)) {
    this.state = new Int32Array(buffer);
  }

  get closed(): boolean {
    return Atomics.load(this.state, 0) === CLOSED;
  }

  /**
   * Resolves once the gate is open: at once (a resolved promise, no turn of the event loop lost to
   * a timer) when it is. Gives up after `MAX_WAIT_MS` in all and lets the write go to SQLite's busy
   * handler, so a thread that stopped with the gate closed cannot hold writes back for long.
   */
  whenOpen(): Promise<void> {
    return this.closed ? this.waitOpen() : OPEN;
  }

  /** The checkpoint thread's side, also for a thread that stopped unasked. */
  open(): void {
    Atomics.store(this.state, 0, 0);
    Atomics.notify(this.state, 0);
  }

  private async waitOpen(): Promise<void> {
    const until = performance.now() + MAX_WAIT_MS;
    // A pending Atomics.waitAsync does not keep Node's event loop alive (nor does the checkpoint
    // thread, unref'd): a command whose last work is a waiting write would exit without it.
    const keepAlive = setTimeout(() => undefined, MAX_WAIT_MS);
    try {
      for (let left = MAX_WAIT_MS; this.closed && left > 0; left = until - performance.now()) {
        const wait = Atomics.waitAsync(this.state, 0, CLOSED, left);
        if (wait.async) await wait.value;
      }
    } finally {
      clearTimeout(keepAlive);
    }
  }
}

const CLOSED = 1;
const OPEN = Promise.resolve();
/** Longer than a RESTART takes (its wait for readers is 20 ms, then two syncs). */
const MAX_WAIT_MS = 2000;

// Atomics.waitAsync is in Node since 16 (V8 8.7); TypeScript types it from lib ES2024 on.
declare global {
  interface Atomics {
    waitAsync(typedArray: Int32Array, index: number, value: number, timeout?: number): { async: false; value: 'not-equal' | 'timed-out' } | { async: true; value: Promise<'ok' | 'timed-out'> };
  }
}
