import { Worker } from 'node:worker_threads';
import { analyzeMessage, type Analysis, type AnalyzeInput } from './analyze.ts';
import type { DnsResolver } from './authenticate.ts';
import { isCachingResolver } from './dns-cache.ts';
import type { FromWorker, ToWorker } from './analyze-worker.ts';

/**
 * Parsing, SPF/DKIM/DMARC/ARC and message.json serialization of received mail on worker threads,
 * so that the event loop, which runs SMTP sessions and the group commit, does not (they were an
 * eighth of its time per message). `threads` workers start with the first message; 0 analyzes on
 * the event loop. DNS questions come back to this thread's resolver. A worker that dies fails
 * nothing: its messages are analyzed here and a new worker starts with the next message.
 */
export class AnalyzePool {
  private workers: PoolWorker[] = [];
  private closed = false;
  /** When a thread was last lost (performance.now()), 0 if never. */
  private lostAt = 0;

  constructor(
    private readonly resolver: DnsResolver,
    private readonly threads: number,
    private readonly opts: {
      log: { warn: (obj: unknown, msg: string) => void };
      /** Counts each analysis by where it ran. */
      counted?: (on: 'thread' | 'event_loop') => void;
      /** The worker module (tests: one that dies). */
      workerModule?: URL;
      /** After a thread is lost, no new one starts for this long (a thread that cannot start would otherwise be retried for every message). */
      restartDelayMs?: number;
      /** A message not analyzed by then ends its thread (a hung parser) and is analyzed on the event loop. */
      jobTimeoutMs?: number;
    },
  ) {}

  async analyze(bytes: Buffer, input: AnalyzeInput): Promise<Analysis> {
    const worker = this.pick();
    if (worker) {
      try {
        const analysis = await worker.analyze(bytes, input);
        this.opts.counted?.('thread');
        return analysis;
      } catch (err) {
        if (!(err instanceof WorkerLost)) throw err;
        this.lostAt = performance.now();
        this.opts.log.warn({ err: err.message }, 'analysis thread lost; analyzing on the event loop');
      }
    }
    const analysis = await analyzeMessage(bytes, input, this.resolver);
    this.opts.counted?.('event_loop');
    return analysis;
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.all(this.workers.map((w) => w.terminate()));
    this.workers = [];
  }

  private pick(): PoolWorker | null {
    if (this.closed || this.threads <= 0) return null;
    this.workers = this.workers.filter((w) => w.alive);
    // The least busy thread; a new one while the pool is not full and every thread has work.
    let best = this.workers.reduce<PoolWorker | null>((b, w) => (!b || w.busy < b.busy ? w : b), null);
    const restarting = this.lostAt > 0 && performance.now() - this.lostAt < (this.opts.restartDelayMs ?? 5_000);
    if (this.workers.length < this.threads && (!best || best.busy > 0) && !restarting) {
      best = new PoolWorker(this.resolver, this.opts.workerModule ?? new URL('./analyze-worker.ts', import.meta.url), this.opts.jobTimeoutMs ?? 60_000);
      this.workers.push(best);
    }
    return best;
  }
}

class WorkerLost extends Error {}

class PoolWorker {
  busy = 0;
  alive = true;
  private readonly worker: Worker;
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (a: Analysis) => void; reject: (e: unknown) => void }>();

  constructor(
    private readonly resolver: DnsResolver,
    module: URL,
    private readonly jobTimeoutMs: number,
  ) {
    this.worker = new Worker(new URL('./analyze-worker-boot.mjs', import.meta.url), {
      workerData: { module: module.href },
      // Not the app's execArgv (a --cpu-prof or --inspect meant for the main thread).
      execArgv: [],
    });
    this.worker.unref();
    this.worker.on('message', (msg: FromWorker) => this.onMessage(msg));
    this.worker.on('error', (err) => this.lost(err.message));
    this.worker.on('exit', (code) => this.lost(`exited with code ${code}`));
  }

  analyze(bytes: Buffer, input: AnalyzeInput): Promise<Analysis> {
    const id = this.nextId++;
    this.busy++;
    let timer: NodeJS.Timeout | undefined;
    return new Promise<Analysis>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      timer = setTimeout(() => {
        this.lost(`no answer in ${this.jobTimeoutMs} ms`);
        void this.worker.terminate();
      }, this.jobTimeoutMs);
      timer.unref();
      // A copy of the message's own size, moved to the thread: `bytes` may be a view into a shared
      // pool slab (which a copy by structured clone would carry whole), and stays here for a fallback.
      const copy = new Uint8Array(bytes);
      const msg: ToWorker = { kind: 'analyze', id, bytes: copy, input: { ...input, receivedAt: input.receivedAt.getTime() } };
      this.worker.postMessage(msg, [copy.buffer]);
    }).finally(() => {
      clearTimeout(timer);
      this.busy--;
    });
  }

  terminate(): Promise<number> {
    this.alive = false;
    return this.worker.terminate();
  }

  private onMessage(msg: FromWorker): void {
    if (msg.kind === 'dns') {
      const answer = (reply: ToWorker) => {
        try {
          this.worker.postMessage(reply);
        } catch (err) {
          // An answer that cannot cross to the thread (not plain data) is a failed lookup there.
          this.worker.postMessage({ kind: 'dns', qid: msg.qid, error: { code: 'ESERVFAIL', message: String((err as Error)?.message ?? err) } } satisfies ToWorker);
        }
      };
      const failed = (err: unknown, until = 0) => {
        const e = err as { code?: unknown; message?: unknown };
        answer({ kind: 'dns', qid: msg.qid, error: { code: typeof e?.code === 'string' ? e.code : 'ESERVFAIL', message: String(e?.message ?? err) }, until });
      };
      // A caching resolver says how long its answer stays good, and the thread keeps it that long:
      // each question would otherwise wait for this (busy) event loop, for every message.
      const resolver = this.resolver;
      if (isCachingResolver(resolver)) {
        resolver.withExpiry(msg.name, msg.rrtype).then(
          (a) => ('error' in a ? failed(a.error, a.until) : answer({ kind: 'dns', qid: msg.qid, value: a.value, until: a.until })),
          (err: unknown) => failed(err),
        );
        return;
      }
      // Through a promise: a resolver that throws, or returns a plain value, cannot escape this listener.
      Promise.resolve()
        .then(() => resolver(msg.name, msg.rrtype))
        .then((value) => answer({ kind: 'dns', qid: msg.qid, value }), (err: unknown) => failed(err));
      return;
    }
    const pending = this.pending.get(msg.id);
    this.pending.delete(msg.id);
    if (!pending) return;
    if (msg.kind === 'failed') pending.reject(new Error(msg.message));
    else pending.resolve(revive(msg.analysis as Analysis));
  }

  private lost(why: string): void {
    if (!this.alive && !this.pending.size) return;
    this.alive = false;
    for (const p of this.pending.values()) p.reject(new WorkerLost(why));
    this.pending.clear();
  }
}

/** Buffers arrive as Uint8Arrays: make them Buffers again (same memory, no copy). */
function revive(a: Analysis): Analysis {
  const buf = (u: Uint8Array) => Buffer.from(u.buffer, u.byteOffset, u.byteLength);
  return {
    ...a,
    parsed: { ...a.parsed, attachments: a.parsed.attachments.map((x) => ({ ...x, content: buf(x.content) })) },
    jsonBytes: a.jsonBytes.map(buf),
  };
}
