import { createHash } from 'node:crypto';
import fsp, { type FileHandle } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import { BlobMismatchError, type PutExpectation, type StoredBlob } from './blob-store.ts';

// The write path both stores share: stream the body into a new local file while counting and
// hashing it, stop early when it is too long, check the expectation, and fsync if asked. The file
// is removed on every failure, so a rejected put() leaves nothing behind.

export async function spoolToFile(body: Readable, expect: PutExpectation, filePath: string, opts: { fsync: boolean }): Promise<StoredBlob> {
  const fh = await fsp.open(filePath, 'wx', 0o600);
  let kept = false;
  try {
    const md5 = createHash('md5');
    const sha = createHash('sha256');
    let size = 0;
    // destroyOnReturn: false — on an early stop the caller decides what happens to the stream.
    for await (const chunk of body.iterator({ destroyOnReturn: false })) {
      const buf: Buffer = typeof chunk === 'string' ? Buffer.from(chunk) : Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as Uint8Array);
      size += buf.length;
      if (expect.maxBytes !== undefined && size > expect.maxBytes) throw new BlobMismatchError('byte_size', expect.maxBytes, size, true);
      if (expect.byteSize !== undefined && size > expect.byteSize) throw new BlobMismatchError('byte_size', expect.byteSize, size);
      md5.update(buf);
      sha.update(buf);
      await writeAll(fh, buf);
    }
    const blob: StoredBlob = { sha256: sha.digest('hex'), md5Base64: md5.digest('base64'), byteSize: size };
    checkExpectation(expect, blob);
    if (opts.fsync) await fh.sync();
    kept = true;
    return blob;
  } finally {
    await fh.close();
    if (!kept) await fsp.rm(filePath, { force: true });
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
  const md5 = createHash('md5');
  const sha = createHash('sha256');
  let size = 0;
  for await (const chunk of body) {
    const buf: Buffer = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk);
    size += buf.length;
    md5.update(buf);
    sha.update(buf);
  }
  return { sha256: sha.digest('hex'), md5Base64: md5.digest('base64'), byteSize: size };
}

async function writeAll(fh: FileHandle, buf: Buffer): Promise<void> {
  let offset = 0;
  while (offset < buf.length) {
    const { bytesWritten } = await fh.write(buf, offset, buf.length - offset);
    offset += bytesWritten;
  }
}
