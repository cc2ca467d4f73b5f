import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { CreateBucketCommand } from '@aws-sdk/client-s3';
import S3rver from 's3rver';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { BlobMismatchError, BlobNotFoundError, type BlobStore } from '../src/blobs/index.ts';
import type { S3BlobStore } from '../src/blobs/s3-store.ts';
import { generated, storeFromSpec, type ProbeResult, type StoreSpec } from './blob-probe.ts';

// One contract, run against both stores: a local directory, and S3 as played by s3rver (in this
// process, on an ephemeral port). Each test gets a fresh store (a new directory or a new bucket).

interface Subject {
  store: BlobStore;
  /** How to open the same store in another process. */
  spec: StoreSpec;
  /** Files left in the store's local temp directory (must be none after any put settles). */
  leftovers(): string[];
  /** That temp directory. */
  tmp: string;
  close(): Promise<void>;
}

interface Backend {
  name: 'fs' | 's3';
  /** Told apart in the suite's name (the fs store with and without writer threads). */
  variant?: string;
  start(): Promise<void>;
  subject(): Promise<Subject>;
  stop(): Promise<void>;
}

const tempDirs: string[] = [];
function tempDir(prefix: string): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  tempDirs.push(dir);
  return dir;
}
const filesIn = (dir: string) => (fs.existsSync(dir) ? fs.readdirSync(dir) : []);

// The fs store writes small blobs on writer threads by default (src/blobs/blob-writer.ts); with 0
// threads it writes them from the event loop. Both ways keep the whole contract.
const fsBackendWith = (writerThreads: number | undefined): Backend => ({
  name: 'fs',
  variant: writerThreads === 0 ? ' without writer threads' : '',
  async start() {},
  async subject() {
    const root = tempDir('cubby-blobs-');
    const spec: StoreSpec = { kind: 'fs', root, writerThreads };
    return { store: storeFromSpec(spec), spec, leftovers: () => filesIn(path.join(root, 'tmp')), tmp: path.join(root, 'tmp'), close: async () => {} };
  },
  async stop() {},
});

let s3rver: S3rver | undefined;
let s3Endpoint = '';
let bucketCounter = 0;
const s3Backend: Backend = {
  name: 's3',
  async start() {
    s3rver = new S3rver({ address: '127.0.0.1', port: 0, directory: tempDir('cubby-s3rver-'), silent: true, vhostBuckets: false });
    const { port } = await s3rver.run();
    s3Endpoint = `http://127.0.0.1:${port}`;
  },
  async subject() {
    const spoolDir = tempDir('cubby-spool-');
    const bucket = `cubby-test-${++bucketCounter}`;
    const spec: StoreSpec = {
      kind: 's3',
      options: {
        bucket,
        region: 'us-east-1',
        endpoint: s3Endpoint,
        accessKeyId: 'S3RVER', // s3rver's built-in account
        secretAccessKey: 'S3RVER',
        forcePathStyle: true,
        spoolDir,
        partSize: 5 * 1024 * 1024, // the 50 MB test then goes up as a 10-part multipart upload
      },
    };
    const store = storeFromSpec(spec) as S3BlobStore;
    await store.client.send(new CreateBucketCommand({ Bucket: bucket }));
    return { store, spec, leftovers: () => filesIn(spoolDir), tmp: spoolDir, close: async () => store.close() };
  },
  async stop() {
    await s3rver?.close();
  },
};

afterAll(() => {
  for (const dir of tempDirs) fs.rmSync(dir, { recursive: true, force: true });
});

const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const md5 = (b: Buffer) => createHash('md5').update(b).digest('base64');

/** Splits a buffer into a stream of several chunks, like a socket would deliver it. */
const chunked = (b: Buffer, size = 1000) => Readable.from(Array.from({ length: Math.ceil(b.length / size) }, (_, i) => b.subarray(i * size, (i + 1) * size)));

async function collect(stream: Readable): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const part of stream) parts.push(part as Buffer);
  return Buffer.concat(parts);
}

const probeScript = fileURLToPath(new URL('./blob-probe.ts', import.meta.url));

/** Runs test/blob-probe.ts in a child process against the same store. */
async function runProbe(spec: StoreSpec, total: number): Promise<ProbeResult> {
  const child = spawn(process.execPath, ['--expose-gc', '--import', 'tsx', probeScript, JSON.stringify(spec), String(total)], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d));
  child.stderr.on('data', (d: Buffer) => (err += d));
  const [code] = await once(child, 'close');
  if (code !== 0) throw new Error(`blob probe exited with ${code}: ${err}`);
  return JSON.parse(out) as ProbeResult;
}

async function all(iter: AsyncIterable<string>): Promise<string[]> {
  const out: string[] = [];
  for await (const x of iter) out.push(x);
  return out.sort();
}

for (const backend of [fsBackendWith(undefined), fsBackendWith(0), s3Backend]) {
  describe(`blob store contract [${backend.name}${backend.variant ?? ''}]`, () => {
    let subject: Subject;
    let store: BlobStore;
    beforeAll(() => backend.start());
    afterAll(() => backend.stop());
    beforeEach(async () => {
      subject = await backend.subject();
      store = subject.store;
    });
    afterEach(async () => {
      expect(subject.leftovers()).toEqual([]);
      await subject.close();
    });

    it('stores a stream and reads it back, with its size and both checksums', async () => {
      const bytes = randomBytes(10_000);
      const blob = await store.put(chunked(bytes), { byteSize: bytes.length, md5Base64: md5(bytes), sha256Hex: sha256(bytes).toUpperCase() });
      expect(blob).toEqual({ sha256: sha256(bytes), md5Base64: md5(bytes), byteSize: 10_000 });
      expect(await collect(await store.read(blob.sha256))).toEqual(bytes);
      expect(await store.exists(blob.sha256)).toBe(true);
      expect(await store.size(blob.sha256)).toBe(10_000);
      expect(store.kind).toBe(backend.name);
    });

    it('stores buffers, including an empty one', async () => {
      const empty = await store.putBuffer(Buffer.alloc(0));
      expect(empty).toEqual({ sha256: sha256(Buffer.alloc(0)), md5Base64: md5(Buffer.alloc(0)), byteSize: 0 });
      expect(await collect(await store.read(empty.sha256))).toEqual(Buffer.alloc(0));
      const small = await store.putBuffer(Buffer.from('hello'));
      expect(await collect(await store.read(small.sha256))).toEqual(Buffer.from('hello'));
    });

    it('reads inclusive byte ranges, clamps the end and refuses unsatisfiable ones', async () => {
      const bytes = randomBytes(1000);
      const { sha256: id } = await store.putBuffer(bytes);
      // s3rver 3.7.1 reads `bytes=0-0` as `bytes=0-` (it tests the end for truthiness); real S3 and fs send one byte.
      if (backend.name !== 's3') expect(await collect(await store.read(id, { start: 0, end: 0 }))).toEqual(bytes.subarray(0, 1));
      expect(await collect(await store.read(id, { start: 1, end: 1 }))).toEqual(bytes.subarray(1, 2));
      expect(await collect(await store.read(id, { start: 10, end: 19 }))).toEqual(bytes.subarray(10, 20));
      expect(await collect(await store.read(id, { start: 990, end: 5000 }))).toEqual(bytes.subarray(990));
      await expect(store.read(id, { start: 1000, end: 1001 })).rejects.toBeInstanceOf(RangeError);
      await expect(store.read(id, { start: 5, end: 4 })).rejects.toBeInstanceOf(RangeError);
    });

    it('refuses a wrong size, MD5 or SHA-256 and stores nothing', async () => {
      const bytes = randomBytes(5000);
      const cases: [Parameters<BlobStore['put']>[1], string][] = [
        [{ byteSize: 5001 }, 'byte_size'],
        [{ byteSize: 4999 }, 'byte_size'],
        [{ md5Base64: md5(Buffer.from('other')) }, 'checksum'],
        [{ sha256Hex: sha256(Buffer.from('other')) }, 'sha256'],
      ];
      for (const [expectation, which] of cases) {
        const err = await store.put(chunked(bytes), expectation).catch((e: unknown) => e);
        expect(err).toBeInstanceOf(BlobMismatchError);
        expect(err).toMatchObject({ which, tooLarge: false });
      }
      expect(await store.exists(sha256(bytes))).toBe(false);
      expect(await all(store.list())).toEqual([]);
    });

    it('stops reading as soon as maxBytes or the expected size is exceeded, and leaves the stream to the caller', async () => {
      for (const expectation of [{ maxBytes: 200_000 }, { byteSize: 200_000 }]) {
        const body = generated(50 * 1024 * 1024);
        const err = await store.put(body.stream, expectation).catch((e: unknown) => e);
        expect(err).toBeInstanceOf(BlobMismatchError);
        expect(err).toMatchObject({ which: 'byte_size', expected: 200_000, tooLarge: 'maxBytes' in expectation });
        expect(body.produced()).toBeLessThan(1024 * 1024);
        expect(body.stream.destroyed).toBe(false);
        body.stream.destroy();
      }
      expect(await all(store.list())).toEqual([]);
    });

    it('accepts a body of unknown length within maxBytes', async () => {
      const bytes = randomBytes(3000);
      const blob = await store.put(chunked(bytes), { maxBytes: 3000 });
      expect(blob.byteSize).toBe(3000);
    });

    it('is idempotent for identical content, also when the puts run concurrently', async () => {
      const bytes = randomBytes(300_000);
      const first = await store.put(chunked(bytes, 16_384), { byteSize: bytes.length });
      expect(await store.put(chunked(bytes, 16_384), { sha256Hex: first.sha256 })).toEqual(first);
      const other = randomBytes(200_000);
      const results = await Promise.all(Array.from({ length: 8 }, () => store.put(chunked(other, 16_384))));
      for (const r of results) expect(r).toEqual(results[0]);
      expect(await all(store.list())).toEqual([first.sha256, results[0].sha256].sort());
      expect(await collect(await store.read(results[0].sha256))).toEqual(other);
    });

    it('deletes, and deleting a missing blob is fine', async () => {
      const { sha256: id } = await store.putBuffer(Buffer.from('to be deleted'));
      await store.delete(id);
      expect(await store.exists(id)).toBe(false);
      expect(await store.size(id)).toBeNull();
      await expect(store.read(id)).rejects.toBeInstanceOf(BlobNotFoundError);
      await store.delete(id);
    });

    it('lists every stored blob', async () => {
      const ids = await Promise.all(['a', 'b', 'c'].map(async (s) => (await store.putBuffer(Buffer.from(s))).sha256));
      expect(await all(store.list())).toEqual(ids.sort());
    });

    it('sweeps temp files of interrupted writes older than the cut-off, and only those', async () => {
      fs.mkdirSync(subject.tmp, { recursive: true });
      const old = path.join(subject.tmp, 'crashed.part');
      const fresh = path.join(subject.tmp, 'writing.part');
      const other = path.join(subject.tmp, 'not-ours.txt');
      for (const f of [old, fresh, other]) fs.writeFileSync(f, 'x');
      const hourAgo = new Date(Date.now() - 3600_000);
      fs.utimesSync(old, hourAgo, hourAgo);
      fs.utimesSync(other, hourAgo, hourAgo);
      expect(await store.sweepTemp(new Date(Date.now() - 60_000))).toBe(1);
      expect(filesIn(subject.tmp).sort()).toEqual(['not-ours.txt', 'writing.part']);
      for (const f of [fresh, other]) fs.rmSync(f);
    });

    it('deletes a blob only when it was last written before the cut-off (fs), never on S3', async () => {
      const { sha256: oldId } = await store.putBuffer(Buffer.from('crash leftover'));
      const { sha256: newId } = await store.putBuffer(Buffer.from('just written'));
      const cutoff = new Date(Date.now() - 60_000);
      if (backend.name === 'fs') {
        const file = path.join((subject.spec as { root: string }).root, oldId.slice(0, 2), oldId);
        const hourAgo = new Date(Date.now() - 3600_000);
        fs.utimesSync(file, hourAgo, hourAgo);
        expect(await store.deleteIfWrittenBefore(oldId, cutoff)).toBe(true);
        expect(await store.exists(oldId)).toBe(false);
        // Written again (a put of the same bytes): new, so kept.
        await store.putBuffer(Buffer.from('crash leftover'));
        expect(await store.deleteIfWrittenBefore(oldId, cutoff)).toBe(false);
        expect(await store.exists(oldId)).toBe(true);
      } else {
        expect(await store.deleteIfWrittenBefore(oldId, new Date(Date.now() + 3600_000))).toBe(false);
        expect(await store.exists(oldId)).toBe(true);
      }
      expect(await store.deleteIfWrittenBefore(newId, cutoff)).toBe(false);
      expect(await store.exists(newId)).toBe(true);
      expect(subject.leftovers()).toEqual([]);
    });

    it('answers for missing blobs and refuses malformed addresses', async () => {
      const missing = sha256(Buffer.from('never stored'));
      expect(await store.exists(missing)).toBe(false);
      expect(await store.size(missing)).toBeNull();
      const err = await store.read(missing).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(BlobNotFoundError);
      expect(err).toMatchObject({ sha256: missing });
      await expect(store.read('../../etc/passwd')).rejects.toBeInstanceOf(TypeError);
      await expect(store.exists(missing.toUpperCase())).rejects.toBeInstanceOf(TypeError);
    });

    it('streams 50 MB through put and read with flat memory (in a fresh process, where RSS means something)', async () => {
      const total = 50 * 1024 * 1024;
      const r = await runProbe(subject.spec, total);
      expect(r.put).toEqual({ sha256: r.generatedSha256, md5Base64: expect.any(String), byteSize: total });
      expect(r.readBytes).toBe(total);
      expect(r.readSha256).toBe(r.generatedSha256);
      expect(await store.size(r.put.sha256)).toBe(total);
      // Loose: holding the whole body would add 50 MB; S3 holds up to 4 parts of 5 MiB and one filling.
      console.log(`RSS growth [${backend.name}]: ${(r.rssGrowth / 1048576).toFixed(1)} MB`);
      expect(r.rssGrowth).toBeLessThan(40 * 1024 * 1024);
    }, 120_000);

    if (backend.name === 'fs') {
      it('has no direct upload or download URLs (our own endpoints serve the bytes)', async () => {
        const bytes = Buffer.from('x');
        const expectation = { byteSize: 1, md5Base64: md5(bytes), sha256Hex: sha256(bytes) };
        expect(await store.directUploadTarget('up1', { ...expectation, contentType: 'text/plain' }, 600)).toBeNull();
        expect(await store.adoptDirectUpload('up1', expectation)).toBeNull();
        const { sha256: id } = await store.putBuffer(bytes);
        expect(await store.downloadUrl(id, { filename: 'x.txt', contentType: 'text/plain', expiresInSeconds: 60 })).toBeNull();
      });
    }

    if (backend.name === 's3') {
      const upload = (target: { url: string; headers: Record<string, string> }, body: Buffer) =>
        fetch(target.url, { method: 'PUT', headers: target.headers, body: new Uint8Array(body) });

      it('adopts a direct upload made with exactly the returned headers', async () => {
        const bytes = randomBytes(20_000);
        const expectation = { byteSize: bytes.length, md5Base64: md5(bytes), sha256Hex: sha256(bytes) };
        const target = (await store.directUploadTarget('up_1', { ...expectation, contentType: 'image/png' }, 600))!;
        expect(Object.keys(target.headers).sort()).toEqual(['Content-MD5', 'Content-Type', 'x-amz-checksum-sha256']);
        const query = new URL(target.url).searchParams;
        expect(query.get('X-Amz-SignedHeaders')).toBe('content-md5;content-type;host;x-amz-checksum-sha256');
        expect(query.get('X-Amz-Expires')).toBe('600');
        expect(await store.adoptDirectUpload('up_1', expectation)).toBeNull();
        const res = await upload(target, bytes);
        expect(res.status).toBe(200);
        expect(await store.adoptDirectUpload('up_1', expectation)).toEqual({ sha256: expectation.sha256Hex, md5Base64: expectation.md5Base64, byteSize: bytes.length });
        expect(await collect(await store.read(expectation.sha256Hex))).toEqual(bytes);
        expect(await all(store.list())).toEqual([expectation.sha256Hex]);
        // The staging object is gone: adopting again finds nothing.
        expect(await store.adoptDirectUpload('up_1', expectation)).toBeNull();
      });

      it('refuses wrong bytes at the PUT (S3) or at adopt (s3rver does not check), then lets the client retry', async () => {
        const bytes = randomBytes(20_000);
        const expectation = { byteSize: bytes.length, md5Base64: md5(bytes), sha256Hex: sha256(bytes) };
        const target = (await store.directUploadTarget('up_2', { ...expectation, contentType: 'application/pdf' }, 600))!;
        for (const [wrong, which] of [[randomBytes(20_000), 'checksum'], [bytes.subarray(1), 'byte_size']] as const) {
          const res = await upload(target, wrong);
          if (res.ok) await expect(store.adoptDirectUpload('up_2', expectation)).rejects.toMatchObject({ name: 'BlobMismatchError', which });
          else expect(res.status).toBe(400);
          expect(await store.adoptDirectUpload('up_2', expectation)).toBeNull();
        }
        expect(await all(store.list())).toEqual([]);
        expect((await upload(target, bytes)).status).toBe(200);
        expect((await store.adoptDirectUpload('up_2', expectation))?.sha256).toBe(expectation.sha256Hex);
      });

      it('presigns a download URL that serves the bytes as a named attachment', async () => {
        const bytes = Buffer.from('%PDF-1.4 not really');
        const { sha256: id } = await store.putBuffer(bytes);
        const url = (await store.downloadUrl(id, { filename: 'Résumé "final".pdf', contentType: 'application/pdf', expiresInSeconds: 60 }))!;
        const res = await fetch(url);
        expect(res.status).toBe(200);
        expect(res.headers.get('content-type')).toBe('application/pdf');
        expect(res.headers.get('content-disposition')).toBe(`attachment; filename="R_sum_ _final_.pdf"; filename*=UTF-8''R%C3%A9sum%C3%A9%20%22final%22.pdf`);
        expect(Buffer.from(await res.arrayBuffer())).toEqual(bytes);
      });
    }
  });
}
