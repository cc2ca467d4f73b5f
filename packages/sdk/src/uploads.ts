import { CubbyError, errorFromResponse } from './errors.ts';
import type { FetchLike, Transport } from './http.ts';
import type { HasherFactory } from './hashing.ts';
import { guessContentType, toSource, type UploadInput, type UploadSource } from './sources.ts';
import type { DirectUpload, FileWrite, UploadSession, UploadSessionResponse, UploadTarget } from './types.ts';

// Uploads: one file through a direct upload (declare with checksums, PUT the bytes to the
// returned URL with exactly its headers, save), and many through one upload session (declare in
// batches, PUT in parallel, save each batch with finalize_batch, then finalize). The session
// takes the mailbox's write lock; any failure or abort cancels it so that no lock is left behind
// (what was saved stays saved, and a re-run skips identical files).

export interface UploadProgress {
  phase: 'hashing' | 'uploading' | 'saving' | 'finalizing' | 'done';
  filesTotal: number | null;
  filesDone: number;
  filesSkipped: number;
  bytesTotal: number;
  bytesDone: number;
  path?: string;
}

export interface UploadFileOptions {
  contentType?: string;
  /** `skip` leaves an existing file at the path alone. */
  existingFilePolicy?: 'replace' | 'skip';
  expectedMailboxVersion?: string;
  onProgress?: (p: UploadProgress) => void;
  accountId?: string;
  reason?: string;
  signal?: AbortSignal;
}

export interface UploadEntry {
  /** Path inside the mailbox. */
  path: string;
  source: UploadInput;
}

export interface UploadManyOptions {
  /** Delete files the session did not name (not `_email/`; needs mailbox-admin). */
  deleteMissing?: boolean;
  /** Files per declaration and per finalize_batch (1–100, default 50). */
  batchSize?: number;
  /** Parallel PUTs (default 8). */
  concurrency?: number;
  /** Makes starting idempotent and an interrupted run resumable: the same key returns the pending session. */
  clientSessionKey?: string;
  /**
   * Files one session may hold (the service's limit, 10,000). More files go through further
   * sessions, one after the other; `deleteMissing` needs them all in one session.
   */
  sessionFileLimit?: number;
  expectedFileCount?: number;
  /** Total bytes, when known up front (progress shows it from the start). */
  expectedBytes?: number;
  onProgress?: (p: UploadProgress) => void;
  accountId?: string;
  reason?: string;
  signal?: AbortSignal;
}

export interface UploadManyResult {
  /** The last session (of `sessions`). */
  sessionId: string;
  sessions: number;
  uploaded: number;
  skipped: number;
  bytes: number;
  session: UploadSession;
}

/** What a PUT of the bytes answered. */
export interface PutAnswer {
  status: number;
  headers: Headers;
  text: string;
}

/** Sends one PUT of a source's bytes (the Node entry streams files over node:http with keep-alive). */
export type PutBytes = (url: string, headers: Record<string, string>, source: UploadSource, signal?: AbortSignal) => Promise<PutAnswer>;

export interface UploadContext {
  transport: Transport;
  fetch: FetchLike;
  hasher: HasherFactory;
  sleep: (ms: number) => Promise<void>;
  /** Replaces fetch for the PUTs of the bytes (default: fetch with the source's body). */
  putBytes?: PutBytes;
}

async function fetchPut(ctx: UploadContext, url: string, headers: Record<string, string>, source: UploadSource, signal?: AbortSignal): Promise<PutAnswer> {
  const body = await source.open();
  const init: RequestInit & { duplex?: 'half' } = { method: 'PUT', headers, body: body as BodyInit, signal };
  if (typeof ReadableStream !== 'undefined' && body instanceof ReadableStream) init.duplex = 'half';
  const res = await ctx.fetch(url, init);
  return { status: res.status, headers: res.headers, text: await res.text() };
}

const MAX_CHECKSUM_RETRIES = 2;

async function put(ctx: UploadContext, target: UploadTarget, source: UploadSource, signal?: AbortSignal): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    let res: PutAnswer;
    try {
      res = await (ctx.putBytes ? ctx.putBytes(target.url, target.headers, source, signal) : fetchPut(ctx, target.url, target.headers, source, signal));
    } catch (err) {
      if (err instanceof CubbyError) throw err; // e.g. the bytes changed while they were sent
      if (signal?.aborted || attempt >= 2) throw new CubbyError({ code: 'NETWORK_ERROR', status: 0, message: `upload failed: ${(err as Error).message}`, cause: err });
      continue;
    }
    if (res.status >= 200 && res.status < 300) return;
    let parsed: any;
    try {
      parsed = JSON.parse(res.text);
    } catch {
      parsed = undefined;
    }
    const error = errorFromResponse(res.status, res.headers, parsed, res.text);
    if ((res.status === 503 || res.status === 429) && attempt < 3) {
      await ctx.sleep((error.retryAfter ?? 1) * 1000);
      continue;
    }
    throw error;
  }
}

/** Uploads one file: direct upload, PUT, save. Identical content at the path is skipped. */
export async function uploadFile(ctx: UploadContext, mailboxId: string, path: string, input: UploadInput, opts: UploadFileOptions = {}): Promise<FileWrite> {
  const source = await toSource(input, ctx.hasher);
  const common = { ...(opts.accountId ? { account_id: opts.accountId } : {}), ...(opts.reason ? { reason: opts.reason } : {}) };
  for (let attempt = 0; ; attempt++) {
    opts.onProgress?.({ phase: 'hashing', filesTotal: 1, filesDone: 0, filesSkipped: 0, bytesTotal: 0, bytesDone: 0, path });
    const d = await source.digests();
    const step1 = await ctx.transport.data<DirectUpload>({
      method: 'POST',
      path: '/v1/direct_uploads',
      retry: true, // declaring twice only makes a second unused upload row
      signal: opts.signal,
      body: {
        mailbox_id: mailboxId,
        path,
        ...(opts.existingFilePolicy ? { existing_file_policy: opts.existingFilePolicy } : {}),
        blob: { filename: path.split('/').pop(), byte_size: d.size, checksum: d.md5Base64, content_type: opts.contentType ?? source.contentType ?? guessContentType(path), sha256: d.sha256Hex, purpose: 'mailbox_file' },
        ...common,
      },
    });
    if (step1.skipped) {
      opts.onProgress?.({ phase: 'done', filesTotal: 1, filesDone: 1, filesSkipped: 1, bytesTotal: d.size, bytesDone: d.size, path });
      // The skip answer (identical content already saved) carries the file and its version.
      const saved = step1 as unknown as Pick<FileWrite, 'file' | 'version'> & { duplicate?: boolean };
      return { ...step1, file: saved.file, version: saved.version ?? null, skipped: true, duplicate: Boolean(saved.duplicate) } as unknown as FileWrite;
    }
    opts.onProgress?.({ phase: 'uploading', filesTotal: 1, filesDone: 0, filesSkipped: 0, bytesTotal: d.size, bytesDone: 0, path });
    try {
      await put(ctx, step1.direct_upload!, source, opts.signal);
    } catch (err) {
      // The bytes changed after they were hashed: hash again and declare again.
      if (err instanceof CubbyError && err.code === 'UPLOAD_CHECKSUM_MISMATCH' && attempt < MAX_CHECKSUM_RETRIES) continue;
      throw err;
    }
    opts.onProgress?.({ phase: 'saving', filesTotal: 1, filesDone: 0, filesSkipped: 0, bytesTotal: d.size, bytesDone: d.size, path });
    const saved = await ctx.transport.data<FileWrite>({
      method: 'POST',
      path: `/v1/mailboxes/${mailboxId}/files`,
      retry: true, // saving the same blob again is a duplicate, never a second version
      signal: opts.signal,
      body: { path, signed_blob_id: step1.signed_id, ...(opts.existingFilePolicy ? { existing_file_policy: opts.existingFilePolicy } : {}), ...(opts.expectedMailboxVersion ? { expected_mailbox_version: opts.expectedMailboxVersion } : {}), ...common },
    });
    opts.onProgress?.({ phase: 'done', filesTotal: 1, filesDone: 1, filesSkipped: saved.skipped ? 1 : 0, bytesTotal: d.size, bytesDone: d.size, path });
    return saved;
  }
}

async function pool<T>(items: T[], n: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  let failed: unknown = null;
  const worker = async () => {
    while (next < items.length && failed === null) {
      const item = items[next++]!;
      try {
        await fn(item);
      } catch (err) {
        failed ??= err;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(n, items.length) }, worker));
  if (failed !== null) throw failed;
}

async function* chunks<T>(entries: AsyncIterable<T> | Iterable<T>, size: number): AsyncGenerator<T[]> {
  let batch: T[] = [];
  for await (const e of entries) {
    batch.push(e);
    if (batch.length >= size) {
      yield batch;
      batch = [];
    }
  }
  if (batch.length) yield batch;
}

/** Bytes of a batch past which the next batch is not read ahead (small files are held in memory). */
const READ_AHEAD_MAX_BYTES = 64 * 1024 * 1024;

/** Whether two batches name the same path as the service sees it (NFC, no leading slash; case folded to be safe). */
function sharesPath(a: { path: string }[], b: { path: string }[]): boolean {
  const key = (p: string) => p.normalize('NFC').replace(/^\/+/, '').toLowerCase();
  const seen = new Set(b.map((e) => key(e.path)));
  return a.some((e) => seen.has(key(e.path)));
}

/** The service's limit of files per upload session. */
export const SESSION_FILE_LIMIT = 10_000;

/**
 * Uploads many files through one upload session (or, past `sessionFileLimit` files, one session
 * after another). `entries` may be an async iterable, read in batches: memory stays flat however
 * many files there are.
 */
export async function uploadMany(ctx: UploadContext, mailboxId: string, entries: AsyncIterable<UploadEntry> | Iterable<UploadEntry>, opts: UploadManyOptions = {}): Promise<UploadManyResult> {
  const batchSize = Math.max(1, Math.min(100, opts.batchSize ?? 50));
  const concurrency = Math.max(1, opts.concurrency ?? 8);
  const limit = Math.max(batchSize, Math.min(SESSION_FILE_LIMIT, opts.sessionFileLimit ?? SESSION_FILE_LIMIT));
  const base = `/v1/mailboxes/${mailboxId}/upload_sessions`;
  const common = { ...(opts.accountId ? { account_id: opts.accountId } : {}), ...(opts.reason ? { reason: opts.reason } : {}) };
  const t = ctx.transport;
  const tooMany = () =>
    new CubbyError({ code: 'TOO_MANY_FILES_FOR_DELETE_MISSING', status: 0, message: `deleteMissing mirrors through one upload session, which holds at most ${limit} files`, details: { max: limit } });
  if (opts.deleteMissing && (opts.expectedFileCount ?? 0) > limit) throw tooMany();

  const progress: UploadProgress = { phase: 'hashing', filesTotal: opts.expectedFileCount ?? null, filesDone: 0, filesSkipped: 0, bytesTotal: opts.expectedBytes ?? 0, bytesDone: 0 };
  const report = (phase: UploadProgress['phase'], path?: string) => opts.onProgress?.({ ...progress, phase, ...(path ? { path } : {}) });
  let uploaded = 0;
  let skipped = 0;
  let seen = 0;
  let part = 0;

  /** Starts the next part; with a key, the part of an interrupted run is found again (each part has its own key). */
  const start = async (): Promise<UploadSession> => {
    part++;
    const key = opts.clientSessionKey === undefined ? undefined : part === 1 ? opts.clientSessionKey : `${opts.clientSessionKey}.${part}`;
    const left = opts.expectedFileCount === undefined ? undefined : Math.min(limit, Math.max(0, opts.expectedFileCount - seen));
    const started = await t.data<UploadSessionResponse>({
      method: 'POST',
      path: base,
      retry: key !== undefined, // with a key, starting twice returns the same session
      signal: opts.signal,
      body: { delete_missing: opts.deleteMissing ?? false, ...(left !== undefined ? { expected_file_count: left } : {}), ...(key ? { client_session_key: key } : {}), ...common },
    });
    return started.mailbox_upload_session;
  };
  /** finalize {complete: true} until it is no longer pending. */
  const finish = async (id: string): Promise<UploadSession> => {
    report('finalizing');
    for (;;) {
      const fin = await t.raw<{ data: UploadSessionResponse }>({ method: 'POST', path: `${base}/${id}/finalize`, retry: true, signal: opts.signal, body: { complete: true, ...common } });
      const data = fin.body.data;
      if (fin.status !== 202 && !data.finalize_pending) return data.mailbox_upload_session;
      const wait = Number(fin.headers.get('retry-after') ?? '1');
      await ctx.sleep(Math.min(Number.isFinite(wait) ? wait : 1, 5) * 1000);
    }
  };

  let session = await start();
  /** Files the current session holds (a resumed session already holds some). */
  let held = session.files_count ?? 0;
  /**
   * The save (finalize_batch) of the last batch, still running: the next batch is hashed, declared
   * and uploaded meanwhile, so the service saves one batch while it receives the next. One save at
   * a time; its failure surfaces at the next save, at the end, or when the session changes. With
   * its files: a declaration naming one of them waits for it.
   */
  let saving: { done: Promise<unknown>; files: { path: string }[] } | null = null;
  const saved = async () => {
    const s = saving;
    saving = null;
    await s?.done;
  };

  type Entry = { path: string; source: UploadSource };
  const describe = (batch: Entry[]) =>
    Promise.all(
      batch.map(async (e) => {
        const d = await e.source.digests();
        return { path: e.path, name: e.path.split('/').pop(), byte_size: d.size, content_type: e.source.contentType ?? guessContentType(e.path), checksum: d.md5Base64, sha256: d.sha256Hex };
      }),
    );
  type Described = Awaited<ReturnType<typeof describe>>;
  const declareDescribed = async (files: Described) => {
    // Declaring a path again supersedes its unsaved declaration: safe to retry.
    const res = await t.data<UploadSessionResponse>({ method: 'POST', path: `${base}/${session.id}/uploads`, retry: true, signal: opts.signal, body: { files, ...common } });
    held = res.mailbox_upload_session?.files_count ?? held + files.length;
    return { res, files };
  };
  const declare = async (batch: Entry[]) => declareDescribed(await describe(batch));

  /** A batch read and hashed, not declared yet. */
  type Hashed = { batch: Entry[]; files: Described };
  type Declared = Awaited<ReturnType<typeof declareDescribed>> & { batch: Entry[] };
  const batches = chunks(entries, batchSize)[Symbol.asyncIterator]();
  /** Reading and hashing the next batch; `result` once it has settled (value null: no more entries). */
  type Reading = { promise: Promise<Hashed | null>; result?: { value: Hashed | null } | { error: unknown } };
  const readNext = (): Reading => {
    const reading: Reading = {
      promise: (async () => {
        const r = await batches.next();
        if (r.done) return null;
        const batch = await Promise.all(r.value.map(async (e) => ({ path: e.path, source: await toSource(e.source, ctx.hasher) })));
        return { batch, files: await describe(batch) };
      })(),
    };
    reading.promise.then(
      (value) => (reading.result = { value }),
      (error: unknown) => (reading.result = { error }),
    );
    return reading;
  };
  /** Sends a hashed batch's declaration; the promise of its answer. */
  const sendDeclaration = (h: Hashed): Promise<Declared> => {
    seen += h.batch.length;
    const declared = declareDescribed(h.files).then((d) => ({ ...d, batch: h.batch }));
    declared.catch(() => undefined); // awaited at the top of its batch; not an unhandled rejection meanwhile
    return declared;
  };

  /** The next batch being read and hashed (null: not started). */
  let next: Reading | null = null;
  /** The next batch's declaration, when it was sent before this batch's save. */
  let ahead: Promise<Declared> | null = null;
  try {
    for (;;) {
      if (!ahead) {
        if (!next?.result) report('hashing');
        next ??= readNext();
        const h = await next.promise;
        next = null;
        if (!h) break;
        if (held + h.batch.length > limit) {
          // This session is full: save it, and go on in the next one.
          if (opts.deleteMissing) throw tooMany();
          await saved();
          await finish(session.id);
          session = await start();
          held = session.files_count ?? 0;
        }
        // A declaration naming a file of the save in flight would supersede it: wait for the save.
        if (saving && sharesPath(h.batch, saving.files)) await saved();
        ahead = sendDeclaration(h);
      }
      const { res, files, batch } = await ahead;
      ahead = null;
      // The next batch is read and hashed while this one's bytes are sent, unless this batch holds
      // much in memory (files up to 8 MiB are read whole): then one batch at a time, as memory
      // should stay flat.
      if (files.reduce((n, f) => n + f.byte_size, 0) <= READ_AHEAD_MAX_BYTES) next = readNext();
      if (opts.expectedBytes === undefined) for (const f of files) progress.bytesTotal += f.byte_size;
      const skippedHere = res.skipped?.length ?? 0;
      skipped += skippedHere;
      progress.filesSkipped += skippedHere;
      progress.filesDone += skippedHere;
      for (const s of res.skipped ?? []) progress.bytesDone += files[s.input_index]?.byte_size ?? 0;
      report('uploading');
      /** This batch's files whose bytes the service took: exactly its unsaved declarations with bytes. */
      let stored = 0;
      let retried: { path: string; source: UploadSource }[] = [];
      await pool(res.uploads ?? [], concurrency, async (u) => {
        const entry = batch[u.input_index]!;
        try {
          await put(ctx, u.upload, entry.source, opts.signal);
        } catch (err) {
          if (err instanceof CubbyError && err.code === 'UPLOAD_CHECKSUM_MISMATCH') {
            retried.push(entry); // changed while uploading: hashed and declared again below
            return;
          }
          throw err;
        }
        progress.bytesDone += files[u.input_index]!.byte_size;
        progress.filesDone++;
        uploaded++;
        stored++;
        report('uploading', entry.path);
      });
      for (let round = 0; retried.length && round < MAX_CHECKSUM_RETRIES; round++) {
        const again = retried;
        retried = [];
        const { res: res2, files: files2 } = await declare(again);
        // A file that changed back to what is stored is skipped now, and has nothing to save.
        skipped += res2.skipped?.length ?? 0;
        progress.filesSkipped += res2.skipped?.length ?? 0;
        progress.filesDone += res2.skipped?.length ?? 0;
        await pool(res2.uploads ?? [], concurrency, async (u) => {
          const entry = again[u.input_index]!;
          try {
            await put(ctx, u.upload, entry.source, opts.signal);
          } catch (err) {
            if (err instanceof CubbyError && err.code === 'UPLOAD_CHECKSUM_MISMATCH') return void retried.push(entry);
            throw err;
          }
          progress.bytesDone += files2[u.input_index]!.byte_size;
          progress.filesDone++;
          uploaded++;
          stored++;
        });
      }
      if (retried.length) throw new CubbyError({ code: 'UPLOAD_CHECKSUM_MISMATCH', status: 422, message: `${retried[0]!.path} kept changing while it was uploaded`, details: { path: retried[0]!.path } });
      // The next batch is declared before this one's save is sent, so the service answers the
      // declaration first and the next PUTs run while this batch is saved. Only when that changes
      // nothing else: the next batch is hashed already (a slow one does not hold this save back,
      // and one that failed to read does not lose it), fits this session, and names none of this
      // batch's paths (declaring a path again supersedes its unsaved declaration, which this save
      // must find). The previous save is awaited first, so nothing declared is being saved.
      await saved();
      const ready = next?.result && 'value' in next.result ? next.result.value : undefined;
      if (ready && held + ready.batch.length <= limit && !sharesPath(ready.batch, batch)) {
        ahead = sendDeclaration(ready);
        next = null;
      }
      if (stored) {
        report('saving');
        // Exactly the files whose bytes the service took (a retry may have turned into a skip): the
        // save prefers files with bytes, so it takes them and never a file of the next batch.
        const done = t.data({ method: 'POST', path: `${base}/${session.id}/finalize_batch`, retry: true, signal: opts.signal, body: { limit: Math.min(100, stored), ...common } });
        done.catch(() => undefined); // awaited later; not an unhandled rejection meanwhile
        saving = { done, files: batch };
      }
    }
    await saved();
    session = await finish(session.id);
    report('done');
    return { sessionId: session.id, sessions: part, uploaded, skipped, bytes: progress.bytesDone, session };
  } catch (err) {
    await saving?.done.catch(() => undefined);
    await ahead?.catch(() => undefined);
    // Cancel: the mailbox lock is released; saved files stay saved and a re-run skips them.
    await t.raw({ method: 'POST', path: `${base}/${session.id}/finalize`, retry: true, body: { complete: false, ...common } }).catch(() => undefined);
    // Then close the entries (a directory walk holds an open directory), as a for-await loop would:
    // after the read ahead, which the cancel need not wait for.
    await next?.promise.catch(() => undefined);
    await batches.return?.(undefined).catch(() => undefined);
    throw err;
  }
}
