import { Worker } from 'node:worker_threads';

/**
 * Writes small blobs of the fs store on threads of their own (src/blobs/blob-writer-thread.mjs).
 *
 * Why: a small blob written from the event loop took five thread-pool calls (open, write, close,
 * rename, fsync of its directory) and two more system calls inline. On this kind of machine each
 * pool call cost the event loop 50-80 µs of waking threads, about 0.45 ms per received message
 * (its .eml and its message.json), more than all its SQL. A writer thread makes the same system
 * calls itself, blocking only itself while the disk syncs, and the event loop pays one message
 * each way. Several threads keep several syncs in flight.
 *
 * The threads are shared by every store of the process, start with the first write, and do not
 * keep the process alive. A thread that fails to start or dies fails only the writes it held; the
 * store then writes on the event loop as before (BlobWriterUnavailable).
 */
export class BlobWriterUnavailable extends Error {
  override readonly name = 'BlobWriterUnavailable';
}

/** Where a lost thread is reported (the app's logger). */
export interface BlobWriterLog {
  warn: (obj: unknown, msg: string) => void;
}

export interface SmallBlobRequest {
  root: string;
  tmp: string;
  chunks: Buffer[];
  sha256Hex?: string;
  md5Base64?: string;
}

export interface SmallBlobResult {
  sha256: string;
  md5Base64: string;
  /** Set when an expected digest did not match: nothing was written. */
  mismatch?: 'sha256' | 'checksum';
}

type Reply = { id: number; sha256: string; md5Base64: string; mismatch?: 'sha256' | 'checksum'; error?: { message: string; code?: string; errno?: number; syscall?: string; path?: string } };

/** Threads by default: enough for a few syncs in flight at once; each is small (no app modules). */
export const DEFAULT_WRITER_THREADS = 2;

/** After a thread is lost, no new one starts for this long (one that cannot start would otherwise be retried for every blob). */
const RESTART_DELAY_MS = 5_000;

class WriterThread {
  alive = true;
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (r: SmallBlobResult) => void; reject: (e: unknown) => void }>();
  private readonly worker: Worker;

  constructor(onLost: (why: string) => void) {
    // A small heap: the thread keeps nothing, and a young generation left to grow to V8's default
    // held tens of MB of resident memory per thread under load.
    this.worker = new Worker(new URL('./blob-writer-thread.mjs', import.meta.url), { resourceLimits: { maxYoungGenerationSizeMb: 2, maxOldGenerationSizeMb: 32 } });
    this.worker.unref();
    this.worker.on('message', (reply: Reply) => {
      const p = this.pending.get(reply.id);
      if (!p) return;
      this.pending.delete(reply.id);
      if (this.pending.size === 0) this.worker.unref();
      if (reply.error) {
        stats.failed++;
        const { message, ...fields } = reply.error;
        p.reject(Object.assign(new Error(message), Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined && v !== null))));
      }
      else p.resolve({ sha256: reply.sha256, md5Base64: reply.md5Base64, ...(reply.mismatch ? { mismatch: reply.mismatch } : {}) });
    });
    const lost = (why: string) => {
      if (this.alive && !this.ending) onLost(why);
      this.alive = false;
      for (const p of this.pending.values()) p.reject(new BlobWriterUnavailable(why));
      this.pending.clear();
    };
    this.worker.on('error', (err) => lost(`blob writer thread failed: ${err.message}`));
    this.worker.on('exit', (code) => lost(`blob writer thread exited (${code})`));
  }

  private ending = false;

  terminate(): Promise<number> {
    this.ending = true;
    return this.worker.terminate();
  }

  write(req: SmallBlobRequest): Promise<SmallBlobResult> {
    return new Promise((resolve, reject) => {
      const id = this.nextId++;
      // Held while it has work: a write in flight must be answered before the process may exit.
      if (this.pending.size === 0) this.worker.ref();
      this.pending.set(id, { resolve, reject });
      try {
        // One buffer of its own, moved to the thread: a chunk is often a view of a larger buffer (a
        // socket read), which a copy by postMessage would copy whole.
        const bytes = Buffer.allocUnsafeSlow(req.chunks.reduce((n, c) => n + c.length, 0));
        let at = 0;
        for (const c of req.chunks) at += c.copy(bytes, at);
        const { chunks: _chunks, ...rest } = req;
        this.worker.postMessage({ id, ...rest, bytes: bytes.buffer }, [bytes.buffer]);
      } catch (err) {
        this.pending.delete(id);
        if (this.pending.size === 0) this.worker.unref();
        reject(new BlobWriterUnavailable(`blob writer thread not reached: ${(err as Error).message}`));
      }
    });
  }

  get inFlight(): number {
    return this.pending.size;
  }

  /** Tests: ends the thread as a crash would (counted as lost, restart delay). */
  crash(): Promise<number> {
    return this.worker.terminate();
  }
}

let threads: WriterThread[] = [];
let lostAt = 0;
/** Since the process started: blobs written by threads, errors they reported, writes they could not take, threads lost. */
const stats = { threaded: 0, failed: 0, unavailable: 0, lost: 0 };

/** The counts above and the writes in flight now (tests, diagnostics). */
export function blobWriterStats(): Readonly<typeof stats & { inFlight: number }> {
  return { ...stats, inFlight: threads.reduce((n, t) => n + t.inFlight, 0) };
}

/** Ends every writer thread in order (not counted as lost; no restart delay); writes in flight reject with BlobWriterUnavailable. */
export async function terminateBlobWriters(): Promise<void> {
  const ending = threads;
  threads = [];
  lostAt = 0;
  await Promise.all(ending.map((t) => t.terminate()));
}

/** Tests: ends every writer thread as a crash would. */
export async function crashBlobWriters(): Promise<void> {
  await Promise.all(threads.map((t) => t.crash()));
}

/**
 * Writes one small blob on one of at most `most` writer threads (the least busy; a new one while
 * all are busy). Rejects with BlobWriterUnavailable when no thread can take it; the caller then
 * writes it itself.
 */
export async function writeSmallBlob(most: number, req: SmallBlobRequest, log?: BlobWriterLog): Promise<SmallBlobResult> {
  threads = threads.filter((t) => t.alive);
  let best = threads.reduce<WriterThread | null>((b, t) => (!b || t.inFlight < b.inFlight ? t : b), null);
  const restarting = lostAt > 0 && performance.now() - lostAt < RESTART_DELAY_MS;
  if ((!best || best.inFlight > 0) && threads.length < most && !restarting) {
    try {
      best = new WriterThread((why) => {
        lostAt = performance.now();
        stats.lost++;
        log?.warn({ reason: why }, 'blob writer thread lost; small blobs are written on the event loop for 5 s');
      });
      threads.push(best);
    } catch (err) {
      lostAt = performance.now();
      stats.unavailable++;
      log?.warn({ reason: (err as Error).message }, 'blob writer thread could not start; small blobs are written on the event loop for 5 s');
      throw new BlobWriterUnavailable(`blob writer thread could not start: ${(err as Error).message}`);
    }
  }
  if (!best) {
    stats.unavailable++;
    throw new BlobWriterUnavailable('no blob writer thread (one was lost moments ago)');
  }
  try {
    const result = await best.write(req);
    stats.threaded++;
    return result;
  } catch (err) {
    if (err instanceof BlobWriterUnavailable) stats.unavailable++;
    throw err;
  }
}
