import { expect, it } from 'vitest';
import { describeEachDatabase, type TestApp } from './harness.ts';
import { describeWithS3, isS3 } from './s3-harness.ts';
import { describeBytes, newMailbox, uploadFile } from './files-helpers.ts';
import { collectGarbageBlobs, purgeDeletedMailboxes } from '../src/files/purge.service.ts';
import { createHash } from 'node:crypto';

function filesSuite(app: () => TestApp) {
  it('uploads, saves, versions, skips identical content, and keeps mailbox counts exact', async () => {
    const u = await app().user();
    const m = await newMailbox(app(), u.key);
    const first = await uploadFile(app(), u.key, m.id, 'notes/todo.txt', 'hello');
    expect(first.status, first.text).toBe(201);
    expect(first.body.data).toMatchObject({ created: true, skipped: false, duplicate: false });
    const f = first.body.data.file;
    expect(f).toMatchObject({ path: 'notes/todo.txt', basename: 'todo.txt', mailbox_id: m.id, deleted: false, read: false, role: 'source' });
    expect(f.id).toMatch(/^df_[A-Za-z0-9]+$/);
    expect(f.current_file_version).toMatchObject({ version_number: 1, byte_size: 5, mime_type: 'text/plain', deleted: false, ready: true, has_text: true });
    expect(f.created_by).toMatchObject({ id: u.userId, email: u.email });

    const again = await app().request('POST', '/v1/direct_uploads', { key: u.key, body: { mailbox_id: m.id, path: 'notes/todo.txt', blob: describeBytes(Buffer.from('hello'), 'todo.txt') } });
    expect(again.status).toBe(200);
    expect(again.body.data).toMatchObject({ skipped: true, duplicate: true, details: { code: 'DUPLICATE_FILE_VERSION' } });

    const second = await uploadFile(app(), u.key, m.id, 'notes/todo.txt', 'hello world');
    expect(second.status).toBe(200);
    expect(second.body.data.file.id).toBe(f.id);
    expect(second.body.data.version.version_number).toBe(2);

    const mb = await app().request('GET', `/v1/mailboxes/${m.id}`, { key: u.key });
    expect(mb.body.data.mailbox).toMatchObject({ files_count: 1, storage_bytes: 11, version_number: 2 });
    const versions = await app().request('GET', `/v1/mailboxes/${m.id}/files/${f.id}/versions`, { key: u.key });
    expect(versions.body.data.versions.map((v: any) => v.version_number)).toEqual([2, 1]);

    const dl = await app().request('GET', `/v1/mailboxes/${m.id}/files/${f.id}/download`, { key: u.key });
    expect(dl.body.data.download).toMatchObject({ filename: 'todo.txt', content_type: 'text/plain', size_bytes: 11, authentication: 'none', expires_in: 900 });
    const bytes = await fetch(dl.body.data.download.url);
    expect(await bytes.text()).toBe('hello world');
    expect(bytes.headers.get('content-disposition')).toContain('attachment');
    // The link is the credential: a page opened from it must not receive it as a Referer (our own
    // download endpoint; S3's presigned GET cannot set this header).
    if (app().env.CUBBY_BLOB_STORE !== 's3') expect(bytes.headers.get('referrer-policy')).toBe('no-referrer');
    const range = await fetch(dl.body.data.download.url, { headers: { range: 'bytes=6-' } });
    expect(range.status).toBe(206);
    expect(await range.text()).toBe('world');
    const etag = bytes.headers.get('etag')!;
    expect((await fetch(dl.body.data.download.url, { headers: { 'if-none-match': etag } })).status).toBe(304);

    const restored = await app().request('POST', `/v1/mailboxes/${m.id}/files/${f.id}/versions/${first.body.data.version.id}/restore`, { key: u.key, body: {} });
    expect(restored.status, restored.text).toBe(200);
    expect(restored.body.data.version).toMatchObject({ version_number: 3, byte_size: 5 });
  });

  it('refuses _email/, traversal and unicode tricks in paths, and forbidden file types', async () => {
    const u = await app().user();
    const m = await newMailbox(app(), u.key);
    const blob = describeBytes(Buffer.from('x'), 'x.txt');
    const cases: [string, number, string][] = [
      ['_email/2026/x.txt', 403, 'EMAIL_PATH_READ_ONLY'],
      ['_EMAIL/x.txt', 403, 'EMAIL_PATH_READ_ONLY'],
      ['a/../b.txt', 422, 'INVALID_ARGUMENT'],
      ['../b.txt', 422, 'INVALID_ARGUMENT'],
      ['a//b.txt', 422, 'INVALID_ARGUMENT'],
      ['a/b/', 422, 'INVALID_ARGUMENT'],
      ['a\\b.txt', 422, 'INVALID_ARGUMENT'],
      ['evil\u202etxt.exe', 422, 'INVALID_ARGUMENT'],
      ['nul\u0000.txt', 422, 'INVALID_ARGUMENT'],
      ['zero\u200bwidth.txt', 422, 'INVALID_ARGUMENT'],
      ['setup.exe', 422, 'FILE_TYPE_FORBIDDEN'],
      ['keys/server.pem', 422, 'FILE_TYPE_FORBIDDEN'],
      ['.env', 422, 'FILE_TYPE_FORBIDDEN'],
      ['a'.repeat(1100), 422, 'INVALID_ARGUMENT'],
    ];
    for (const [path, status, code] of cases) {
      const res = await app().request('POST', '/v1/direct_uploads', { key: u.key, body: { mailbox_id: m.id, path, blob } });
      expect(res.status, JSON.stringify(path)).toBe(status);
      expect(res.body.error.code, JSON.stringify(path)).toBe(code);
    }
    const list = await app().request('GET', `/v1/mailboxes/${m.id}/files`, { key: u.key });
    expect(list.body.data.files).toEqual([]);
  });

  it('the upload URL checks headers, size and checksums, and cannot be reused', async (t) => {
    if (isS3(app())) t.skip(); // the bytes go to S3; see the S3 test below
    const u = await app().user();
    const m = await newMailbox(app(), u.key);
    const bytes = Buffer.from('exact bytes');
    const step1 = await app().request('POST', '/v1/direct_uploads', { key: u.key, body: { mailbox_id: m.id, path: 'a.txt', blob: describeBytes(bytes, 'a.txt') } });
    const { url, headers } = step1.body.data.direct_upload;
    const wrongBody = await fetch(url, { method: 'PUT', headers, body: new Uint8Array(Buffer.from('other bytes')) });
    expect(wrongBody.status).toBe(422);
    expect((await wrongBody.json()).error.code).toBe('UPLOAD_CHECKSUM_MISMATCH');
    const noMd5 = await fetch(url, { method: 'PUT', headers: { 'Content-Type': headers['Content-Type'] }, body: new Uint8Array(bytes) });
    expect(noMd5.status).toBe(422);
    const early = await app().request('POST', `/v1/mailboxes/${m.id}/files`, { key: u.key, body: { path: 'a.txt', signed_blob_id: step1.body.data.signed_id } });
    expect(early.status).toBe(409);
    expect(early.body.error).toMatchObject({ code: 'DIRECT_UPLOAD_NOT_FOUND', details: { path: 'a.txt' } });
    const ok = await fetch(url, { method: 'PUT', headers, body: new Uint8Array(bytes) });
    expect(ok.status).toBe(200);
    const reuse = await fetch(url, { method: 'PUT', headers, body: new Uint8Array(bytes) });
    expect(reuse.status).toBe(403);
    const forged = await fetch(url.replace(/.$/, (c: string) => (c === 'A' ? 'B' : 'A')), { method: 'PUT', headers, body: new Uint8Array(bytes) });
    expect(forged.status).toBe(403);
    const badSigned = await app().request('POST', `/v1/mailboxes/${m.id}/files`, { key: u.key, body: { path: 'a.txt', signed_blob_id: `${step1.body.data.signed_id}x` } });
    expect(badSigned.status).toBe(422);
    const save = await app().request('POST', `/v1/mailboxes/${m.id}/files`, { key: u.key, body: { path: 'a.txt', signed_blob_id: step1.body.data.signed_id } });
    expect(save.status).toBe(201);
  });

  it('S3: the upload target is a presigned PUT with signed checksums; wrong bytes are refused at save and can be uploaded again', async (t) => {
    if (!isS3(app())) t.skip();
    const u = await app().user();
    const m = await newMailbox(app(), u.key);
    const bytes = Buffer.from('exact bytes for S3');
    const decl = describeBytes(bytes, 'a.txt');
    const step1 = await app().request('POST', '/v1/direct_uploads', { key: u.key, body: { mailbox_id: m.id, path: 'a.txt', blob: decl } });
    expect(step1.status, step1.text).toBe(201);
    const { url, headers } = step1.body.data.direct_upload;
    expect(url.startsWith(app().env.CUBBY_S3_ENDPOINT!)).toBe(true);
    expect(new URL(url).searchParams.get('X-Amz-SignedHeaders')).toBe('content-md5;content-type;host;x-amz-checksum-sha256');
    expect(headers).toEqual({ 'Content-Type': 'text/plain', 'Content-MD5': decl.checksum, 'x-amz-checksum-sha256': Buffer.from(decl.sha256, 'hex').toString('base64') });
    const early = await app().request('POST', `/v1/mailboxes/${m.id}/files`, { key: u.key, body: { path: 'a.txt', signed_blob_id: step1.body.data.signed_id } });
    expect(early.body.error).toMatchObject({ code: 'DIRECT_UPLOAD_NOT_FOUND', details: { path: 'a.txt' } });

    // Real S3 refuses these bytes at the PUT (BadDigest); s3rver keeps them, and the save catches them.
    const wrong = await fetch(url, { method: 'PUT', headers, body: new Uint8Array(Buffer.from('other bytes, same size')) });
    if (wrong.status === 200) {
      const refused = await app().request('POST', `/v1/mailboxes/${m.id}/files`, { key: u.key, body: { path: 'a.txt', signed_blob_id: step1.body.data.signed_id } });
      expect(refused.status, refused.text).toBe(422);
      expect(refused.body.error).toMatchObject({ code: 'UPLOAD_CHECKSUM_MISMATCH', details: { path: 'a.txt', which: 'byte_size' } });
    } else expect(wrong.status).toBe(400);
    expect((await app().request('GET', `/v1/mailboxes/${m.id}/files`, { key: u.key })).body.data.files).toEqual([]);

    const ok = await fetch(url, { method: 'PUT', headers, body: new Uint8Array(bytes) });
    expect(ok.status).toBe(200);
    const save = await app().request('POST', `/v1/mailboxes/${m.id}/files`, { key: u.key, body: { path: 'a.txt', signed_blob_id: step1.body.data.signed_id } });
    expect(save.status, save.text).toBe(201);
    expect(await app().started.deps.blobs.exists(decl.sha256)).toBe(true);
    const row = await app().started.deps.db.selectFrom('direct_uploads').select('status').where('mailbox_id', '=', m.id).executeTakeFirstOrThrow();
    expect(row.status).toBe('consumed');

    const dl = await app().request('GET', `/v1/mailboxes/${m.id}/files/${save.body.data.file.id}/download`, { key: u.key });
    const link = dl.body.data.download.url as string;
    expect(link.startsWith(app().env.CUBBY_S3_ENDPOINT!)).toBe(true);
    const got = await fetch(link);
    expect(got.status).toBe(200);
    expect(Buffer.from(await got.arrayBuffer()).equals(bytes)).toBe(true);
    expect(got.headers.get('content-type')).toBe('text/plain');
    expect(got.headers.get('content-disposition')).toContain('attachment');
  });

  it('expected_mailbox_version: a stale version saves nothing; concurrent saves to one path make one file', async () => {
    const u = await app().user();
    const m = await newMailbox(app(), u.key);
    const a = await uploadFile(app(), u.key, m.id, 'x.txt', 'one');
    const v1 = (await app().request('GET', `/v1/mailboxes/${m.id}`, { key: u.key })).body.data.mailbox.version_id;
    expect(v1).toMatch(/^bktrv_/);
    await uploadFile(app(), u.key, m.id, 'y.txt', 'two');
    const stale = await uploadFile(app(), u.key, m.id, 'z.txt', 'three', { expected_mailbox_version: v1 });
    expect(stale.status).toBe(409);
    expect(stale.body.error.code).toBe('MAILBOX_VERSION_CONFLICT');
    const list = await app().request('GET', `/v1/mailboxes/${m.id}/files`, { key: u.key });
    expect(list.body.data.files.map((f: any) => f.path)).toEqual(['x.txt', 'y.txt']);
    const results = await Promise.all(['p', 'q', 'r'].map((c) => uploadFile(app(), u.key, m.id, 'same.txt', c)));
    expect(results.filter((r) => r.status === 201)).toHaveLength(1);
    const same = await app().request('GET', `/v1/mailboxes/${m.id}/files`, { key: u.key, query: { q: 'same' } });
    expect(same.body.data.files).toHaveLength(1);
    expect(same.body.data.files[0].current_file_version.version_number).toBe(3);
    expect(a.body.data.file.path).toBe('x.txt');
  });

  it('lists by folder and q with a cursor, reads by path, appends text, renames, moves, copies, deletes', async () => {
    const u = await app().user();
    const m = await newMailbox(app(), u.key);
    for (const p of ['docs/a.md', 'docs/b.md', 'docs/deep/c.md', 'top.txt']) {
      const saved = await uploadFile(app(), u.key, m.id, p, `content of ${p}`);
      expect(saved.status, saved.text).toBe(201);
    }
    const docs = await app().request('GET', `/v1/mailboxes/${m.id}/files`, { key: u.key, query: { folder: 'docs', limit: 1 } });
    expect(docs.body.data.files.map((f: any) => f.path)).toEqual(['docs/a.md']);
    const next = await app().request('GET', `/v1/mailboxes/${m.id}/files`, { key: u.key, query: { folder: 'docs', limit: 1, cursor: docs.body.data.pagination.next_cursor } });
    expect(next.body.data.files.map((f: any) => f.path)).toEqual(['docs/b.md']);
    const root = await app().request('GET', `/v1/mailboxes/${m.id}/files`, { key: u.key, query: { folder: '' } });
    const dump = JSON.stringify(await app().started.deps.db.selectFrom('files').select(['path', 'folder', 'live_path', 'deleted_at']).where('mailbox_id', '=', m.id).execute());
    expect(root.body.data.files.map((f: any) => f.path), `${app().kind} ${dump}`).toEqual(['top.txt']);
    const bad = await app().request('GET', `/v1/mailboxes/${m.id}/files/by_path`, { key: u.key, query: { path: 'top.txt', disposition: 'inline' } });
    expect(bad.status).toBe(422);
    expect(bad.body.error.details.field).toBe('disposition');
    const byPath = await app().request('GET', `/v1/mailboxes/${m.id}/files/by_path`, { key: u.key, query: { path: 'top.txt' } });
    expect(byPath.body.data.file.path).toBe('top.txt');
    const fileId = byPath.body.data.file.id;

    const app1 = await app().request('POST', `/v1/mailboxes/${m.id}/files/append_text`, { key: u.key, body: { path: 'top.txt', content: 'more', newline_before: true } });
    expect(app1.status, app1.text).toBe(200);
    expect(app1.body.data).toMatchObject({ appended: true, appended_bytes: 5, newline_inserted: true, path: 'top.txt' });
    const missing = await app().request('POST', `/v1/mailboxes/${m.id}/files/append_text`, { key: u.key, body: { path: 'nope.txt', content: 'x' } });
    expect(missing.body.error.code).toBe('MAILBOX_FILE_NOT_FOUND');

    const renamed = await app().request('POST', `/v1/mailboxes/${m.id}/files/${fileId}/rename`, { key: u.key, body: { name: 'renamed.txt' } });
    expect(renamed.status, renamed.text).toBe(200);
    expect(renamed.body.data.file).toMatchObject({ id: fileId, path: 'renamed.txt' });
    const moved = await app().request('POST', `/v1/mailboxes/${m.id}/files/${fileId}/move`, { key: u.key, body: { path: 'archive/renamed.txt' } });
    expect(moved.body.data.file).toMatchObject({ id: fileId, path: 'archive/renamed.txt' });
    const copy = await app().request('POST', `/v1/mailboxes/${m.id}/files/${fileId}/copy`, { key: u.key, body: { path: 'copy.txt' } });
    expect(copy.status).toBe(201);
    expect(copy.body.data.file.id).not.toBe(fileId);
    const clash = await app().request('POST', `/v1/mailboxes/${m.id}/files/${fileId}/copy`, { key: u.key, body: { path: 'copy.txt' } });
    expect(clash.body.error.code).toBe('FILE_PATH_TAKEN');

    const del = await app().request('DELETE', `/v1/mailboxes/${m.id}/files/${fileId}`, { key: u.key });
    expect(del.status, del.text).toBe(200);
    expect(del.body.data).toMatchObject({ deleted: true, id: fileId, version: { deleted: true } });
    expect((await app().request('GET', `/v1/mailboxes/${m.id}/files/${fileId}`, { key: u.key })).status).toBe(404);
    const mb = (await app().request('GET', `/v1/mailboxes/${m.id}`, { key: u.key })).body.data.mailbox;
    const left = (await app().request('GET', `/v1/mailboxes/${m.id}/files`, { key: u.key })).body.data.files;
    expect(mb.files_count).toBe(left.length);
    expect(mb.storage_bytes).toBe(left.reduce((n: number, f: any) => n + f.current_file_version.byte_size, 0));
  });

  it('permissions: read keys cannot write, write keys cannot delete, foreign mailboxes are missing', async () => {
    const u = await app().user();
    const other = await app().user();
    const m = await newMailbox(app(), u.key);
    const saved = await uploadFile(app(), u.key, m.id, 'f.txt', 'x');
    const fileId = saved.body.data.file.id;
    const reader = await app().key(u, { scope: 'mailbox_read' });
    const writer = await app().key(u, { scope: 'mailbox_write' });
    const r1 = await app().request('POST', '/v1/direct_uploads', { key: reader, body: { mailbox_id: m.id, path: 'g.txt', blob: describeBytes(Buffer.from('y'), 'g.txt') } });
    expect(r1.status).toBe(403);
    const d = await app().request('DELETE', `/v1/mailboxes/${m.id}/files/${fileId}`, { key: writer });
    expect(d.status).toBe(403);
    const f = await app().request('GET', `/v1/mailboxes/${m.id}/files/${fileId}`, { key: other.key });
    expect(f.status).toBe(404);
    const read = await app().request('GET', `/v1/mailboxes/${m.id}/files/${fileId}`, { key: reader });
    expect(read.body.data.file.read).toBe(false);
    const mark = await app().request('PATCH', `/v1/mailboxes/${m.id}/files/${fileId}`, { key: reader, body: { read: true } });
    expect(mark.body.data.file).toMatchObject({ read: true, read_by: { id: u.userId } });
    await app().request('POST', `/v1/mailboxes/${m.id}/archive`, { key: u.key, body: {} });
    const archived = await app().request('POST', '/v1/direct_uploads', { key: u.key, body: { mailbox_id: m.id, path: 'h.txt', blob: describeBytes(Buffer.from('z'), 'h.txt') } });
    expect(archived.status).toBe(409);
    expect(archived.body.error.code).toBe('MAILBOX_ARCHIVED');
  });

  it('surface A: direct upload by bucket_id, save, and by_path serves the bytes', async () => {
    const u = await app().user();
    const b = (await app().request('POST', '/api/v1/buckets', { key: u.key, body: { bucket: { title: 'Site' } } })).body.data.bucket;
    const bytes = Buffer.from('<h1>hi</h1>');
    const du = await app().request('POST', '/api/v1/direct_uploads', { key: u.key, body: { bucket_id: b.id, path: 'index.html', blob: { ...describeBytes(bytes, 'index.html', 'text/html'), purpose: 'bucket_file' } } });
    expect(du.status, du.text).toBe(201);
    await fetch(du.body.data.direct_upload.url, { method: 'PUT', headers: du.body.data.direct_upload.headers, body: new Uint8Array(bytes) });
    const save = await app().request('POST', `/api/v1/buckets/${b.id}/files`, { key: u.key, body: { path: 'index.html', signed_blob_id: du.body.data.signed_id } });
    expect(save.status).toBe(201);
    const res = await fetch(`${app().base}/api/v1/buckets/${b.id}/files/by_path?path=index.html`, { headers: { authorization: `Bearer ${u.key}` } });
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('<h1>hi</h1>');
    expect(res.headers.get('content-type')).toContain('text/html');
    const missing = await app().request('GET', `/api/v1/buckets/${b.id}/files/by_path`, { key: u.key, query: { path: 'nope.html' } });
    expect(missing.status).toBe(404);
    expect(missing.body.error.code).toBe('MAILBOX_FILE_NOT_FOUND');
  });

  it('deleting a mailbox purges its files in the background; blobs still in use elsewhere are kept', async () => {
    const u = await app().user();
    const doomed = await newMailbox(app(), u.key);
    const keeper = await newMailbox(app(), u.key);
    await uploadFile(app(), u.key, doomed.id, 'shared.txt', 'shared bytes');
    await uploadFile(app(), u.key, doomed.id, 'only.txt', 'only in the doomed mailbox');
    await uploadFile(app(), u.key, keeper.id, 'shared.txt', 'shared bytes');
    await app().request('POST', `/v1/mailboxes/${doomed.id}/archive`, { key: u.key, body: {} });
    const del = await app().request('DELETE', `/v1/mailboxes/${doomed.id}`, { key: u.key, body: { confirmation: `DELETE ${doomed.id}` } });
    expect(del.status).toBe(200);
    const db = app().started.deps.db;
    const blobs = app().started.deps.blobs;
    await purgeDeletedMailboxes(db);
    const left = await db.selectFrom('files').select('id').where('mailbox_id', '=', doomed.id).execute();
    expect(left).toEqual([]);
    const sha = (t: string) => createHash('sha256').update(t).digest('hex');
    await collectGarbageBlobs(db, blobs, new Date(Date.now() + 3 * 86_400_000));
    expect(await blobs.exists(sha('only in the doomed mailbox'))).toBe(false);
    expect(await blobs.exists(sha('shared bytes'))).toBe(true);
    const kept = await app().request('GET', `/v1/mailboxes/${keeper.id}/files/by_path`, { key: u.key, query: { path: 'shared.txt' } });
    expect(kept.status).toBe(200);
  });

  it('the blob collector looks through the blobs a page at a time and stops at its maximum', async () => {
    const { db, blobs } = app().started.deps;
    const later = new Date(Date.now() + 3 * 86_400_000);
    await collectGarbageBlobs(db, blobs, later, 100_000); // what earlier tests left: the orphans below are then the only ones
    const u = await app().user();
    const doomed = await newMailbox(app(), u.key);
    const keeper = await newMailbox(app(), u.key);
    const texts = Array.from({ length: 7 }, (_, i) => `paged orphan ${i} ${Math.random()}`);
    for (const [i, t] of texts.entries()) await uploadFile(app(), u.key, doomed.id, `o${i}.txt`, t);
    const keptText = `paged keeper ${Math.random()}`;
    await uploadFile(app(), u.key, keeper.id, 'k.txt', keptText);
    await app().request('POST', `/v1/mailboxes/${doomed.id}/archive`, { key: u.key, body: {} });
    expect((await app().request('DELETE', `/v1/mailboxes/${doomed.id}`, { key: u.key, body: { confirmation: `DELETE ${doomed.id}` } })).status).toBe(200);
    await purgeDeletedMailboxes(db);
    const sha = (t: string) => createHash('sha256').update(t).digest('hex');
    const left = async () => (await Promise.all(texts.map((t) => blobs.exists(sha(t))))).filter(Boolean).length;
    // Pages of two blobs: the orphans are spread over many pages among the other tests' blobs.
    expect(await collectGarbageBlobs(db, blobs, later, 3, 2)).toBe(3);
    expect(await left()).toBe(4);
    await collectGarbageBlobs(db, blobs, later, 100_000, 2);
    expect(await left()).toBe(0);
    expect(await db.selectFrom('blobs').select('sha256').where('sha256', 'in', texts.map(sha)).execute()).toEqual([]);
    expect(await blobs.exists(sha(keptText))).toBe(true);
  });
}

describeEachDatabase('files (surface R)', filesSuite);
describeWithS3('files (surface R)', filesSuite, { withPostgres: true });
