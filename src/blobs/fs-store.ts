import { randomUUID } from 'node:crypto';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import {
  assertSha256,
  BlobNotFoundError,
  clampRange,
  isSha256,
  type BlobStore,
  type ByteRange,
  type PutExpectation,
  type StoredBlob,
} from './blob-store.ts';
import { spoolToFile } from './spool.ts';

/**
 * Blobs in a local directory: `<root>/<aa>/<bb>/<sha256>`, where aa and bb are the first two pairs
 * of hex digits. A put() writes `<root>/tmp/<random>.part` while hashing, fsyncs it, renames it
 * into place and fsyncs the directory, so a blob is either absent or complete and durable. Puts of
 * the same content may race: each writes its own temp file and rename() replaces identical bytes
 * atomically. Directories are never removed, so a put never races a delete over a directory.
 */
export class FsBlobStore implements BlobStore {
  readonly kind = 'fs' as const;
  readonly root: string;
  private readonly tmpDir: string;
  private tmpReady: Promise<void> | undefined;

  constructor(root: string) {
    this.root = path.resolve(root);
    this.tmpDir = path.join(this.root, 'tmp');
  }

  async put(body: Readable, expect: PutExpectation = {}): Promise<StoredBlob> {
    await this.ensureTmpDir();
    const tmp = path.join(this.tmpDir, `${randomUUID()}.part`);
    const blob = await spoolToFile(body, expect, tmp, { fsync: true });
    try {
      const target = this.pathFor(blob.sha256);
      const dir = path.dirname(target);
      if (await isFile(target)) {
        await fsp.rm(tmp, { force: true });
        // Another put may have renamed it in a moment ago and not yet synced the directory.
        await fsyncDir(dir);
        return blob;
      }
      const created = await fsp.mkdir(dir, { recursive: true });
      if (created !== undefined) {
        // New directory entries are durable only once their parents are synced.
        await fsyncDir(this.root);
        await fsyncDir(path.dirname(dir));
      }
      await fsp.rename(tmp, target);
      await fsyncDir(dir);
      return blob;
    } catch (err) {
      await fsp.rm(tmp, { force: true });
      throw err;
    }
  }

  putBuffer(bytes: Buffer): Promise<StoredBlob> {
    return this.put(Readable.from([bytes]), { byteSize: bytes.length });
  }

  async exists(sha256: string): Promise<boolean> {
    return (await this.size(sha256)) !== null;
  }

  async size(sha256: string): Promise<number | null> {
    assertSha256(sha256);
    try {
      const st = await fsp.stat(this.pathFor(sha256));
      return st.isFile() ? st.size : null;
    } catch (err) {
      if (isNotFound(err)) return null;
      throw err;
    }
  }

  async read(sha256: string, range?: ByteRange): Promise<Readable> {
    assertSha256(sha256);
    let fh: fsp.FileHandle;
    try {
      fh = await fsp.open(this.pathFor(sha256), 'r');
    } catch (err) {
      if (isNotFound(err)) throw new BlobNotFoundError(sha256);
      throw err;
    }
    try {
      if (!range) return fh.createReadStream();
      const { start, end } = clampRange(range, (await fh.stat()).size);
      return fh.createReadStream({ start, end });
    } catch (err) {
      await fh.close();
      throw err;
    }
  }

  async delete(sha256: string): Promise<void> {
    assertSha256(sha256);
    await fsp.rm(this.pathFor(sha256), { force: true });
  }

  async *list(): AsyncIterable<string> {
    const fanout = /^[0-9a-f]{2}$/;
    for (const a of await readdirOrEmpty(this.root)) {
      if (!fanout.test(a)) continue;
      for (const b of await readdirOrEmpty(path.join(this.root, a))) {
        if (!fanout.test(b)) continue;
        for (const name of await readdirOrEmpty(path.join(this.root, a, b))) {
          if (isSha256(name) && name.startsWith(a + b)) yield name;
        }
      }
    }
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
    return path.join(this.root, sha256.slice(0, 2), sha256.slice(2, 4), sha256);
  }

  private ensureTmpDir(): Promise<void> {
    this.tmpReady ??= fsp.mkdir(this.tmpDir, { recursive: true }).then(
      () => undefined,
      (err) => {
        this.tmpReady = undefined;
        throw err;
      },
    );
    return this.tmpReady;
  }
}

async function fsyncDir(dir: string): Promise<void> {
  const fh = await fsp.open(dir, 'r');
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

async function isFile(p: string): Promise<boolean> {
  try {
    return (await fsp.stat(p)).isFile();
  } catch (err) {
    if (isNotFound(err)) return false;
    throw err;
  }
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
