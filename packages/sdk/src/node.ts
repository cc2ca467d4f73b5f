// @cubby/sdk/node: the client with Node's batteries — `ws` for live subscriptions (Node 20 has no
// global WebSocket), node:crypto for checksums, and files and folders on disk as upload sources,
// read as streams so that a large folder or file never has to fit in memory.
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import path from 'node:path';
import { createHash } from 'node:crypto';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { WebSocket } from 'ws';
import { Cubby as CoreCubby, type CubbyOptions } from './client.ts';
import { CubbyError } from './errors.ts';
import type { HasherFactory } from './hashing.ts';
import type { UploadSource } from './sources.ts';
import { guessContentType } from './sources.ts';
import { SESSION_FILE_LIMIT, type PutAnswer, type PutBytes, type UploadEntry, type UploadFileOptions, type UploadManyOptions, type UploadManyResult } from './uploads.ts';
import type { WebSocketConstructor } from './live.ts';
import type { FileWrite } from './types.ts';

export * from './index.ts';

export const nodeHasher: HasherFactory = () => {
  const md5 = createHash('md5');
  const sha = createHash('sha256');
  let size = 0;
  return {
    update(chunk) {
      md5.update(chunk);
      sha.update(chunk);
      size += chunk.length;
    },
    digest() {
      return { md5Base64: md5.digest('base64'), sha256Hex: sha.digest('hex'), size };
    },
  };
};

/** Files up to this size are read into memory for the PUT; larger ones are streamed. */
const IN_MEMORY_LIMIT = 8 * 1024 * 1024;

/** A source the Node PUT can stream without web streams: a buffer, or a file range. */
interface NodeBodySource extends UploadSource {
  nodeBody(): Buffer | { file: string; length: number };
}

/**
 * A file on disk as an upload source. Hashing reads it (one pass, both checksums); the PUT sends
 * the same buffer (small files) or reads it again as a stream (large ones). If the file changes in
 * between, the service refuses the bytes (checksum mismatch) and the SDK hashes and declares it
 * again.
 */
export function fileSource(filePath: string, opts: { contentType?: string } = {}): UploadSource {
  let small: Buffer | null = null;
  let size = 0;
  const source: NodeBodySource = {
    contentType: opts.contentType ?? guessContentType(filePath),
    async digests() {
      const st = await fs.promises.stat(filePath);
      if (st.size <= IN_MEMORY_LIMIT) {
        small = await fs.promises.readFile(filePath);
        const h = nodeHasher();
        h.update(small);
        return h.digest();
      }
      small = null;
      const h = nodeHasher();
      for await (const chunk of fs.createReadStream(filePath, { highWaterMark: 1024 * 1024 })) h.update(chunk as Buffer);
      const d = h.digest();
      size = d.size;
      return d;
    },
    async open() {
      if (small) return new Uint8Array(small.buffer, small.byteOffset, small.byteLength);
      // Exactly the bytes that were hashed, or fewer/more if the file changed: the service checks.
      return Readable.toWeb(fs.createReadStream(filePath, { highWaterMark: 1024 * 1024, end: Math.max(0, size - 1) })) as unknown as ReadableStream<Uint8Array>;
    },
    nodeBody() {
      return small ?? { file: filePath, length: size };
    },
  };
  return source;
}

// One keep-alive pool per protocol for the PUTs: fetch (undici) costs the client about twice the
// CPU per request, and streams a file through web streams (more copies, more garbage).
const agents = { http: new http.Agent({ keepAlive: true, maxSockets: 32 }), https: new https.Agent({ keepAlive: true, maxSockets: 32 }) };

/** PUT over node:http(s): buffers as they are, files streamed with backpressure and a Content-Length. */
export const nodePutBytes: PutBytes = async (url, headers, source, signal) => {
  const own = typeof (source as NodeBodySource).nodeBody === 'function' ? (source as NodeBodySource).nodeBody() : null;
  let body: Buffer | Readable;
  let length: number | null;
  if (own) {
    body = Buffer.isBuffer(own) ? own : fs.createReadStream(own.file, { highWaterMark: 1024 * 1024, end: Math.max(0, own.length - 1) });
    length = Buffer.isBuffer(own) ? own.length : own.length;
  } else {
    const opened = await source.open();
    if (opened instanceof Uint8Array) body = Buffer.from(opened.buffer, opened.byteOffset, opened.byteLength);
    else if (opened instanceof Blob) body = Buffer.from(await opened.arrayBuffer());
    else body = Readable.fromWeb(opened as never);
    length = Buffer.isBuffer(body) ? body.length : null;
  }
  const u = new URL(url);
  const lib = u.protocol === 'https:' ? https : http;
  return await new Promise<PutAnswer>((resolve, reject) => {
    const req = lib.request(u, { method: 'PUT', agent: u.protocol === 'https:' ? agents.https : agents.http, signal, headers: { ...headers, ...(length !== null ? { 'content-length': String(length) } : {}) } }, (res) => {
      const parts: Buffer[] = [];
      res.on('data', (d: Buffer) => parts.push(d));
      res.on('end', () => {
        const h = new Headers();
        for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) h.set(k, Array.isArray(v) ? v.join(', ') : v);
        resolve({ status: res.statusCode ?? 0, headers: h, text: Buffer.concat(parts).toString('utf8') });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    if (Buffer.isBuffer(body)) return void req.end(body);
    if (length === null) return void pipeline(body, req).catch(reject);
    // A file that shrank since it was hashed would leave the request short of its Content-Length
    // (the server would wait for the rest): stop, and answer as the service does for changed bytes.
    let sent = 0;
    const count = new Transform({
      transform: (chunk: Buffer, _enc, done) => {
        sent += chunk.length;
        done(null, chunk);
      },
      flush: (done) => done(sent === length ? null : changedError()),
    });
    pipeline(body, count, req).catch((err) => {
      req.destroy();
      reject(err);
    });
  });
};

const changedError = () => new CubbyError({ code: 'UPLOAD_CHECKSUM_MISMATCH', status: 422, message: 'the file changed while it was uploaded' });

export interface WalkOptions {
  /** Prefix inside the mailbox (e.g. `site/`); joined with a `/`. */
  prefix?: string;
  /** Names skipped wherever they appear (default `.git`, `.DS_Store`). */
  ignore?: string[];
}

function joinRemote(prefix: string | undefined, rel: string): string {
  const p = (prefix ?? '').replace(/^\/+|\/+$/g, '');
  return p ? `${p}/${rel}` : rel;
}

/** Every regular file under `dir`, depth first, streamed (one directory handle at a time). */
export async function* walkDirectory(dir: string, opts: WalkOptions = {}): AsyncGenerator<{ localPath: string; relativePath: string }> {
  const ignore = new Set(opts.ignore ?? ['.git', '.DS_Store']);
  const stack: string[] = [''];
  while (stack.length) {
    const rel = stack.pop()!;
    const handle = await fs.promises.opendir(path.join(dir, rel));
    const subdirs: string[] = [];
    for await (const entry of handle) {
      if (ignore.has(entry.name)) continue;
      const childRel = rel ? `${rel}/${entry.name}` : entry.name;
      if (entry.isDirectory()) subdirs.push(childRel);
      else if (entry.isFile()) yield { localPath: path.join(dir, childRel), relativePath: childRel };
    }
    stack.push(...subdirs.sort().reverse());
  }
}

export interface UploadDirectoryOptions extends UploadManyOptions, WalkOptions {}

export class Cubby extends CoreCubby {
  constructor(opts: CubbyOptions) {
    super({ WebSocket: WebSocket as unknown as WebSocketConstructor, hasher: nodeHasher, ...opts });
    // A fetch of the caller's own (tests, proxies) is used for the bytes too.
    if (!opts.fetch) this.putBytes = nodePutBytes;
  }

  /** Uploads one file from disk to `remotePath`. */
  uploadPath(mailboxId: string, remotePath: string, localPath: string, opts?: UploadFileOptions): Promise<FileWrite> {
    return this.uploadFile(mailboxId, remotePath, fileSource(localPath, { contentType: opts?.contentType }), opts);
  }

  /**
   * Uploads a folder through one upload session (more past 10,000 files); `deleteMissing` makes
   * the mailbox mirror it. The folder is walked twice (count and bytes, then upload), lazily, so
   * memory stays flat however many files it holds.
   */
  async uploadDirectory(mailboxId: string, dir: string, opts: UploadDirectoryOptions = {}): Promise<UploadManyResult & { pruned?: number }> {
    let count = 0;
    let bytes = 0;
    for await (const f of walkDirectory(dir, opts)) {
      count++;
      bytes += (await fs.promises.stat(f.localPath)).size;
    }
    const entries = async function* (): AsyncGenerator<UploadEntry> {
      for await (const f of walkDirectory(dir, opts)) yield { path: joinRemote(opts.prefix, f.relativePath), source: fileSource(f.localPath) };
    };
    // The service prunes (delete_missing) within one session; a folder that needs several is
    // mirrored here instead, after every part is saved.
    const pruneHere = Boolean(opts.deleteMissing) && count > Math.min(SESSION_FILE_LIMIT, opts.sessionFileLimit ?? SESSION_FILE_LIMIT);
    const result = await this.uploadMany(mailboxId, entries(), { expectedFileCount: count, expectedBytes: bytes, ...opts, ...(pruneHere ? { deleteMissing: false } : {}) });
    if (!pruneHere) return result;
    return { ...result, pruned: await this.pruneMissing(mailboxId, dir, opts) };
  }

  /** Deletes the mailbox's files (never `_email/`) that have no regular file at their place in `dir` (under `prefix`). */
  private async pruneMissing(mailboxId: string, dir: string, opts: UploadDirectoryOptions): Promise<number> {
    const ignore = new Set(opts.ignore ?? ['.git', '.DS_Store']);
    const prefix = joinRemote(opts.prefix, '');
    let pruned = 0;
    for await (const f of this.files.list(mailboxId, { limit: 100 })) {
      if (f.path.startsWith('_email/')) continue;
      const rel = prefix ? (f.path.startsWith(prefix) ? f.path.slice(prefix.length) : null) : f.path;
      const local = rel === null || rel.split('/').some((seg) => ignore.has(seg)) ? null : await fs.promises.stat(path.join(dir, ...rel.split('/'))).catch(() => null);
      if (local?.isFile()) continue;
      await this.files.delete(mailboxId, f.id, { signal: opts.signal });
      pruned++;
    }
    return pruned;
  }

  /** Writes a file's current version to `localPath`, streamed. */
  async downloadTo(mailboxId: string, fileId: string, localPath: string): Promise<void> {
    const link = await this.files.downloadLink(mailboxId, fileId);
    const res = await this.fetchLink(link.url);
    await fs.promises.mkdir(path.dirname(localPath), { recursive: true });
    await pipeline(Readable.fromWeb(res.body as never), fs.createWriteStream(localPath));
  }
}
