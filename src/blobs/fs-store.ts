import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { promisify } from 'node:util';
import {
  assertSha256,
  BlobMismatchError,
  BlobNotFoundError,
  clampRange,
  isSha256,
  type BlobStore,
  type ByteRange,
  type PutExpectation,
  type StoredBlob,
} from './blob-store.ts';
import { spoolToFile } from './spool.ts';
import { BlobWriterUnavailable, DEFAULT_WRITER_THREADS, writeSmallBlob, type BlobWriterLog } from './blob-writer.ts';

/**
 * Blobs in a local directory: `<root>/<aa>/<sha256>`, where aa is the first pair of hex digits (as
 * git stores objects). A put() writes `<root>/tmp/<random>.part` while hashing, fdatasyncs it,
 * renames it into place and fsyncs `<aa>`, so a blob is either absent or complete and durable:
 * two syncs per blob, the least a crash-safe create needs. The 256 `<aa>` directories are made (and
 * the root synced) once, when the store is first used, and never removed. Puts of the same content
 * may race: each writes its own temp file and rename() replaces identical bytes atomically.
 *
 * Reads also find blobs in the earlier layout `<aa>/<bb>/<sha256>` (one more level, which cost an
 * extra directory sync whenever `<bb>` was new); new blobs always go to `<aa>/<sha256>`.
 */
/** Directories we create are the service's alone (blob files themselves are written 0600). */
const PRIVATE_DIR = 0o700;

/**
 * Blobs up to this size go to the writer threads (src/blobs/blob-writer.ts): what the spool writes
 * in one go (src/blobs/spool.ts: bodies under 1 MiB), and buffers of up to 1 MiB. The limit was
 * 64 KiB at first, but at 100 KiB (a received message with an attachment) hashing on the event
 * loop and the thread-pool calls cost it far more than the copy that moves the bytes to a thread.
 */
const WRITER_THREAD_MAX_BYTES = 1024 * 1024;

export class FsBlobStore implements BlobStore {
  readonly kind = 'fs' as const;
  readonly root: string;
  private readonly tmpDir: string;
  private ready: Promise<void> | undefined;

  /** Threads writing small blobs (src/blobs/blob-writer.ts); 0: written from the event loop. */
  private readonly writerThreads: number;

  /** Where a lost writer thread is reported. */
  private readonly log: BlobWriterLog | undefined;

  constructor(root: string, opts: { writerThreads?: number; log?: BlobWriterLog } = {}) {
    this.writerThreads = opts.writerThreads ?? DEFAULT_WRITER_THREADS;
    this.log = opts.log;
    this.root = path.resolve(root);
    this.tmpDir = path.join(this.root, 'tmp');
  }

  put(body: Readable, expect: PutExpectation = {}): Promise<StoredBlob> {
    return this.putVia(body, expect, this.writerThreads > 0);
  }

  /** put(), with small blobs offered to the writer threads or not (putBuffer never calls put: the app counts the bytes of each once). */
  private async putVia(body: Readable, expect: PutExpectation, threads: boolean): Promise<StoredBlob> {
    await this.ensureLayout();
    const tmp = path.join(this.tmpDir, `${randomUUID()}.part`);
    let placed = false;
    const writeSmall = async (chunks: Buffer[], byteSize: number): Promise<StoredBlob | null> => {
      const blob = await this.writeOnThread(tmp, chunks, byteSize, expect);
      placed = blob !== null;
      return blob;
    };
    const blob = await spoolToFile(body, expect, tmp, { fsync: true, writeSmall: threads ? writeSmall : undefined });
    if (placed) return blob;
    try {
      const target = this.pathFor(blob.sha256);
      // An existing blob is replaced by identical bytes; either way the entry is synced below.
      await fsp.rename(tmp, target);
      await fsyncDir(path.dirname(target));
      return blob;
    } catch (err) {
      await fsp.rm(tmp, { force: true });
      throw err;
    }
  }

  async putBuffer(bytes: Buffer): Promise<StoredBlob> {
    // A small buffer goes to a writer thread as it is: a stream built around it and read back
    // (the general path) cost the event loop more than the thread's answer.
    if (this.writerThreads > 0 && bytes.length <= WRITER_THREAD_MAX_BYTES) {
      await this.ensureLayout();
      const blob = await this.writeOnThread(path.join(this.tmpDir, `${randomUUID()}.part`), [bytes], bytes.length, {});
      if (blob) return blob;
      // No thread could take it (one was lost): written here, without asking the threads again.
      return this.putVia(Readable.from([bytes]), { byteSize: bytes.length }, false);
    }
    return this.putVia(Readable.from([bytes]), { byteSize: bytes.length }, this.writerThreads > 0);
  }

  /**
   * Writes a small blob on a writer thread (src/blobs/blob-writer.ts), from `tmp` into place; null
   * when it is not for a thread or no thread could take it (nothing is left behind then: the
   * caller writes it itself).
   */
  private async writeOnThread(tmp: string, chunks: Buffer[], byteSize: number, expect: PutExpectation): Promise<StoredBlob | null> {
    // Larger blobs are written here: their cost is in the bytes, not in the calls, and moving
    // them to a thread would copy them.
    if (byteSize > WRITER_THREAD_MAX_BYTES) return null;
    if (expect.byteSize !== undefined && expect.byteSize !== byteSize) return null; // refused below, as usual
    const written = await writeSmallBlob(this.writerThreads, { root: this.root, tmp, chunks, sha256Hex: expect.sha256Hex, md5Base64: expect.md5Base64 }, this.log).catch(async (err: unknown) => {
      if (!(err instanceof BlobWriterUnavailable)) throw err;
      // Written elsewhere instead; a thread lost mid-write may have left the temp file.
      await fsp.rm(tmp, { force: true });
      return null;
    });
    if (!written) return null;
    const blob = { sha256: written.sha256, md5Base64: written.md5Base64, byteSize };
    // A digest that did not match was not written. The thread checks in checkExpectation's order
    // (the size was checked above, then MD5, then SHA-256), so the error is the one any put gives.
    if (written.mismatch === 'checksum') throw new BlobMismatchError('checksum', expect.md5Base64!, blob.md5Base64);
    if (written.mismatch === 'sha256') throw new BlobMismatchError('sha256', expect.sha256Hex!, blob.sha256);
    return blob;
  }

  async exists(sha256: string): Promise<boolean> {
    return (await this.size(sha256)) !== null;
  }

  async size(sha256: string): Promise<number | null> {
    assertSha256(sha256);
    for (const p of this.pathsFor(sha256)) {
      try {
        const st = await fsp.stat(p);
        if (st.isFile()) return st.size;
      } catch (err) {
        if (!isNotFound(err)) throw err;
      }
    }
    return null;
  }

  async read(sha256: string, range?: ByteRange): Promise<Readable> {
    assertSha256(sha256);
    let fh: fsp.FileHandle | undefined;
    for (const p of this.pathsFor(sha256)) {
      try {
        fh = await fsp.open(p, 'r');
        break;
      } catch (err) {
        if (!isNotFound(err)) throw err;
      }
    }
    if (!fh) throw new BlobNotFoundError(sha256);
    try {
      const size = (await fh.stat()).size;
      // Large reads in large pieces (fewer thread-pool hops); small blobs keep Node's 64 KiB buffer.
      const highWaterMark = Math.min(READ_CHUNK, Math.max(64 * 1024, size));
      if (!range) return fh.createReadStream({ highWaterMark });
      const { start, end } = clampRange(range, size);
      return fh.createReadStream({ start, end, highWaterMark });
    } catch (err) {
      await fh.close();
      throw err;
    }
  }

  async delete(sha256: string): Promise<void> {
    assertSha256(sha256);
    for (const p of this.pathsFor(sha256)) await fsp.rm(p, { force: true });
  }

  async *list(): AsyncIterable<string> {
    const fanout = /^[0-9a-f]{2}$/;
    for (const a of await readdirOrEmpty(this.root)) {
      if (!fanout.test(a)) continue;
      const entries = await readdirOrEmpty(path.join(this.root, a));
      const here = new Set(entries.filter((e) => isSha256(e) && e.startsWith(a)));
      yield* here;
      // The earlier two-level layout (a blob in both places is listed once).
      for (const b of entries.filter((e) => fanout.test(e))) {
        for (const name of await readdirOrEmpty(path.join(this.root, a, b))) {
          if (isSha256(name) && name.startsWith(a + b) && !here.has(name)) yield name;
        }
      }
    }
  }

  async sweepTemp(before: Date): Promise<number> {
    return sweepPartFiles(this.tmpDir, before, /\.(part|sweep)$/);
  }

  async deleteIfWrittenBefore(sha256: string, before: Date): Promise<boolean> {
    assertSha256(sha256);
    await this.ensureLayout();
    let removed = false;
    for (const p of this.pathsFor(sha256)) {
      const st = await statOrNull(p);
      if (!st) continue;
      if (st.mtimeMs >= before.getTime()) return false;
      // Moved aside first, then looked at again: a put() that renamed fresh bytes into place between
      // the stat and the move shows as a new mtime here, and goes back (unless a newer copy is there).
      const aside = path.join(this.tmpDir, `${sha256}.${randomUUID()}.sweep`);
      try {
        await fsp.rename(p, aside);
      } catch (err) {
        if (isNotFound(err)) continue;
        throw err;
      }
      const moved = await fsp.stat(aside);
      if (moved.mtimeMs >= before.getTime()) {
        await fsp.link(aside, p).catch((err: NodeJS.ErrnoException) => {
          if (err.code !== 'EEXIST') throw err;
        });
        await fsp.rm(aside, { force: true });
        return false;
      }
      await fsp.rm(aside, { force: true });
      removed = true;
    }
    return removed;
  }

  /** Always null: the bytes come through our own upload endpoint. */
  async directUploadTarget(): Promise<null> {
    return null;
  }

  /** Always null: there is no direct upload to adopt. */
  async adoptDirectUpload(): Promise<null> {
    return null;
  }

  /** Always null: our own endpoint serves the bytes. */
  async downloadUrl(): Promise<null> {
    return null;
  }

  private pathFor(sha256: string): string {
    return path.join(this.root, sha256.slice(0, 2), sha256);
  }

  /** Where a blob may be: its place, then its place in the earlier two-level layout. */
  private pathsFor(sha256: string): string[] {
    return [this.pathFor(sha256), path.join(this.root, sha256.slice(0, 2), sha256.slice(2, 4), sha256)];
  }

  /** The temp directory and the 256 first-level directories, made once; then the root is synced. */
  private ensureLayout(): Promise<void> {
    this.ready ??= (async () => {
      await fsp.mkdir(this.tmpDir, { recursive: true, mode: PRIVATE_DIR });
      const hex = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));
      await Promise.all(hex.map((aa) => fsp.mkdir(path.join(this.root, aa), { recursive: true, mode: PRIVATE_DIR })));
      await fsyncDir(this.root);
    })().catch((err: unknown) => {
      this.ready = undefined;
      throw err;
    });
    return this.ready;
  }
}

/**
 * fsync of a directory. Opening and closing one of our few directories is a quick in-memory call,
 * done inline; only the sync itself goes to the thread pool (each hop there costs the event loop
 * tens of microseconds, more than the open).
 */
async function fsyncDir(dir: string): Promise<void> {
  const fd = fs.openSync(dir, 'r');
  try {
    await fsyncFd(fd);
  } finally {
    fs.closeSync(fd);
  }
}

const fsyncFd = promisify(fs.fsync);

/** Bytes per read when streaming a blob out: fewer thread-pool hops than the default 64 KiB. */
const READ_CHUNK = 512 * 1024;

async function statOrNull(p: string): Promise<fs.Stats | null> {
  try {
    return await fsp.stat(p);
  } catch (err) {
    if (isNotFound(err)) return null;
    throw err;
  }
}

/** Removes the files in `dir` whose names match and that were last changed before `before`. */
export async function sweepPartFiles(dir: string, before: Date, names: RegExp): Promise<number> {
  let n = 0;
  for (const name of await readdirOrEmpty(dir)) {
    if (!names.test(name)) continue;
    const p = path.join(dir, name);
    const st = await statOrNull(p);
    if (!st?.isFile() || st.mtimeMs >= before.getTime()) continue;
    await fsp.rm(p, { force: true });
    n++;
  }
  return n;
}

async function readdirOrEmpty(dir: string): Promise<string[]> {
  try {
    return await fsp.readdir(dir);
  } catch (err) {
    if (isNotFound(err)) return [];
    throw err;
  }
}

function isNotFound(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  return code === 'ENOENT' || code === 'ENOTDIR';
}
