import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, describe, expect, it } from 'vitest';
import { BlobMismatchError, FsBlobStore } from '../src/blobs/index.ts';
import { blobWriterStats, crashBlobWriters, terminateBlobWriters } from '../src/blobs/blob-writer.ts';
import { ConfigError, loadConfig } from '../src/config.ts';

// The fs store's writer threads (src/blobs/blob-writer.ts): which blobs they take, that what they
// write is what the event loop would write, that a refused blob leaves nothing, and that a lost
// thread fails no write. The contract suite (test/blob-store.test.ts) runs the whole store both ways.

const dirs: string[] = [];
function store(writerThreads?: number): { store: FsBlobStore; root: string; warnings: string[] } {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'cubby-writer-'));
  dirs.push(root);
  const warnings: string[] = [];
  return { store: new FsBlobStore(root, { writerThreads, log: { warn: (_obj, msg) => warnings.push(msg) } }), root, warnings };
}
afterAll(() => {
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const md5 = (b: Buffer) => createHash('md5').update(b).digest('base64');
const tmpFiles = (root: string) => fs.readdirSync(path.join(root, 'tmp'));
const placed = (root: string, sha: string) => path.join(root, sha.slice(0, 2), sha);
/** A body in several chunks, each a view into a larger buffer (as socket reads are). */
function chunked(bytes: Buffer): Readable {
  const big = Buffer.concat([randomBytes(1000), bytes, randomBytes(1000)]);
  const parts = [];
  for (let at = 0; at < bytes.length; at += 1500) parts.push(big.subarray(1000 + at, 1000 + Math.min(bytes.length, at + 1500)));
  return Readable.from(parts);
}

describe('fs blob store writer threads', () => {
  it('writes blobs of up to 64 KiB on a thread, the same file the event loop writes, and leaves no temp file', async () => {
    const threaded = store();
    const inline = store(0);
    for (const size of [0, 1, 5120, 64 * 1024]) {
      const bytes = randomBytes(size);
      const before = blobWriterStats().threaded;
      const a = await threaded.store.put(chunked(bytes), { byteSize: size, md5Base64: md5(bytes), sha256Hex: sha256(bytes).toUpperCase() });
      expect(blobWriterStats().threaded, `size ${size}`).toBe(before + 1);
      const b = await inline.store.putBuffer(bytes);
      expect(blobWriterStats().threaded).toBe(before + 1);
      expect(a).toEqual({ sha256: sha256(bytes), md5Base64: md5(bytes), byteSize: size });
      expect(b).toEqual(a);
      expect(fs.readFileSync(placed(threaded.root, a.sha256)).equals(bytes)).toBe(true);
      expect(fs.statSync(placed(threaded.root, a.sha256)).mode & 0o777).toBe(0o600);
      expect(Buffer.concat(await (await threaded.store.read(a.sha256)).toArray()).equals(bytes)).toBe(true);
    }
    expect(tmpFiles(threaded.root)).toEqual([]);
  });

  it('writes a blob of up to 1 MiB on a thread, streamed or not, and a larger one from the event loop', async () => {
    const { store: s, root } = store();
    for (const [size, onThread] of [[100 * 1024, true], [1024 * 1024 - 1, true], [1024 * 1024 + 1, false]] as const) {
      for (const how of ['buffer', 'stream'] as const) {
        const bytes = randomBytes(size);
        const before = blobWriterStats().threaded;
        const blob = how === 'buffer' ? await s.putBuffer(bytes) : await s.put(Readable.from([bytes.subarray(0, 1000), bytes.subarray(1000)]));
        expect(blobWriterStats().threaded - before, `${size} ${how}`).toBe(onThread ? 1 : 0);
        expect(blob.byteSize).toBe(size);
        expect(fs.readFileSync(placed(root, blob.sha256)).equals(bytes)).toBe(true);
      }
    }
    expect(tmpFiles(root)).toEqual([]);
  });

  it('refuses a blob whose size, MD5 or SHA-256 is not the one expected, and writes nothing', async () => {
    const { store: s, root } = store();
    const inline = store(0).store;
    const bytes = randomBytes(4096);
    const cases: [Parameters<FsBlobStore['put']>[1], string][] = [
      [{ md5Base64: md5(randomBytes(8)) }, 'checksum'],
      [{ sha256Hex: sha256(randomBytes(8)) }, 'sha256'],
      [{ byteSize: 4095 }, 'byte_size'],
      [{ byteSize: 4097 }, 'byte_size'],
    ];
    for (const [expectation, field] of cases) {
      const before = blobWriterStats().threaded;
      const err = await s.put(Readable.from([bytes]), expectation).catch((e: unknown) => e);
      expect(err, field).toBeInstanceOf(BlobMismatchError);
      expect((err as BlobMismatchError).which).toBe(field);
      // The very error a put from the event loop gives.
      const inlineErr = (await inline.put(Readable.from([bytes]), expectation).catch((e: unknown) => e)) as BlobMismatchError;
      expect({ ...(err as BlobMismatchError), message: (err as Error).message }).toEqual({ ...inlineErr, message: inlineErr.message });
      // Digests are checked on the thread; a wrong size never leaves the event loop.
      expect(blobWriterStats().threaded - before).toBe(field === 'byte_size' ? 0 : 1);
      expect(fs.existsSync(placed(root, sha256(bytes)))).toBe(false);
      expect(tmpFiles(root)).toEqual([]);
    }
  });

  it('stores one file when many puts of the same bytes race', async () => {
    const { store: s, root } = store();
    const bytes = randomBytes(3000);
    const blobs = await Promise.all(Array.from({ length: 40 }, () => s.putBuffer(bytes)));
    expect(new Set(blobs.map((b) => b.sha256))).toEqual(new Set([sha256(bytes)]));
    expect(fs.readdirSync(path.dirname(placed(root, sha256(bytes))))).toEqual([sha256(bytes)]);
    expect(fs.readFileSync(placed(root, sha256(bytes))).equals(bytes)).toBe(true);
    expect(tmpFiles(root)).toEqual([]);
  });

  it('fails no write when its threads crash mid-write: the event loop writes them, no thread starts for a while, and an orderly stop clears that', async () => {
    // Threads from earlier tests are ended first, so that this store's log hears of the loss.
    await terminateBlobWriters();
    const { store: s, root, warnings } = store();
    await s.putBuffer(randomBytes(10)); // threads started
    const before = blobWriterStats();
    const bodies = Array.from({ length: 30 }, () => randomBytes(2000));
    const writes = bodies.map((b) => s.putBuffer(b));
    // Each put reaches its thread after a few turns of the event loop (layout, stream, copy).
    while (blobWriterStats().inFlight === 0) await new Promise((r) => setImmediate(r));
    await crashBlobWriters();
    const blobs = await Promise.all(writes);
    for (const [i, b] of bodies.entries()) {
      expect(blobs[i]!.sha256).toBe(sha256(b));
      expect(fs.readFileSync(placed(root, blobs[i]!.sha256)).equals(b)).toBe(true);
    }
    expect(tmpFiles(root)).toEqual([]);
    const after = blobWriterStats();
    expect(after.lost - before.lost).toBeGreaterThan(0);
    expect(warnings.length).toBe(after.lost - before.lost);
    expect(warnings[0]).toMatch(/blob writer thread lost/);
    // Writes the lost threads held (and any sent after) were done on the event loop.
    expect(after.unavailable - before.unavailable).toBeGreaterThan(0);
    expect(after.threaded - before.threaded + after.unavailable - before.unavailable).toBe(30);
    // Within the restart delay no thread starts: the next write is done here too.
    const bytes = randomBytes(10);
    expect((await s.putBuffer(bytes)).sha256).toBe(sha256(bytes));
    expect(blobWriterStats().threaded).toBe(after.threaded);
    expect(blobWriterStats().unavailable).toBe(after.unavailable + 1);
    // An orderly stop forgets the loss: the next write starts a thread again.
    await terminateBlobWriters();
    await s.putBuffer(randomBytes(10));
    expect(blobWriterStats().threaded).toBe(after.threaded + 1);
  });

  it('passes on a failure of the disk as the put error, leaving nothing behind', async () => {
    const { store: s, root } = store();
    await s.putBuffer(randomBytes(10));
    // The blob's directory is a file now: the rename into it fails (ENOTDIR), on the thread.
    const bytes = randomBytes(100);
    const aa = path.join(root, sha256(bytes).slice(0, 2));
    fs.rmSync(aa, { recursive: true });
    fs.writeFileSync(aa, 'not a directory');
    const before = blobWriterStats();
    await expect(s.putBuffer(bytes)).rejects.toMatchObject({ code: 'ENOTDIR', syscall: 'rename' });
    // Failed on the thread (not written again on the event loop), and the thread lives on.
    const after = blobWriterStats();
    expect([after.failed - before.failed, after.unavailable - before.unavailable, after.lost - before.lost]).toEqual([1, 0, 0]);
    expect(tmpFiles(root)).toEqual([]);
  });

  it('CUBBY_BLOB_WRITER_THREADS takes 0 to 16', () => {
    const base = { CUBBY_DATA_DIR: fs.mkdtempSync(path.join(os.tmpdir(), 'cubby-writer-cfg-')) };
    dirs.push(base.CUBBY_DATA_DIR);
    expect(loadConfig(base).blobs).toMatchObject({ kind: 'fs', writerThreads: 2 });
    expect(loadConfig({ ...base, CUBBY_BLOB_WRITER_THREADS: '0' }).blobs).toMatchObject({ writerThreads: 0 });
    expect(loadConfig({ ...base, CUBBY_BLOB_WRITER_THREADS: '16' }).blobs).toMatchObject({ writerThreads: 16 });
    for (const bad of ['17', '-1', 'two', '1.5']) {
      expect(() => loadConfig({ ...base, CUBBY_BLOB_WRITER_THREADS: bad }), bad).toThrow(ConfigError);
    }
  });
});
