import { Worker } from 'node:worker_threads';

// Text extraction off the event loop: one worker thread (src/search/extract/extract-worker.mjs)
// takes documents one at a time. A document that runs past its time has its thread terminated and
// replaced; one that blows the thread's memory cap kills only the thread. Either way the document
// gets a final status, so nothing hostile is retried forever.

export type ExtractKind = 'text' | 'html' | 'pdf' | 'docx' | 'pptx' | 'xlsx' | 'odf';
export type ExtractStatus = 'done' | 'empty' | 'encrypted' | 'broken' | 'too_large' | 'timeout';

export interface ExtractLimits {
  /** Characters of text kept per document (1 MiB by default). */
  maxTextChars: number;
  maxPages: number;
  maxZipEntries: number;
  maxZipEntryBytes: number;
  maxZipTotalBytes: number;
}

export interface ExtractResult {
  status: ExtractStatus;
  text: string | null;
  pages: number | null;
  error?: string;
  truncated?: boolean;
}

export const DEFAULT_LIMITS: ExtractLimits = {
  maxTextChars: 1024 * 1024,
  maxPages: 2000,
  maxZipEntries: 10_000,
  maxZipEntryBytes: 64 * 1024 * 1024,
  maxZipTotalBytes: 128 * 1024 * 1024,
};

const OFFICE: Record<string, ExtractKind> = {
  'application/vnd.openxmlformats-officedocument.wordprocessingml.document': 'docx',
  'application/vnd.openxmlformats-officedocument.presentationml.presentation': 'pptx',
  'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet': 'xlsx',
  'application/vnd.oasis.opendocument.text': 'odf',
  'application/vnd.oasis.opendocument.spreadsheet': 'odf',
  'application/vnd.oasis.opendocument.presentation': 'odf',
};
const BY_EXTENSION: Record<string, ExtractKind> = {
  txt: 'text', md: 'text', markdown: 'text', csv: 'text', tsv: 'text', log: 'text', json: 'text', xml: 'text', yaml: 'text', yml: 'text',
  html: 'html', htm: 'html', pdf: 'pdf', docx: 'docx', pptx: 'pptx', xlsx: 'xlsx', odt: 'odf', ods: 'odf', odp: 'odf',
};

/**
 * What extractor a stored file gets, from its type and name, or null (images, archives, mail:
 * email bodies are indexed from the email itself).
 */
export function extractKind(name: string, mimeType: string): ExtractKind | null {
  const mime = mimeType.toLowerCase().split(';')[0]!.trim();
  if (mime === 'message/rfc822') return null;
  if (mime === 'application/pdf') return 'pdf';
  if (mime === 'text/html' || mime === 'application/xhtml+xml') return 'html';
  if (OFFICE[mime]) return OFFICE[mime]!;
  if (mime.startsWith('text/')) return 'text';
  if (name === 'message.json' && mime === 'application/json') return null;
  const ext = /\.([a-z0-9]{1,10})$/i.exec(name)?.[1]?.toLowerCase();
  return ext ? (BY_EXTENSION[ext] ?? null) : null;
}

interface Pending {
  resolve: (r: ExtractResult) => void;
  timer: NodeJS.Timeout;
}

/** One extraction thread with a queue (callers await in turn). */
export class Extractor {
  private worker: Worker | null = null;
  private pending = new Map<number, Pending>();
  private seq = 0;
  private chain: Promise<unknown> = Promise.resolve();

  constructor(private readonly opts: { timeoutMs: number; maxMemoryMb: number; limits?: Partial<ExtractLimits> }) {}

  extract(kind: ExtractKind, bytes: Uint8Array): Promise<ExtractResult> {
    const run = this.chain.then(() => this.runOne(kind, bytes));
    this.chain = run.catch(() => undefined);
    return run;
  }

  async close(): Promise<void> {
    const w = this.worker;
    this.worker = null;
    for (const [, p] of this.pending) p.resolve({ status: 'broken', text: null, pages: null, error: 'extraction stopped' });
    this.pending.clear();
    await w?.terminate();
  }

  private thread(): Worker {
    if (this.worker) return this.worker;
    const w = new Worker(new URL('./extract-worker.mjs', import.meta.url), {
      resourceLimits: { maxOldGenerationSizeMb: this.opts.maxMemoryMb, maxYoungGenerationSizeMb: 32 },
    });
    w.unref();
    w.on('message', (m: ExtractResult & { id: number }) => {
      const p = this.pending.get(m.id);
      if (!p) return;
      clearTimeout(p.timer);
      this.pending.delete(m.id);
      p.resolve({ status: m.status, text: m.text, pages: m.pages, error: m.error, truncated: m.truncated });
    });
    const fail = (error: string) => {
      if (this.worker === w) this.worker = null;
      for (const [id, p] of this.pending) {
        clearTimeout(p.timer);
        this.pending.delete(id);
        p.resolve({ status: 'too_large', text: null, pages: null, error });
      }
    };
    w.on('error', (err) => fail(`extraction ran out of resources (${(err as Error).message.slice(0, 100)})`));
    w.on('exit', () => fail('extraction thread stopped'));
    this.worker = w;
    return w;
  }

  private runOne(kind: ExtractKind, bytes: Uint8Array): Promise<ExtractResult> {
    const id = ++this.seq;
    const w = this.thread();
    return new Promise<ExtractResult>((resolve) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        resolve({ status: 'timeout', text: null, pages: null, error: `extraction took longer than ${this.opts.timeoutMs} ms` });
        // The thread may be stuck in a loop: replace it.
        if (this.worker === w) this.worker = null;
        void w.terminate();
      }, this.opts.timeoutMs);
      this.pending.set(id, { resolve, timer });
      const copy = new Uint8Array(bytes);
      w.postMessage({ id, kind, bytes: copy.buffer, limits: { ...DEFAULT_LIMITS, ...this.opts.limits } }, [copy.buffer]);
    });
  }
}
