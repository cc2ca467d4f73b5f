import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DATABASES, type TestApp } from './harness.ts';
import { startClockApp, testClock, type Clock } from './agent-helpers.ts';
import { dbOf } from './factories.ts';
import { expireUploadSessions } from '../src/uploads/upload-sessions.lifecycle.ts';
import { descriptor, filePaths, mailboxOf, putBytes, sessionsOf } from './upload-sessions-helpers.ts';

// Surface A upload sessions as bucket-era clients use them: the session under
// data.bucket_upload_session, and a client that dies mid-session does not leave the bucket
// locked: after CUBBY_UPLOAD_SESSION_IDLE_S without activity the lock is released and the
// session expires, found by the sweeper or on the next access (docs/compat.md). The app runs on
// a clock the test moves, so no test waits.

const IDLE = 300;

for (const kind of DATABASES) {
  describe(`compat: upload sessions [${kind}]`, () => {
    const clock: Clock = testClock();
    let app: TestApp;
    beforeAll(async () => {
      app = await startClockApp(kind, clock, { CUBBY_UPLOAD_SESSION_IDLE_S: String(IDLE) });
    });
    afterAll(async () => app?.stop());

    async function bucket(key: string, title = `b ${Math.random().toString(36).slice(2, 8)}`) {
      const res = await app.request('POST', '/api/v1/buckets', { key, body: { bucket: { title } } });
      expect(res.status, res.text).toBe(201);
      return res.body.data.bucket.id as string;
    }

    it('every surface A session reply carries data.bucket_upload_session (with id) beside the other names', async () => {
      const u = await app.user();
      const id = await bucket(u.key);
      const s = sessionsOf(app, 'A', u.key, id);
      const start = await s.create({ client_session_key: 'cli-1', expected_file_count: 1, delete_missing: false });
      expect(start.status, start.text).toBe(201);
      const d = start.body.data;
      expect(d.bucket_upload_session.id).toMatch(/^bus_[A-Za-z0-9]+$/);
      expect(d.bucket_upload_session).toMatchObject({ id: d.id, bucket_id: id, mailbox_id: id, status: 'pending', idle_timeout_seconds: IDLE });
      expect(d.upload_session.id).toBe(d.id);
      expect(d.mailbox_upload_session.id).toBe(d.id);
      // The reported deadline is the idle one (sooner than the 6-hour hard deadline).
      expect(Date.parse(d.bucket_upload_session.uploads_expire_at)).toBe(Date.parse(d.bucket_upload_session.created_at) + IDLE * 1000);
      const up = await s.uploads(d.id, [descriptor('a.txt', 'a')]);
      expect(up.body.data.bucket_upload_session.id).toBe(d.id);
      await putBytes(up.body.data.uploads[0].upload, 'a');
      expect((await s.batch(d.id)).body.data.bucket_upload_session.finalized_files_count).toBe(1);
      const fin = await s.finalize(d.id, true);
      expect(fin.body.data.bucket_upload_session).toMatchObject({ id: d.id, status: 'finalized' });
      // Surface R keeps its own name only.
      expect((await app.request('POST', `/v1/mailboxes/${id}/upload_sessions`, { key: u.key, body: {} })).body.data.bucket_upload_session).toBeUndefined();
    });

    it('activity keeps a session alive; when the client goes quiet the lock lapses, a new session and ordinary saves work, and the old session is expired on access', async () => {
      const u = await app.user();
      const id = await bucket(u.key);
      const s = sessionsOf(app, 'A', u.key, id);
      const sid = (await s.create()).body.data.id;
      const up = await s.uploads(sid, [descriptor('kept.txt', 'k'), descriptor('lost.txt', 'l')]);
      // Each step is activity: declarations, bytes arriving, saves.
      clock.advance(IDLE - 60);
      await putBytes(up.body.data.uploads[0].upload, 'k');
      clock.advance(IDLE - 60);
      const saved = await s.batch(sid, 1);
      expect(saved.status, saved.text).toBe(200);
      expect((await mailboxOf(app, u.key, id)).lock.locked).toBe(true);
      // A second client is refused while the session is alive.
      const other = await s.create();
      expect(other.status).toBe(409);
      expect(other.body.error.code).toBe('MAILBOX_LOCKED');

      // The client dies. After the idle time the lock is gone without any sweeper.
      clock.advance(IDLE + 1);
      expect((await mailboxOf(app, u.key, id)).lock.locked).toBe(false);
      const direct = await app.request('POST', '/api/v1/direct_uploads', { key: u.key, body: { bucket_id: id, path: 'direct.txt', blob: { filename: 'direct.txt', ...descriptor('direct.txt', 'd'), path: undefined } } });
      expect(direct.status, direct.text).toBe(201);
      await putBytes(direct.body.data.direct_upload, 'd');
      const save = await app.request('POST', `/api/v1/buckets/${id}/files`, { key: u.key, body: { path: 'direct.txt', signed_blob_id: direct.body.data.signed_id } });
      expect(save.status, save.text).toBe(201);
      // The old session, touched again, is expired: what it saved stays, the rest is discarded.
      const late = await s.finalize(sid, true);
      expect(late.status).toBe(409);
      expect(late.body.error).toMatchObject({ code: 'UPLOAD_SESSION_CLOSED' });
      const row = await dbOf(app).selectFrom('upload_sessions').selectAll().where('id', '=', sid).executeTakeFirstOrThrow();
      expect(row.status).toBe('expired');
      expect(await filePaths(app, u.key, id)).toEqual(['direct.txt', 'kept.txt']);
      const fresh = await s.create();
      expect(fresh.status, fresh.text).toBe(201);
    });

    it('the sweeper expires idle sessions and releases their locks', async () => {
      const u = await app.user();
      const id = await bucket(u.key);
      const s = sessionsOf(app, 'A', u.key, id);
      const sid = (await s.create()).body.data.id;
      const statusOf = async () => (await dbOf(app).selectFrom('upload_sessions').select('status').where('id', '=', sid).executeTakeFirstOrThrow()).status;
      clock.advance(IDLE - 1);
      await expireUploadSessions(dbOf(app), clock.now(), IDLE); // (sessions of earlier tests may be due)
      expect(await statusOf()).toBe('pending');
      clock.advance(2);
      expect(await expireUploadSessions(dbOf(app), clock.now(), IDLE)).toBeGreaterThanOrEqual(1);
      const row = await dbOf(app).selectFrom('upload_sessions').selectAll().where('id', '=', sid).executeTakeFirstOrThrow();
      expect(row).toMatchObject({ status: 'expired', pending_slot: null });
      const m = await dbOf(app).selectFrom('mailboxes').select(['lock_kind', 'locked_until']).where('id', '=', id).executeTakeFirstOrThrow();
      expect(m).toEqual({ lock_kind: null, locked_until: null });
    });
  });
}
