import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminUserAndKey, serveEnv, startServe, type ServeProcess } from './serve-process.ts';
import { deterministicDigests, deterministicStream, getHashed, putStream } from './stream-http.ts';

// A 2 GiB file through the fs store's upload URL, saved, and downloaded through its download link,
// against `cubby serve` in its own process (SQLite), whose memory must stay flat: the body is
// streamed on both sides and never held. The bytes are generated, never stored by the test.

const TOTAL = 2 * 1024 * 1024 * 1024;
const SEED = 'cubby large upload test';
const MAX_GROWTH = 150 * 1024 * 1024;
const MB = 1024 * 1024;

describe('a 2 GiB upload and download through `cubby serve` (fs store, SQLite)', () => {
  let dir: string;
  let server: ServeProcess | undefined;
  let key: string;

  const api = async (method: string, url: string, body?: unknown) => {
    const res = await fetch(new URL(url, server!.base), {
      method,
      headers: { authorization: `Bearer ${key}`, accept: 'application/json', ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, text, body: text ? JSON.parse(text) : undefined };
  };

  /** Steps 1-3 of an upload plus the download link; the bytes come from `send`. */
  const uploadAndLink = async (mailboxId: string, name: string, blob: { byte_size: number; checksum: string; sha256: string }, send: (url: string, headers: Record<string, string>) => Promise<{ status: number; text: string }>) => {
    const du = await api('POST', '/v1/direct_uploads', { mailbox_id: mailboxId, path: name, blob: { filename: name, content_type: 'application/octet-stream', ...blob } });
    expect(du.status, du.text).toBe(201);
    const target = du.body.data.direct_upload;
    expect(target.url.startsWith(`${server!.base}/blobs/uploads/`)).toBe(true);
    const put = await send(target.url, target.headers);
    expect(put.status, put.text).toBe(200);
    const saved = await api('POST', `/v1/mailboxes/${mailboxId}/files`, { path: name, signed_blob_id: du.body.data.signed_id });
    expect(saved.status, saved.text).toBe(201);
    expect(saved.body.data.version.byte_size).toBe(blob.byte_size);
    const dl = await api('GET', `/v1/mailboxes/${mailboxId}/files/${saved.body.data.file.id}/download`);
    expect(dl.status, dl.text).toBe(200);
    return dl.body.data.download.url as string;
  };

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cubby-large-'));
    const env = serveEnv(path.join(dir, 'data'));
    key = (await adminUserAndKey(env, 'paid')).key;
    server = await startServe(env);
  }, 120_000);

  afterAll(async () => {
    await server?.stop();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('streams 2 GiB in and out with the right bytes; server RSS grows by less than 150 MB', async () => {
    const box = await api('POST', '/v1/mailboxes', { mailbox: { title: 'large' } });
    expect(box.status, box.text).toBe(201);
    const mailboxId = box.body.data.mailbox.id as string;

    // Warm up every route on the way (lazy imports, compiled schemas) with a small file.
    const small = Buffer.from('warm-up bytes');
    const smallBlob = { byte_size: small.length, checksum: createHash('md5').update(small).digest('base64'), sha256: createHash('sha256').update(small).digest('hex') };
    const smallLink = await uploadAndLink(mailboxId, 'warm.bin', smallBlob, (url, headers) => putStream(url, headers, Readable.from([small]), small.length));
    expect((await getHashed(smallLink)).sha256).toBe(smallBlob.sha256);

    const digests = deterministicDigests(TOTAL, SEED);
    server!.resetPeak();
    const baseline = server!.memory().rss;
    let peak = baseline;
    const sampler = setInterval(() => (peak = Math.max(peak, server!.memory().rss)), 100);
    try {
      const started = Date.now();
      const link = await uploadAndLink(mailboxId, 'big.bin', { byte_size: TOTAL, checksum: digests.md5Base64, sha256: digests.sha256 }, (url, headers) =>
        putStream(url, headers, deterministicStream(TOTAL, SEED), TOTAL),
      );
      const uploaded = Date.now();
      const got = await getHashed(link);
      const downloaded = Date.now();
      expect(got.status).toBe(200);
      expect(Number(got.headers['content-length'])).toBe(TOTAL);
      expect(got.bytes).toBe(TOTAL);
      expect(got.sha256).toBe(digests.sha256);

      const end = server!.memory();
      const growth = Math.max(peak, end.hwm) - baseline;
      console.log(
        `2 GiB: upload+save ${((uploaded - started) / 1000).toFixed(1)} s, download ${((downloaded - uploaded) / 1000).toFixed(1)} s; ` +
          `server RSS baseline ${(baseline / MB).toFixed(0)} MiB, peak ${(Math.max(peak, end.hwm) / MB).toFixed(0)} MiB, growth ${(growth / MB).toFixed(0)} MiB`,
      );
      expect(growth).toBeLessThan(MAX_GROWTH);
    } finally {
      clearInterval(sampler);
    }
  }, 300_000);
});
