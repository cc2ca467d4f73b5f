import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';

// MD5 and SHA-256 of large bodies on worker threads. Hashing both costs about 2 s of CPU per GiB
// here (MD5 is the slow one); on the event loop it would cap an upload at the speed of one core
// and stall every other request meanwhile. A worker hashes while the main thread reads the socket
// and the thread pool writes the file. Small bodies are hashed inline (a worker hop costs more).
//
// The pool holds no application state: a few threads, made on first use and unref'd, each hashing
// any number of streams by id. A stream copies its bytes into its own small shared ring; the
// worker hashes a slot and acknowledges it before the slot is written again.

const WORKER_SOURCE = `
const { parentPort } = require('node:worker_threads');
const { createHash } = require('node:crypto');
const jobs = new Map();
parentPort.on('message', (m) => {
  if (m.op === 'open') jobs.set(m.id, { ring: m.ring, md5: createHash('md5'), sha: createHash('sha256') });
  const job = jobs.get(m.id);
  if (!job) return;
  if (m.op === 'data') {
    const bytes = new Uint8Array(job.ring, m.offset, m.length);
    job.md5.update(bytes);
    job.sha.update(bytes);
    parentPort.postMessage({ id: m.id, op: 'ack' });
  } else if (m.op === 'end') {
    jobs.delete(m.id);
    parentPort.postMessage({ id: m.id, op: 'digest', md5Base64: job.md5.digest('base64'), sha256: job.sha.digest('hex') });
  } else if (m.op === 'abort') jobs.delete(m.id);
});
`;

/** Each stream copies its bytes into a ring of SLOTS × SLOT bytes shared with its worker (no garbage per batch). */
const SLOT = 1024 * 1024;
const SLOTS = 4;

export interface Digests {
  md5Base64: string;
  sha256: string;
}

type Reply = { id: number; op: 'ack' } | ({ id: number; op: 'digest' } & Digests);

interface PoolWorker {
  worker: Worker;
  streams: Map<number, (reply: Reply | Error) => void>;
}

const pool: PoolWorker[] = [];
let nextId = 0;
let nextWorker = 0;

function workerFor(): PoolWorker {
  const size = Math.max(1, Math.min(2, availableParallelism() - 1));
  if (pool.length < size) {
    const entry: PoolWorker = { worker: new Worker(WORKER_SOURCE, { eval: true }), streams: new Map() };
    entry.worker.on('message', (reply: Reply) => entry.streams.get(reply.id)?.(reply));
    const fail = (err: Error) => {
      pool.splice(pool.indexOf(entry), 1);
      for (const handler of entry.streams.values()) handler(err);
      entry.streams.clear();
    };
    entry.worker.on('error', fail);
    entry.worker.on('exit', (code) => pool.includes(entry) && fail(new Error(`hash worker exited with ${code}`)));
    entry.worker.unref(); // after the listeners (adding one refs it again); held only while it has streams
    pool.push(entry);
    return entry;
  }
  return pool[nextWorker++ % pool.length]!;
}

/** One stream's running MD5 and SHA-256 on a pool worker; feed it in order, then digest() or abort(). */
export class WorkerHash {
  private readonly id = ++nextId;
  private readonly entry = workerFor();
  private readonly ring = new SharedArrayBuffer(SLOT * SLOTS);
  private readonly view = new Uint8Array(this.ring);
  /** Slots posted and not yet acknowledged; the slot being filled is `sent % SLOTS`. */
  private queued = 0;
  private sent = 0;
  private filled = 0;
  private failed: Error | undefined;
  private wake: (() => void) | undefined;
  private done: ((d: Digests | Error) => void) | undefined;

  constructor() {
    if (this.entry.streams.size === 0) this.entry.worker.ref();
    this.entry.streams.set(this.id, (reply) => {
      if (reply instanceof Error) {
        this.failed = reply;
        this.wake?.();
        this.done?.(reply);
      } else if (reply.op === 'ack') {
        this.queued--;
        this.wake?.();
      } else this.done?.({ md5Base64: reply.md5Base64, sha256: reply.sha256 });
    });
    this.entry.worker.postMessage({ id: this.id, op: 'open', ring: this.ring });
  }

  /** Copies the bytes into the ring, posting each full slot; waits while every slot is still being hashed. */
  async update(chunks: Buffer[]): Promise<void> {
    for (const chunk of chunks) {
      for (let at = 0; at < chunk.length; ) {
        if (this.filled === 0) {
          while (this.queued >= SLOTS && !this.failed) await new Promise<void>((resolve) => (this.wake = resolve));
        }
        if (this.failed) throw this.failed;
        const n = Math.min(SLOT - this.filled, chunk.length - at);
        this.view.set(chunk.subarray(at, at + n), (this.sent % SLOTS) * SLOT + this.filled);
        this.filled += n;
        at += n;
        if (this.filled === SLOT) this.post();
      }
    }
  }

  async digest(): Promise<Digests> {
    if (this.filled) this.post();
    if (this.failed) throw this.failed;
    const result = await new Promise<Digests | Error>((resolve) => {
      this.done = resolve;
      this.entry.worker.postMessage({ id: this.id, op: 'end' });
    });
    this.release();
    if (result instanceof Error) throw result;
    return result;
  }

  abort(): void {
    if (!this.entry.streams.has(this.id)) return;
    if (!this.failed) this.entry.worker.postMessage({ id: this.id, op: 'abort' });
    this.release();
  }

  private post(): void {
    this.entry.worker.postMessage({ id: this.id, op: 'data', offset: (this.sent % SLOTS) * SLOT, length: this.filled });
    this.queued++;
    this.sent++;
    this.filled = 0;
  }

  private release(): void {
    if (this.entry.streams.delete(this.id) && this.entry.streams.size === 0) this.entry.worker.unref();
  }
}
