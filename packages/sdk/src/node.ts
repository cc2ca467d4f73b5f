// @cubby/sdk/node: the client with Node's batteries — `ws` for live subscriptions (Node 20 has no
// global WebSocket), node:crypto for checksums, and files and folders on disk as upload sources,
// read as streams so that a large folder or file never has to fit in memory.
import fs from 'node:fs';
import path from 'node:path';
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { WebSocket } from 'ws';
import { Cubby as CoreCubby, type CubbyOptions } from './client.ts';
import type { HasherFactory } from './hashing.ts';
import type { UploadSource } from './sources.ts';
import { guessContentType } from './sources.ts';
import { SESSION_FILE_LIMIT, type UploadEntry, type UploadFileOptions, type UploadManyOptions, type UploadManyResult } from './uploads.ts';
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

/**
 * A file on disk as an upload source. Hashing reads it; each PUT reads it again. If the file
 * changes in between, the service refuses the bytes (checksum mismatch) and the SDK hashes and
 * declares it again.
 */
export function fileSource(filePath: string, opts: { contentType?: string } = {}): UploadSource {
  let small: Buffer | null = null;
  let size = 0;
  return {
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
  };
}

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
