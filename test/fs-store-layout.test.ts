import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { FsBlobStore } from '../src/blobs/index.ts';

// The fs store's layout: new blobs at <aa>/<sha256>; blobs written in the earlier two-level layout
// (<aa>/<bb>/<sha256>) are still found, read, listed and deleted.

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'cubby-fs-layout-'));
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

async function all<T>(iter: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of iter) out.push(x);
  return out;
}

async function text(stream: NodeJS.ReadableStream): Promise<string> {
  let s = '';
  for await (const part of stream) s += part.toString();
  return s;
}

describe('fs blob store layout', () => {
  it('stores new blobs one level deep, with all 256 first-level directories made up front', async () => {
    const store = new FsBlobStore(path.join(root, 'new'));
    const bytes = Buffer.from('one level');
    const put = await store.putBuffer(bytes);
    expect(fs.readFileSync(path.join(store.root, put.sha256.slice(0, 2), put.sha256)).equals(bytes)).toBe(true);
    expect(fs.readdirSync(store.root).filter((d) => /^[0-9a-f]{2}$/.test(d))).toHaveLength(256);
    expect(fs.readdirSync(path.join(store.root, 'tmp'))).toEqual([]);
  });

  it('finds, reads, lists and deletes blobs of the earlier <aa>/<bb>/<sha256> layout', async () => {
    const store = new FsBlobStore(path.join(root, 'legacy'));
    const old = Buffer.from('written by an earlier version');
    const oldSha = sha(old);
    fs.mkdirSync(path.join(store.root, oldSha.slice(0, 2), oldSha.slice(2, 4)), { recursive: true });
    fs.writeFileSync(path.join(store.root, oldSha.slice(0, 2), oldSha.slice(2, 4), oldSha), old);
    const fresh = await store.putBuffer(Buffer.from('written now'));

    expect(await store.size(oldSha)).toBe(old.length);
    expect(await text(await store.read(oldSha, { start: 8, end: 9 }))).toBe('by');
    expect((await all(store.list())).sort()).toEqual([oldSha, fresh.sha256].sort());
    // The same content put again lands in the new place; it is listed once.
    await store.putBuffer(old);
    expect((await all(store.list())).filter((x) => x === oldSha)).toHaveLength(1);
    await store.delete(oldSha);
    expect(await store.exists(oldSha)).toBe(false);
    expect(await store.exists(fresh.sha256)).toBe(true);
  });
});
