import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { describeEachDatabase, type TestApp } from './harness.ts';
import { labelNow } from './smtp-helpers.ts';
import { emailsPath, fetchLink, inbox, receive } from './emails-helpers.ts';
import { fsStoreRoot } from './blob-helpers.ts';
import { describeBytes, newMailbox, uploadFile } from './files-helpers.ts';
import { collectGarbageBlobs, purgeDeletedMailboxes } from '../src/files/purge.service.ts';
import { ConfigError, loadConfig } from '../src/config.ts';

// Received mail's small blobs are kept in their `blobs` rows (src/blobs/inline-blobs.ts): written
// by the commit that records the message, read through the app's BlobStore like any other blob,
// and removed with their row. The limit is 4 KiB here, so that one message has blobs on both sides.

const LIMIT = 4096;
const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

async function blobRow(app: TestApp, sha: string) {
  return app.started.deps.db.selectFrom('blobs').select(['sha256', 'byte_size', 'md5', 'inline_bytes']).where('sha256', '=', sha).executeTakeFirst();
}

function inStore(app: TestApp, sha: string): boolean {
  return fs.existsSync(path.join(fsStoreRoot(app.started.deps.blobs), sha.slice(0, 2), sha));
}

async function emailFiles(app: TestApp, emailId: string) {
  const email = await app.started.deps.db.selectFrom('emails').select(['raw_sha256', 'directory', 'mailbox_id']).where('id', '=', emailId).executeTakeFirstOrThrow();
  const versions = await app.started.deps.db
    .selectFrom('file_versions')
    .select(['path', 'sha256', 'byte_size'])
    .where('mailbox_id', '=', email.mailbox_id)
    .where('path', 'like', `${email.directory!}/%`)
    .execute();
  return new Map(versions.map((v) => [v.path.slice(email.directory!.length + 1), { sha256: v.sha256!, size: Number(v.byte_size) }]));
}

describeEachDatabase(
  'blobs kept in their database rows',
  (app) => {
    it('keeps a small message, its message.json and a small attachment in their rows, and serves them whole and by range', async () => {
      const u = await app().user();
      const box = await inbox(app(), u);
      const attachment = randomBytes(2000); // base64 in a message of under 4 KiB
      const id = await receive(app(), box, { subject: 'small', text: 'short', attachments: [{ filename: 'small.bin', content: attachment, contentType: 'application/octet-stream' }] });
      const files = await emailFiles(app(), id);
      expect([...files.keys()].sort()).toEqual(['attachments/small.bin', 'message.eml', 'message.json']);
      for (const [name, f] of files) {
        const row = await blobRow(app(), f.sha256);
        expect(row?.inline_bytes, name).toBeInstanceOf(Buffer);
        expect(sha256(row!.inline_bytes!), name).toBe(f.sha256);
        expect(row!.inline_bytes!.byteLength, name).toBe(f.size);
        expect(Number(row!.byte_size), name).toBe(f.size);
        // Received mail's own blobs carry no MD5: nothing reads it (src/blobs/digest.ts addressOf).
        expect(row!.md5, name).toBe('');
        expect(inStore(app(), f.sha256), `${name} is not written to the store as well`).toBe(false);
      }
      expect(await blobRow(app(), sha256(attachment))).toBeDefined();

      // Read as any blob is: the store interface, the download links, a range.
      const blobs = app().started.deps.blobs;
      const att = files.get('attachments/small.bin')!;
      expect(await blobs.exists(att.sha256)).toBe(true);
      expect(await blobs.size(att.sha256)).toBe(2000);
      await labelNow(app());
      const detail = (await app().request('GET', emailsPath(box, id), { key: u.key })).body.data.email;
      const link = (await app().request('GET', emailsPath(box, id, 'attachments', detail.attachments[0].id), { key: u.key })).body.data.download;
      expect((await fetchLink(link.url)).bytes.equals(attachment)).toBe(true);
      const part = await fetchLink(link.url, { range: 'bytes=1990-5000' });
      expect(part.status).toBe(206);
      expect(part.headers.get('content-range')).toBe('bytes 1990-1999/2000');
      expect(part.bytes.equals(attachment.subarray(1990))).toBe(true);
      expect((await fetchLink(link.url, { range: 'bytes=2000-2001' })).status).toBe(416);
      const raw = (await app().request('GET', emailsPath(box, id, 'raw'), { key: u.key })).body.data.download;
      const rawBytes = (await fetchLink(raw.url)).bytes;
      expect(sha256(rawBytes)).toBe(files.get('message.eml')!.sha256);
    });

    it('writes blobs past the limit to the store, and keeps the rest of the same message in rows', async () => {
      const u = await app().user();
      const box = await inbox(app(), u);
      const big = randomBytes(LIMIT + 1);
      const id = await receive(app(), box, { subject: 'mixed', text: 'a large attachment', attachments: [{ filename: 'big.bin', content: big, contentType: 'application/octet-stream' }] });
      const files = await emailFiles(app(), id);
      for (const name of ['message.eml', 'attachments/big.bin']) {
        const f = files.get(name)!;
        expect((await blobRow(app(), f.sha256))?.inline_bytes ?? null, name).toBeNull();
        expect(inStore(app(), f.sha256), name).toBe(true);
      }
      const json = files.get('message.json')!;
      expect(json.size).toBeLessThanOrEqual(LIMIT);
      expect((await blobRow(app(), json.sha256))?.inline_bytes).toBeInstanceOf(Buffer);
      expect(inStore(app(), json.sha256)).toBe(false);
    });

    it('keeps one row for bytes received twice, and removes kept bytes with their row when nothing uses them', async () => {
      const u = await app().user();
      const doomed = await inbox(app(), u);
      const keeper = await inbox(app(), u);
      const shared = randomBytes(1000);
      const only = randomBytes(1200);
      await receive(app(), doomed, { subject: 'doomed', attachments: [{ filename: 'shared.bin', content: shared }, { filename: 'only.bin', content: only }] });
      await receive(app(), keeper, { subject: 'kept', attachments: [{ filename: 'shared.bin', content: shared }] });
      const db = app().started.deps.db;
      expect((await db.selectFrom('blobs').select('sha256').where('sha256', '=', sha256(shared)).execute()).length).toBe(1);

      await app().request('POST', `/v1/mailboxes/${doomed.id}/archive`, { key: u.key, body: {} });
      expect((await app().request('DELETE', `/v1/mailboxes/${doomed.id}`, { key: u.key, body: { confirmation: `DELETE ${doomed.id}` } })).status).toBe(200);
      await purgeDeletedMailboxes(db);
      await collectGarbageBlobs(db, app().started.deps.blobs, new Date(Date.now() + 3 * 86_400_000));
      expect(await blobRow(app(), sha256(only))).toBeUndefined();
      expect(await app().started.deps.blobs.exists(sha256(only))).toBe(false);
      expect((await blobRow(app(), sha256(shared)))?.inline_bytes?.equals(shared)).toBe(true);
    });

    it('keeps a small upload in its row, checks its bytes as the store does, and writes a larger one to the store', async () => {
      const u = await app().user();
      const m = await newMailbox(app(), u.key);
      const small = randomBytes(1000);
      const saved = await uploadFile(app(), u.key, m.id, 'docs/small.bin', small);
      expect(saved.status, saved.text).toBe(201);
      const smallRow = await blobRow(app(), sha256(small));
      expect(smallRow?.inline_bytes?.equals(small)).toBe(true);
      // An upload's row keeps the checksum its client declared and Cubby checked.
      expect(smallRow?.md5).toBe(createHash('md5').update(small).digest('base64'));
      expect(inStore(app(), sha256(small))).toBe(false);
      const link = await app().request('GET', `/v1/mailboxes/${m.id}/files/${saved.body.data.file.id}/download`, { key: u.key });
      expect((await fetchLink(link.body.data.download.url)).bytes.equals(small)).toBe(true);

      const large = randomBytes(LIMIT + 1);
      expect((await uploadFile(app(), u.key, m.id, 'docs/large.bin', large)).status).toBe(201);
      expect((await blobRow(app(), sha256(large)))?.inline_bytes ?? null).toBeNull();
      expect(inStore(app(), sha256(large))).toBe(true);

      // Longer than declared, sent chunked (no Content-Length to refuse first): reading stops, nothing is kept.
      const declared = randomBytes(500);
      const step1 = await app().request('POST', '/v1/direct_uploads', { key: u.key, body: { mailbox_id: m.id, path: 'docs/long.bin', blob: describeBytes(declared, 'long.bin') } });
      const { url, headers } = step1.body.data.direct_upload as { url: string; headers: Record<string, string> };
      const unsized = Object.fromEntries(Object.entries(headers).filter(([k]) => k.toLowerCase() !== 'content-length'));
      const chunked = new ReadableStream({
        start(c) {
          c.enqueue(new Uint8Array(declared));
          c.enqueue(new Uint8Array(randomBytes(100)));
          c.close();
        },
      });
      const long = await fetch(url, { method: 'PUT', headers: unsized, body: chunked, duplex: 'half' } as RequestInit);
      expect(long.status).toBe(422);
      expect(await long.json()).toMatchObject({ error: { code: 'UPLOAD_CHECKSUM_MISMATCH', details: { which: 'byte_size' } } });
      const short = await fetch(url, { method: 'PUT', headers: unsized, body: new ReadableStream({ start: (c) => (c.enqueue(new Uint8Array(declared.subarray(0, 400))), c.close()) }), duplex: 'half' } as RequestInit);
      expect(short.status).toBe(422);
      expect(await blobRow(app(), sha256(declared))).toBeUndefined();
      // The right bytes afterwards are taken.
      expect((await fetch(url, { method: 'PUT', headers, body: new Uint8Array(declared) })).status).toBe(200);
      expect((await blobRow(app(), sha256(declared)))?.inline_bytes?.equals(declared)).toBe(true);
    });
  },
  { CUBBY_BLOB_INLINE_MAX_BYTES: String(LIMIT) },
);

describe('CUBBY_BLOB_INLINE_MAX_BYTES', () => {
  const dirs: string[] = [];
  afterAll(() => {
    for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
  });

  it('takes 0 to 1 MiB, 128 KiB by default, and refuses anything else', () => {
    const base = { CUBBY_DATA_DIR: fs.mkdtempSync(path.join(os.tmpdir(), 'cubby-inline-cfg-')) };
    dirs.push(base.CUBBY_DATA_DIR);
    expect(loadConfig(base).blobs.inlineMaxBytes).toBe(131072);
    expect(loadConfig({ ...base, CUBBY_BLOB_INLINE_MAX_BYTES: '0' }).blobs.inlineMaxBytes).toBe(0);
    expect(loadConfig({ ...base, CUBBY_BLOB_INLINE_MAX_BYTES: '1048576' }).blobs.inlineMaxBytes).toBe(1048576);
    for (const bad of ['1048577', '-1', '64k', '1.5', '99999999']) {
      expect(() => loadConfig({ ...base, CUBBY_BLOB_INLINE_MAX_BYTES: bad }), bad).toThrow(/CUBBY_BLOB_INLINE_MAX_BYTES/);
      expect(() => loadConfig({ ...base, CUBBY_BLOB_INLINE_MAX_BYTES: bad }), bad).toThrow(ConfigError);
    }
  });
});
