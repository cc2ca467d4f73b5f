import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DATABASES, startTestApp, type TestApp } from './harness.ts';
import { durableGate } from './durable-gate.ts';
import { newMailbox } from './files-helpers.ts';
import { descriptor, filePaths, putBytes, sessionsOf } from './upload-sessions-helpers.ts';

// Upload-session writes are answered only once durable, and wait for the disk off the event loop
// (src/db/durable-commit.ts): while a save's sync is slow, other requests are answered, and the save
// is answered only after its sync. The app's `beforeDurable` hook stands for the slow sync; here it
// holds one commit's sync until the test lets it go.
for (const kind of DATABASES) {
  describe(`upload sessions: a slow disk sync [${kind}]`, () => {
    let app: TestApp;
    const gate = durableGate();
    beforeAll(async () => {
      app = await startTestApp(kind, {}, { beforeDurable: gate.beforeDurable });
    });
    afterAll(async () => app?.stop());

    /**
     * Runs `call` with the next commit's sync held. Meanwhile other requests (`whileHeld`) are
     * answered and `call` is not; then the sync is let go and `call`'s answer returned.
     */
    async function withSyncHeld<T>(call: () => Promise<T>, whileHeld: () => Promise<void>): Promise<T> {
      const held = gate.hold();
      let answered = false;
      const res = call().then((r) => ((answered = true), r));
      try {
        // Committed (visible to readers), and now waiting for the held sync.
        await held.entered;
        await whileHeld();
        expect(answered).toBe(false);
      } finally {
        held.release();
      }
      return res;
    }
    const mailboxAnswers = (key: string, mailboxId: string) => async () => {
      const other = await app.request('GET', `/v1/mailboxes/${mailboxId}`, { key });
      expect(other.status, other.text).toBe(200);
    };

    it('answers other requests while a finalize_batch waits for its sync, and answers the save only after it', async () => {
      const u = await app.user();
      const m = await newMailbox(app, u.key);
      const s = sessionsOf(app, 'R', u.key, m.id);
      const id = (await s.create()).body.data.mailbox_upload_session.id;
      const declared = await s.uploads(id, [descriptor('a.txt', 'alpha'), descriptor('b.txt', 'beta')]);
      expect(declared.status, declared.text).toBe(201);
      await putBytes(declared.body.data.uploads[0].upload, 'alpha');
      await putBytes(declared.body.data.uploads[1].upload, 'beta');

      const res = await withSyncHeld(
        () => s.batch(id, 12),
        async () => {
          await mailboxAnswers(u.key, m.id)();
          expect(await filePaths(app, u.key, m.id)).toEqual(['a.txt', 'b.txt']);
        },
      );
      expect(res.status, res.text).toBe(200);
      expect(res.body.data.uploaded.map((x: { path: string }) => x.path)).toEqual(['a.txt', 'b.txt']);
    });

    it('answers a PUT of bytes only once the commit that records it is synced', async () => {
      const u = await app.user();
      const m = await newMailbox(app, u.key);
      const s = sessionsOf(app, 'R', u.key, m.id);
      const id = (await s.create()).body.data.mailbox_upload_session.id;
      const declared = await s.uploads(id, [descriptor('c.txt', 'gamma')]);
      const upload = declared.body.data.uploads[0].upload as { url: string; headers: Record<string, string> };

      const put = await withSyncHeld(() => fetch(upload.url, { method: 'PUT', headers: upload.headers, body: new Uint8Array(Buffer.from('gamma')) }), mailboxAnswers(u.key, m.id));
      expect(put.status).toBe(200);
      const saved = await s.batch(id, 12);
      expect(saved.body.data.uploaded.map((x: { path: string }) => x.path)).toEqual(['c.txt']);
    });

    it('answers starting a session, declaring files and finalizing only once each is synced', async () => {
      const u = await app.user();
      const m = await newMailbox(app, u.key);
      const s = sessionsOf(app, 'R', u.key, m.id);
      const others = mailboxAnswers(u.key, m.id);
      const created = await withSyncHeld(() => s.create(), others);
      expect(created.status, created.text).toBe(201);
      const id = created.body.data.mailbox_upload_session.id;
      const declared = await withSyncHeld(() => s.uploads(id, [descriptor('d.txt', 'delta')]), others);
      expect(declared.status, declared.text).toBe(201);
      await putBytes(declared.body.data.uploads[0].upload, 'delta');
      const done = await withSyncHeld(() => s.finalize(id, true), others);
      expect(done.status, done.text).toBe(200);
      expect(done.body.data.mailbox_upload_session.status).toBe('finalized');
    });
  });
}
