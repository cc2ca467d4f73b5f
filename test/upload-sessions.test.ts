import { expect, it as test } from 'vitest';
import { describeEachDatabase, type TestApp } from './harness.ts';
import { describeWithS3, isS3 } from './s3-harness.ts';
import { dbOf, expectError } from './factories.ts';
import { newMailbox, uploadFile } from './files-helpers.ts';
import { descriptor, filePaths, inParallel, insertEmailFile, mailboxOf, putBytes, sessionsOf, versionRows } from './upload-sessions-helpers.ts';
import { expireUploadSessions } from '../src/uploads/upload-sessions.lifecycle.ts';

// The tests of a suite run side by side: each has its own user and mailbox, and most of their time
// is spent waiting on fsyncs (every saved blob and row is synced), not on the CPU.
const it = test.concurrent;

function sessionsSuite(app: () => TestApp) {
  it('the CLI flow on surface A: batches of 12, exact headers, finalize_batch, finalize until done; one mailbox version', async () => {
    const u = await app().user();
    const created = await app().request('POST', '/api/v1/buckets', { key: u.key, body: { bucket: { title: 'Site' } } });
    const bucket = created.body.data.bucket;
    await uploadFile(app(), u.key, bucket.id, 'old.txt', 'kept, not pruned');
    const before = await mailboxOf(app(), u.key, bucket.id);
    const versionsBefore = (await versionRows(app(), bucket.id)).length;
    const s = sessionsOf(app(), 'A', u.key, bucket.id);
    const contents = Array.from({ length: 30 }, (_, i) => [`site/page-${String(i).padStart(2, '0')}.html`, `<p>page ${i}</p>`] as const);

    const start = await s.create({ client_session_key: 'deploy-1', expected_file_count: contents.length, delete_missing: false });
    expect(start.status, start.text).toBe(201);
    const { session, id } = s.data(start);
    expect(id).toBe(session.id);
    expect(session.id).toMatch(/^bus_[A-Za-z0-9]+$/);
    expect(session).toMatchObject({ mailbox_id: bucket.id, status: 'pending', base_mailbox_version_id: before.version_id, target_mailbox_version_id: null, files_count: 0, session_closed_at: null });
    const replay = await s.create({ client_session_key: 'deploy-1', expected_file_count: contents.length, delete_missing: false });
    expect(replay.status).toBe(200);
    expect(s.data(replay).session.id).toBe(session.id);
    const locked = await mailboxOf(app(), u.key, bucket.id);
    expect(locked.lock).toMatchObject({ locked: true, kind: 'upload_session', progress: { session_id: session.id, expected_file_count: 30 } });

    for (let i = 0; i < contents.length; i += 12) {
      const batch = contents.slice(i, i + 12);
      const res = await s.uploads(session.id, batch.map(([p, c]) => descriptor(p, c, { name: p.split('/').pop() })));
      expect(res.status, res.text).toBe(201);
      const uploads = res.body.data.uploads;
      expect(uploads.map((x: any) => x.input_index)).toEqual(batch.map((_, j) => j));
      for (const x of uploads) {
        expect(x.signed_blob_id).toBeTruthy();
        await putBytes(x.upload, batch[x.input_index]![1]);
      }
      const fb = await s.batch(session.id, 12);
      expect(fb.status, fb.text).toBe(200);
      expect(fb.body.data).toMatchObject({ uploaded_count: batch.length, created_count: batch.length, updated_count: 0, uploaded_truncated: false });
      expect(fb.body.data.uploaded[0]).toMatchObject({ input_index: 0, path: batch[0]![0], created: true, file: { path: batch[0]![0] }, version: { version_number: 1 } });
    }
    // Saved files are visible (counts exact) before the session closes; the version is not recorded yet.
    const mid = await mailboxOf(app(), u.key, bucket.id);
    expect(mid).toMatchObject({ files_count: 31, version_number: before.version_number });

    let fin;
    for (let n = 0; n < 10; n++) {
      fin = await s.finalize(session.id, true);
      expect([200, 202]).toContain(fin.status);
      if (!fin.body.data.finalize_pending) break;
    }
    expect(fin!.status, fin!.text).toBe(200);
    const done = s.data(fin!).session;
    expect(done).toMatchObject({ status: 'finalized', files_count: 30, finalized_files_count: 30, pending_files_count: 0, uploaded_files_count: 0, skipped_files_count: 0, failed_files_count: 0 });
    expect(done.session_closed_at).toBeTruthy();
    const after = await mailboxOf(app(), u.key, bucket.id);
    const bytes = contents.reduce((n, [, c]) => n + Buffer.byteLength(c), 0) + 'kept, not pruned'.length;
    expect(after).toMatchObject({ files_count: 31, storage_bytes: bytes, version_number: before.version_number + 1, version_id: done.target_mailbox_version_id, lock: { locked: false } });
    const versions = await versionRows(app(), bucket.id);
    expect(versions).toHaveLength(versionsBefore + 1);
    expect(versions.at(-1)).toMatchObject({ id: done.target_mailbox_version_id, files_changed: 30, action: 'upload_session.finalize' });
    const fv = await dbOf(app()).selectFrom('file_versions').select('mailbox_version_id').where('mailbox_id', '=', bucket.id).where('path', 'like', 'site/%').execute();
    expect(new Set(fv.map((v) => v.mailbox_version_id))).toEqual(new Set([done.target_mailbox_version_id]));
    const page = await fetch(`${app().base}/api/v1/buckets/${bucket.id}/files/by_path?path=site/page-07.html`, { headers: { authorization: `Bearer ${u.key}` } });
    expect(await page.text()).toBe('<p>page 7</p>');
    // A new session with the same key after the first is finalized is a new session.
    const next = await s.create({ client_session_key: 'deploy-1' });
    expect(next.status).toBe(201);
    expect(s.data(next).session.id).not.toBe(session.id);
  });

  it('a repeated path gets a fresh target that supersedes the earlier one; identical content is skipped; _email/ is refused', async () => {
    const u = await app().user();
    const m = await newMailbox(app(), u.key);
    await uploadFile(app(), u.key, m.id, 'same.txt', 'unchanged');
    const s = sessionsOf(app(), 'R', u.key, m.id);
    const start = await s.create({ expected_file_count: 2 });
    expect(start.status, start.text).toBe(201);
    expect(start.body.success).toBe(true);
    const id = start.body.data.mailbox_upload_session.id;

    const first = await s.uploads(id, [descriptor('a.txt', 'first')]);
    const second = await s.uploads(id, [descriptor('same.txt', 'unchanged'), descriptor('a.txt', 'second'), descriptor('b.txt', 'x'), descriptor('b.txt', 'y')]);
    expect(second.status, second.text).toBe(201);
    const d = second.body.data;
    expect(d.uploads.map((x: any) => [x.input_index, x.path])).toEqual([[1, 'a.txt'], [3, 'b.txt']]);
    expect(d.uploads[0].upload.url).not.toBe(first.body.data.uploads[0].upload.url);
    expect(d.skipped).toEqual([{ path: 'same.txt', name: 'same.txt', reason: 'duplicate', code: 'DUPLICATE_FILE_VERSION', input_index: 0, details: expect.any(Object) }]);
    expect(d.mailbox_upload_session).toMatchObject({ files_count: 3, pending_files_count: 2, skipped_files_count: 1, skipped_code_counts: { DUPLICATE_FILE_VERSION: 1 } });

    const email = await s.uploads(id, [descriptor('ok.txt', 'fine'), descriptor('_email/x.txt', 'no')]);
    const err = expectError(email, 'R', 403, 'EMAIL_PATH_READ_ONLY');
    expect(err.details.field).toBe('files[1].path');
    await putBytes(d.uploads[0].upload, 'second');
    await putBytes(d.uploads[1].upload, 'y');
    const fin = await s.finalize(id);
    expect(fin.status, fin.text).toBe(200);
    expect(fin.body.data.mailbox_upload_session).toMatchObject({ status: 'finalized', files_count: 3, finalized_files_count: 2, skipped_files_count: 1 });
    expect(await filePaths(app(), u.key, m.id)).toEqual(['a.txt', 'b.txt', 'same.txt']);
    const a = await app().request('GET', `/v1/mailboxes/${m.id}/files/by_path`, { key: u.key, query: { path: 'a.txt' } });
    expect(a.body.data.file.current_file_version).toMatchObject({ version_number: 1, byte_size: 6 });
  });

  it('finalize_batch with missing bytes: 409 DIRECT_UPLOAD_NOT_FOUND naming the path, nothing saved; PUT and retry succeeds', async () => {
    const u = await app().user();
    const m = await newMailbox(app(), u.key);
    const s = sessionsOf(app(), 'R', u.key, m.id);
    const id = (await s.create()).body.data.mailbox_upload_session.id;
    const res = await s.uploads(id, [descriptor('one.txt', '1'), descriptor('two.txt', '2')]);
    await putBytes(res.body.data.uploads[0].upload, '1');
    const missing = await s.batch(id, 12);
    const err = expectError(missing, 'R', 409, 'DIRECT_UPLOAD_NOT_FOUND');
    expect(err.details.path).toBe('two.txt');
    expect(await filePaths(app(), u.key, m.id)).toEqual([]);
    await putBytes(res.body.data.uploads[1].upload, '2');
    const retry = await s.batch(id, 12);
    expect(retry.status, retry.text).toBe(200);
    expect(retry.body.data.uploaded.map((x: any) => x.path)).toEqual(['one.txt', 'two.txt']);
    expect(retry.body.data.remaining_files_count).toBe(0);
    expect(await filePaths(app(), u.key, m.id)).toEqual(['one.txt', 'two.txt']);
  });

  it('finalize_batch saves new files and new versions of live files in one call; a plan limit reached mid-batch saves nothing and names the path', async () => {
    const u = await app().user();
    const m = await newMailbox(app(), u.key);
    await uploadFile(app(), u.key, m.id, 'old.txt', 'v1');
    await uploadFile(app(), u.key, m.id, 'keep.txt', 'same');
    await uploadFile(app(), u.key, m.id, 'full.txt', 'f1');
    const s = sessionsOf(app(), 'R', u.key, m.id);
    const id = (await s.create()).body.data.mailbox_upload_session.id;
    const files: [string, string][] = [['new1.txt', 'n1'], ['old.txt', 'v2 longer'], ['new2.txt', 'n2']];
    const declared = await s.uploads(id, [...files.map(([p, c]) => descriptor(p, c)), descriptor('keep.txt', 'same')]);
    expect(declared.body.data.skipped.map((x: any) => x.path)).toEqual(['keep.txt']);
    for (const [i, [, c]] of files.entries()) await putBytes(declared.body.data.uploads[i].upload, c);
    const saved = await s.batch(id, 12);
    expect(saved.status, saved.text).toBe(200);
    expect(saved.body.data.uploaded.map((x: any) => [x.path, x.created, x.version.version_number])).toEqual([['new1.txt', true, 1], ['old.txt', false, 2], ['new2.txt', true, 1]]);
    const old = await app().request('GET', `/v1/mailboxes/${m.id}/files/by_path`, { key: u.key, query: { path: 'old.txt' } });
    expect(old.body.data.file.current_file_version).toMatchObject({ version_number: 2, byte_size: 9 });
    // Counts move with each file: two new ones, and old.txt grew from 2 to 9 bytes.
    expect(await mailboxOf(app(), u.key, m.id)).toMatchObject({ files_count: 5, storage_bytes: 9 + 4 + 2 + 2 + 2 });

    // full.txt at the plan's version cap: the batch around it fails and writes nothing.
    const cap = (await dbOf(app()).selectFrom('accounts').select('plan').where('id', '=', m.account_id).executeTakeFirstOrThrow()).plan;
    const { PLANS } = await import('../src/accounts/plans.ts');
    await dbOf(app()).updateTable('files').set({ version_count: PLANS[cap].max_file_versions_per_file! }).where('mailbox_id', '=', m.id).where('live_path', '=', 'full.txt').execute();
    const more = await s.uploads(id, [descriptor('a.txt', 'a'), descriptor('full.txt', 'f2'), descriptor('b.txt', 'b')]);
    for (const [i, c] of ['a', 'f2', 'b'].entries()) await putBytes(more.body.data.uploads[i].upload, c);
    const refused = await s.batch(id, 12);
    const err = expectError(refused, 'R', 403, 'FILE_VERSION_LIMIT_REACHED');
    expect(err.details.path).toBe('full.txt');
    expect(await filePaths(app(), u.key, m.id)).toEqual(['full.txt', 'keep.txt', 'new1.txt', 'new2.txt', 'old.txt']);
    expect(await mailboxOf(app(), u.key, m.id)).toMatchObject({ files_count: 5, storage_bytes: 19 });
  });

  it('S3: wrong bytes kept by the store fail finalize_batch with 422 naming the path, nothing saved; a new PUT and retry succeeds', async (t) => {
    if (!isS3(app())) t.skip(); // the fs store refuses wrong bytes at the PUT (files.test.ts)
    const u = await app().user();
    const m = await newMailbox(app(), u.key);
    const s = sessionsOf(app(), 'R', u.key, m.id);
    const id = (await s.create()).body.data.mailbox_upload_session.id;
    const res = await s.uploads(id, [descriptor('good.txt', 'good'), descriptor('bad.txt', 'right')]);
    await putBytes(res.body.data.uploads[0].upload, 'good');
    const wrong = await fetch(res.body.data.uploads[1].upload.url, { method: 'PUT', headers: res.body.data.uploads[1].upload.headers, body: new Uint8Array(Buffer.from('wrong')) });
    if (wrong.status === 200) { // s3rver keeps them; real S3 answers 400 BadDigest
      const err = expectError(await s.batch(id, 12), 'R', 422, 'UPLOAD_CHECKSUM_MISMATCH');
      expect(err.details).toMatchObject({ path: 'bad.txt', which: 'checksum' });
      expect(await filePaths(app(), u.key, m.id)).toEqual([]);
    }
    await putBytes(res.body.data.uploads[1].upload, 'right');
    const retry = await s.finalize(id, true);
    expect(retry.status, retry.text).toBe(200);
    expect(retry.body.data.mailbox_upload_session).toMatchObject({ status: 'finalized', finalized_files_count: 2 });
    expect(await filePaths(app(), u.key, m.id)).toEqual(['bad.txt', 'good.txt']);
  });

  it('complete:false cancels: unsaved files discarded, batch-saved files kept in one version, lock released; then closed', async () => {
    const u = await app().user();
    const m = await newMailbox(app(), u.key);
    const s = sessionsOf(app(), 'R', u.key, m.id);
    const id = (await s.create()).body.data.mailbox_upload_session.id;
    const res = await s.uploads(id, [descriptor('saved.txt', 'a'), descriptor('unsaved.txt', 'b')]);
    await putBytes(res.body.data.uploads[0].upload, 'a');
    expect((await s.batch(id, 1)).status).toBe(200);
    await putBytes(res.body.data.uploads[1].upload, 'b');
    const cancel = await s.finalize(id, false);
    expect(cancel.status, cancel.text).toBe(200);
    const session = cancel.body.data.mailbox_upload_session;
    expect(session).toMatchObject({ status: 'failed', finalized_files_count: 1, failed_files_count: 1, uploaded_files_count: 0 });
    expect(await filePaths(app(), u.key, m.id)).toEqual(['saved.txt']);
    const mb = await mailboxOf(app(), u.key, m.id);
    expect(mb).toMatchObject({ files_count: 1, storage_bytes: 1, version_number: 1, version_id: session.target_mailbox_version_id, lock: { locked: false } });
    expect((await uploadFile(app(), u.key, m.id, 'after.txt', 'free again')).status).toBe(201);

    const again = await s.finalize(id, false);
    expect(again.status).toBe(200);
    expect(again.body.data.mailbox_upload_session).toEqual(session);
    expect(expectError(await s.finalize(id, true), 'R', 409, 'UPLOAD_SESSION_CLOSED').details.status).toBe('failed');
    expectError(await s.uploads(id, [descriptor('late.txt', 'x')]), 'R', 409, 'UPLOAD_SESSION_CLOSED');
    expectError(await s.batch(id), 'R', 409, 'UPLOAD_SESSION_CLOSED');
  });

  it('finalize again returns the finalized session unchanged; a session with no changes records no version', async () => {
    const u = await app().user();
    const m = await newMailbox(app(), u.key);
    const s = sessionsOf(app(), 'R', u.key, m.id);
    const id = (await s.create()).body.data.mailbox_upload_session.id;
    const res = await s.uploads(id, [descriptor('f.txt', 'f')]);
    await putBytes(res.body.data.uploads[0].upload, 'f');
    const first = await s.finalize(id, true);
    expect(first.status).toBe(200);
    expect(first.body.data.uploaded_count).toBe(1);
    const second = await s.finalize(id, true);
    expect(second.status).toBe(200);
    expect(second.body.data.mailbox_upload_session).toEqual(first.body.data.mailbox_upload_session);
    expect(second.body.data.uploaded).toEqual([]);
    expect((await mailboxOf(app(), u.key, m.id)).version_number).toBe(1);

    const empty = (await s.create()).body.data.mailbox_upload_session.id;
    const closed = await s.finalize(empty);
    expect(closed.body.data.mailbox_upload_session).toMatchObject({ status: 'finalized', target_mailbox_version_id: null });
    expect((await mailboxOf(app(), u.key, m.id)).version_number).toBe(1);
  });

  it('the write lock: a second session and ordinary saves get 409 MAILBOX_LOCKED', async () => {
    const u = await app().user();
    const m = await newMailbox(app(), u.key);
    const s = sessionsOf(app(), 'R', u.key, m.id);
    const id = (await s.create({ client_session_key: 'one' })).body.data.mailbox_upload_session.id;
    const err = expectError(await s.create({ client_session_key: 'two' }), 'R', 409, 'MAILBOX_LOCKED');
    expect(err.details).toMatchObject({ mailbox_id: m.id, kind: 'upload_session', session_id: id });
    expectError(await s.create(), 'R', 409, 'MAILBOX_LOCKED');
    const save = await uploadFile(app(), u.key, m.id, 'x.txt', 'x');
    expectError(save, 'R', 409, 'MAILBOX_LOCKED');
    const results = await Promise.all([1, 2, 3].map(() => s.create({ client_session_key: 'race' })));
    expect(results.map((r) => r.status)).toEqual([409, 409, 409]);
    await s.finalize(id, false);
    const raced = await Promise.all([1, 2, 3].map(() => s.create({ client_session_key: 'race' })));
    expect(raced.map((r) => r.status).sort()).toEqual([200, 200, 201]);
    expect(new Set(raced.map((r) => r.body.data.mailbox_upload_session.id)).size).toBe(1);
  });

  it('delete_missing prunes omitted files once, keeps _email/ and skipped paths, and needs mailbox-admin', async () => {
    const u = await app().user();
    const m = await newMailbox(app(), u.key);
    for (const [p, c] of [['keep.txt', 'same'], ['drop.txt', 'gone'], ['dir/drop2.txt', 'gone too']]) await uploadFile(app(), u.key, m.id, p, c);
    await insertEmailFile(app(), m.id, u.accountId);
    const writer = await app().key(u, { scope: 'mailbox_write' });
    const denied = await sessionsOf(app(), 'A', writer, m.id).create({ delete_missing: true });
    expect(expectError(denied, 'A', 403, 'PERMISSION_DENIED').details.field).toBe('delete_missing');
    const before = await mailboxOf(app(), u.key, m.id);

    const s = sessionsOf(app(), 'A', u.key, m.id);
    const id = s.data(await s.create({ delete_missing: true, expected_file_count: 2 })).session.id;
    const res = await s.uploads(id, [descriptor('keep.txt', 'same'), descriptor('new.txt', 'new')]);
    expect(res.body.data.skipped).toHaveLength(1);
    await putBytes(res.body.data.uploads[0].upload, 'new');
    const fb = await s.batch(id, 12);
    expect(fb.body.data.remaining_files_count).toBe(0);
    expect(await filePaths(app(), u.key, m.id)).toContain('drop.txt'); // finalize_batch never prunes
    const fin = await s.finalize(id, true);
    expect(fin.status, fin.text).toBe(200);
    expect(await filePaths(app(), u.key, m.id)).toEqual(['_email/2026/01/msg/message.json', 'keep.txt', 'new.txt']);
    const after = await mailboxOf(app(), u.key, m.id);
    expect(after).toMatchObject({ files_count: 3, storage_bytes: 2 + 4 + 3, version_number: before.version_number + 1 });
    expect((await versionRows(app(), m.id)).at(-1)).toMatchObject({ files_changed: 3 });
    const again = await s.finalize(id, true);
    expect(again.body.data.mailbox_upload_session.status).toBe('finalized');
    expect((await mailboxOf(app(), u.key, m.id)).version_number).toBe(before.version_number + 1);
  });

  it('expiry: the sweeper marks past sessions expired and unlocks; a new session expires a stale one lazily', async () => {
    const u = await app().user();
    const m = await newMailbox(app(), u.key);
    const s = sessionsOf(app(), 'R', u.key, m.id);
    const id = (await s.create()).body.data.mailbox_upload_session.id;
    const res = await s.uploads(id, [descriptor('kept.txt', 'k'), descriptor('lost.txt', 'l')]);
    await putBytes(res.body.data.uploads[0].upload, 'k');
    await s.batch(id, 1);
    const past = new Date(Date.now() - 1000).toISOString();
    await dbOf(app()).updateTable('upload_sessions').set({ uploads_expire_at: past }).where('id', '=', id).execute();
    expect(await expireUploadSessions(dbOf(app()), new Date(), 900)).toBeGreaterThanOrEqual(1);
    const row = await dbOf(app()).selectFrom('upload_sessions').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
    expect(row).toMatchObject({ status: 'expired', pending_slot: null });
    const mb = await mailboxOf(app(), u.key, m.id);
    expect(mb).toMatchObject({ lock: { locked: false }, files_count: 1, version_number: 1, version_id: row.target_mailbox_version_id });
    expect(expectError(await s.finalize(id, true), 'R', 409, 'UPLOAD_SESSION_CLOSED').details.status).toBe('expired');
    expect(await filePaths(app(), u.key, m.id)).toEqual(['kept.txt']);

    const stale = (await s.create()).body.data.mailbox_upload_session.id;
    await dbOf(app()).updateTable('upload_sessions').set({ uploads_expire_at: past }).where('id', '=', stale).execute();
    const fresh = await s.create();
    expect(fresh.status, fresh.text).toBe(201);
    expect(fresh.body.data.mailbox_upload_session.id).not.toBe(stale);
    const staleRow = await dbOf(app()).selectFrom('upload_sessions').select('status').where('id', '=', stale).executeTakeFirstOrThrow();
    expect(staleRow.status).toBe('expired');
  });

  it('many files: 202 finalize_pending with Retry-After until done; uploaded lists at most 250', async () => {
    const u = await app().user();
    const m = await newMailbox(app(), u.key);
    const s = sessionsOf(app(), 'R', u.key, m.id);
    const id = (await s.create({ expected_file_count: 310 })).body.data.mailbox_upload_session.id;
    const all = Array.from({ length: 310 }, (_, i) => [`f/${String(i).padStart(3, '0')}.txt`, `${i}`] as const);
    const targets: { upload: any; content: string }[] = [];
    for (let i = 0; i < all.length; i += 100) {
      const part = all.slice(i, i + 100);
      const res = await s.uploads(id, part.map(([p, c]) => descriptor(p, c)));
      expect(res.status, res.text).toBe(201);
      for (const x of res.body.data.uploads) targets.push({ upload: x.upload, content: part[x.input_index]![1] });
    }
    await inParallel(targets, 16, (t) => putBytes(t.upload, t.content));
    const first = await s.finalize(id, true);
    expect(first.status, first.text).toBe(202);
    expect(first.headers.get('retry-after')).toBe('1');
    expect(first.body.data).toMatchObject({ finalize_pending: true, remaining_files_count: 10, uploaded_count: 300, uploaded_truncated: true });
    expect(first.body.data.uploaded).toHaveLength(250);
    expect(first.body.data.mailbox_upload_session.status).toBe('pending');
    const second = await s.finalize(id, true);
    expect(second.status, second.text).toBe(200);
    expect(second.body.data).toMatchObject({ finalize_pending: false, remaining_files_count: 0, uploaded_count: 10, uploaded_truncated: false });
    expect(await mailboxOf(app(), u.key, m.id)).toMatchObject({ files_count: 310, version_number: 1 });
  }, 90_000); // 310 real PUTs, each fsynced

  it('foreign mailboxes and sessions answer 404', async () => {
    const u = await app().user();
    const other = await app().user();
    const m = await newMailbox(app(), u.key);
    const theirs = await newMailbox(app(), other.key);
    const theirSession = (await sessionsOf(app(), 'R', other.key, theirs.id).create()).body.data.mailbox_upload_session.id;
    expectError(await sessionsOf(app(), 'R', u.key, theirs.id).create(), 'R', 404, 'MAILBOX_NOT_FOUND');
    expectError(await sessionsOf(app(), 'A', u.key, theirs.id).finalize(theirSession), 'A', 404, 'BUCKET_NOT_FOUND');
    const mine = sessionsOf(app(), 'R', u.key, m.id);
    expectError(await mine.uploads(theirSession, [descriptor('a.txt', 'a')]), 'R', 404, 'UPLOAD_SESSION_NOT_FOUND');
    expectError(await mine.finalize('bus_nope'), 'R', 404, 'UPLOAD_SESSION_NOT_FOUND');
    expectError(await sessionsOf(app(), 'A', u.key, m.id).batch('not-an-id'), 'A', 404, 'UPLOAD_SESSION_NOT_FOUND');
  });
}

describeEachDatabase('upload sessions', sessionsSuite);
describeWithS3('upload sessions', sessionsSuite, { withPostgres: true });
