import fs from 'node:fs';
import fsp from 'node:fs/promises';
import type { Readable } from 'node:stream';
import { promisify } from 'node:util';
import { BlobMismatchError, type PutExpectation, type StoredBlob } from './blob-store.ts';
import { LargeFileSink } from './file-sink.ts';
import { BlobDigest, digestBlob } from './digest.ts';

// The write path both stores share: stream the body into a new local file while counting and
// hashing it, stop early when it is too long, check the expectation, and fdatasync if asked. The file
// is removed on every failure, so a rejected put() leaves nothing behind.

/** Bytes gathered before the first write: a body that ends sooner is written in one go. */
const WRITE_BATCH = 1024 * 1024;

export interface SpoolOptions {
  fsync: boolean;
  /**
   * Writes a body of up to one batch another way (the fs store's writer threads), hashing it and
   * checking `expect` itself; null: not taken, written here as usual.
   */
  writeSmall?: (chunks: Buffer[], size: number) => Promise<StoredBlob | null>;
}

/**
 * Streams `body` into a new file at `filePath` (which must not exist), counting and hashing it.
 * A body of up to one batch (most files) is hashed in memory and then written with one O_DSYNC
 * write (with fsync), three thread-pool calls in all; a larger one goes through LargeFileSink.
 */
export async function spoolToFile(body: Readable, expect: PutExpectation, filePath: string, opts: SpoolOptions): Promise<StoredBlob> {
  let sink: LargeFileSink | undefined;
  let kept = false;
  try {
    let size = 0;
    let batch: Buffer[] = [];
    let batched = 0;
    for await (const buf of checkedChunks(body, expect)) {
      size += buf.length;
      batch.push(buf);
      batched += buf.length;
      if (batched >= WRITE_BATCH) {
        sink ??= await LargeFileSink.open(filePath, opts.fsync);
        await sink.add(batch, batched);
        batch = [];
        batched = 0;
      }
    }
    if (!sink) {
      const written = opts.writeSmall && (await opts.writeSmall(batch, size));
      if (written) return written;
      const blob = digestBlob(batch);
      checkExpectation(expect, blob);
      await writeSmallFile(filePath, batch, opts.fsync);
      return blob;
    }
    if (batched) await sink.add(batch, batched);
    const blob: StoredBlob = { ...(await sink.finish()), byteSize: size };
    checkExpectation(expect, blob);
    if (opts.fsync) await sink.sync();
    kept = true;
    return blob;
  } finally {
    await sink?.close(kept);
  }
}

/**
 * A new file with these bytes; with `dsync` the write returns once they are on disk (O_DSYNC, as
 * fdatasync). Plain fds rather than FileHandles: this runs once per small file, and FileHandle's
 * bookkeeping costs the event loop more than the calls themselves.
 */
async function writeSmallFile(filePath: string, chunks: Buffer[], dsync: boolean): Promise<void> {
  const { O_WRONLY, O_CREAT, O_EXCL, O_DSYNC } = fs.constants;
  const fd = await fdOpen(filePath, O_WRONLY | O_CREAT | O_EXCL | (dsync ? O_DSYNC : 0), 0o600);
  let ok = false;
  try {
    let rest = chunks.filter((c) => c.length > 0);
    // An empty file has no write for O_DSYNC to apply to: its inode is synced explicitly.
    if (dsync && rest.length === 0) await fdDatasync(fd);
    while (rest.length) {
      let written = (await fdWritev(fd, rest)).bytesWritten;
      while (rest.length && written >= rest[0]!.length) written -= rest.shift()!.length;
      if (written > 0) rest[0] = rest[0]!.subarray(written);
    }
    ok = true;
  } finally {
    await fdClose(fd);
    if (!ok) await fsp.rm(filePath, { force: true });
  }
}

const fdOpen = promisify(fs.open);
const fdWritev = promisify(fs.writev);
const fdClose = promisify(fs.close);
const fdDatasync = promisify(fs.fdatasync);

/**
 * The body's chunks as Buffers, stopping with BlobMismatchError as soon as they pass `maxBytes`
 * (too large) or `byteSize` (not the declared size). The stream is left as it is on an early stop
 * (destroyOnReturn: false): the caller decides whether to drain or destroy it.
 */
export async function* checkedChunks(body: Readable, expect: PutExpectation): AsyncGenerator<Buffer> {
  let size = 0;
  for await (const chunk of body.iterator({ destroyOnReturn: false })) {
    const buf: Buffer = typeof chunk === 'string' ? Buffer.from(chunk) : Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as Uint8Array);
    size += buf.length;
    if (expect.maxBytes !== undefined && size > expect.maxBytes) throw new BlobMismatchError('byte_size', expect.maxBytes, size, true);
    if (expect.byteSize !== undefined && size > expect.byteSize) throw new BlobMismatchError('byte_size', expect.byteSize, size);
    yield buf;
  }
}

/** Throws BlobMismatchError for the first given expectation the blob fails: size, then MD5, then SHA-256. */
export function checkExpectation(expect: PutExpectation, blob: StoredBlob): void {
  if (expect.byteSize !== undefined && blob.byteSize !== expect.byteSize) throw new BlobMismatchError('byte_size', expect.byteSize, blob.byteSize);
  if (expect.md5Base64 !== undefined && blob.md5Base64 !== expect.md5Base64) throw new BlobMismatchError('checksum', expect.md5Base64, blob.md5Base64);
  if (expect.sha256Hex !== undefined && blob.sha256 !== expect.sha256Hex.toLowerCase()) throw new BlobMismatchError('sha256', expect.sha256Hex, blob.sha256);
}

/** Hashes a stream without storing it (to verify bytes another party wrote). */
export async function hashStream(body: Readable): Promise<StoredBlob> {
  const digest = new BlobDigest();
  for await (const chunk of body) digest.update(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk));
  return digest.finish();
}
