import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DATABASES, type TestApp } from './harness.ts';
import { mailboxWithAddress, sendMail } from './smtp-helpers.ts';
import { deliveries, drain, makeCert, Receiver, setWebhook, startHookApp, type TestCert } from './webhook-receiver.ts';
import { rolledBackThenCommitted } from './events-helpers.ts';
import { decryptSecret } from '../src/webhooks/secrets.ts';

// Webhook settings and signed delivery, against a real HTTPS receiver (self-signed certificate
// trusted through CUBBY_WEBHOOK_CA_FILE) that checks every signature with the standardwebhooks
// package. Mail arrives over SMTP.

for (const kind of DATABASES) {
  describe(`webhooks: settings and signed delivery [${kind}]`, () => {
    let cert: TestCert;
    let receiver: Receiver;
    let app: TestApp;

    beforeAll(async () => {
      cert = await makeCert();
      receiver = new Receiver(cert);
      await receiver.start();
      ({ app } = await startHookApp(kind, cert));
    });
    afterAll(async () => {
      await app?.stop();
      await receiver?.stop();
      fs.rmSync(cert.dir, { recursive: true, force: true });
    });

    const path = (mailboxId: string) => `/v1/mailboxes/${mailboxId}/email/webhook`;

    it('PUT shows the signing secret once (new URL or rotate_secret), GET never; DELETE answers 200 also when none is set; admin only', async () => {
      const u = await app.user();
      const box = await mailboxWithAddress(app, u);
      expect((await app.request('GET', path(box.id), { key: u.key })).body.data).toEqual({ webhook: null });

      const first = await setWebhook(app, u.key, box.id, receiver.url('/a'));
      expect(first).toMatchObject({ url: receiver.url('/a'), event: 'email.received', mailbox_id: box.id });
      expect(first.signing_secret).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);

      const read = await app.request('GET', path(box.id), { key: u.key });
      expect(read.status).toBe(200);
      expect(read.body.data.webhook).toMatchObject({ url: receiver.url('/a'), event: 'email.received' });
      expect(read.text).not.toContain('whsec_');

      const same = await setWebhook(app, u.key, box.id, receiver.url('/a'));
      expect(same.signing_secret).toBeUndefined();
      const rotated = await setWebhook(app, u.key, box.id, receiver.url('/a'), { rotate_secret: true });
      expect(rotated.signing_secret).toMatch(/^whsec_/);
      expect(rotated.signing_secret).not.toBe(first.signing_secret);
      const moved = await setWebhook(app, u.key, box.id, receiver.url('/b'));
      expect(moved.signing_secret).toMatch(/^whsec_/);
      expect(moved.url).toBe(receiver.url('/b'));

      // Encrypted at rest: the row holds no secret, and opens only with the service secret.
      const row = await app.started.deps.db.selectFrom('webhooks').selectAll().where('mailbox_id', '=', box.id).executeTakeFirstOrThrow();
      expect(row.secret_ciphertext).not.toContain(moved.signing_secret.slice(6, 20));
      expect(decryptSecret(app.started.deps.secret, row.id, row.secret_ciphertext)).toBe(moved.signing_secret);
      expect(() => decryptSecret(app.started.deps.secret, 'whk_other', row.secret_ciphertext)).toThrow();

      const reader = await app.key(u, { scope: 'mailbox_read' });
      expect((await app.request('GET', path(box.id), { key: reader })).body.error.code).toBe('PERMISSION_DENIED');
      expect((await app.request('PUT', path(box.id), { key: reader, body: { webhook_url: receiver.url() } })).body.error.code).toBe('PERMISSION_DENIED');
      const stranger = await app.user();
      expect((await app.request('GET', path(box.id), { key: stranger.key })).body.error.code).toBe('MAILBOX_NOT_FOUND');

      const del = await app.request('DELETE', path(box.id), { key: u.key, body: {} });
      expect(del.status).toBe(200);
      expect(del.body.data).toEqual({ deleted: true, id: box.id });
      expect((await app.request('DELETE', path(box.id), { key: u.key })).body.data).toEqual({ deleted: true, id: box.id });
      expect((await app.request('GET', path(box.id), { key: u.key })).body.data).toEqual({ webhook: null });
    });

    it('concurrent first PUTs of one mailbox are serialized (they raced on the unique index and answered 500 on Postgres); the stored secret is one an answer showed', async () => {
      const u = await app.user();
      const box = await mailboxWithAddress(app, u);
      const puts = await Promise.all(
        Array.from({ length: 6 }, (_, i) => app.request('PUT', path(box.id), { key: u.key, body: { webhook_url: receiver.url(`/race/${i % 2 ? 'a' : 'b'}`), rotate_secret: true } })),
      );
      expect(puts.map((r) => r.status)).toEqual(Array(6).fill(200));
      const row = await app.started.deps.db.selectFrom('webhooks').selectAll().where('mailbox_id', '=', box.id).execute();
      expect(row).toHaveLength(1);
      const stored = decryptSecret(app.started.deps.secret, row[0]!.id, row[0]!.secret_ciphertext);
      // Every answer showed a different secret; exactly one of them is in force, with its URL.
      const shown = puts.map((r) => r.body.data.webhook);
      expect(new Set(shown.map((w) => w.signing_secret)).size).toBe(6);
      expect(shown.filter((w) => w.signing_secret === stored).map((w) => w.url)).toEqual([row[0]!.url]);
      expect(row[0]!.secret_created_at).toBe(shown.find((w) => w.signing_secret === stored).secret_created_at);
    });

    it('refuses URLs that are not public HTTPS with 422 INVALID_EMAIL_WEBHOOK', async () => {
      const u = await app.user();
      const box = await mailboxWithAddress(app, u);
      for (const bad of [
        `http://hooks.test:${receiver.port}/x`,
        `https://user:pw@hooks.test:${receiver.port}/x`,
        `https://hooks.test:${receiver.port}/x#frag`,
        `https://hooks.test/${'a'.repeat(2048)}`,
        'not a url',
        'https://nowhere.invalid/x',
      ]) {
        const res = await app.request('PUT', path(box.id), { key: u.key, body: { webhook_url: bad } });
        expect(res.status, bad).toBe(422);
        expect(res.body.error.code, bad).toBe('INVALID_EMAIL_WEBHOOK');
        expect(res.body.error.details.field).toBe('webhook_url');
      }
    });

    it('delivers email.received signed with Standard Webhooks, the COMPAT body, and logs the attempt', async () => {
      const u = await app.user();
      const box = await mailboxWithAddress(app, u);
      const hook = await setWebhook(app, u.key, box.id, receiver.url(`/deliver/${box.id}`));
      receiver.secret = hook.signing_secret;
      const before = receiver.received.length;
      const sent = await sendMail(app, { to: box.address, subject: 'Hello hook', attachments: [{ filename: 'a.txt', content: 'A' }] });
      await receiver.waitFor(before + 1);
      const got = receiver.received[before]!;
      expect(got.path).toBe(`/deliver/${box.id}`);
      expect(got.verified).toBe(true);
      expect(got.headers['content-type']).toBe('application/json');
      expect(got.headers['webhook-id']).toBe(got.json.id);
      expect(got.json).toEqual({
        id: expect.stringMatching(/^evt_[A-Za-z0-9]+$/),
        type: 'email.received',
        created_at: expect.any(String),
        data: { account_id: u.accountId, mailbox_id: box.id, email_id: sent.emailIds[0], received_at: expect.any(String), attachment_count: 1 },
      });
      // No subject, sender or body in the payload.
      expect(got.body).not.toContain('Hello hook');

      await drain(app);
      const [d] = await deliveries(app, u.key, box.id);
      expect(d).toMatchObject({ event_id: got.json.id, event_type: 'email.received', status: 'succeeded', attempt_count: 1, last_status_code: 204, next_attempt_at: null });
      expect(d.attempts).toEqual([expect.objectContaining({ attempt: 1, status_code: 204, outcome: 'succeeded', error: null, duration_ms: expect.any(Number), url: receiver.url(`/deliver/${box.id}`) })]);
    });

    it('POST …/webhook/test queues a signed webhook.test event (202, its pending delivery) that arrives verified and shows in the log; 404 without a webhook; admin only', async () => {
      const u = await app.user();
      const box = await mailboxWithAddress(app, u);
      const test = `${path(box.id)}/test`;
      const none = await app.request('POST', test, { key: u.key, body: {} });
      expect(none.status).toBe(404);
      expect(none.body.error.code).toBe('EMAIL_WEBHOOK_NOT_FOUND');

      const hook = await setWebhook(app, u.key, box.id, receiver.url(`/test/${box.id}`));
      receiver.secret = hook.signing_secret;
      const before = receiver.received.length;
      const sent = await app.request('POST', test, { key: u.key });
      expect(sent.status).toBe(202);
      expect(sent.body.data).toMatchObject({
        event: { id: expect.stringMatching(/^evt_/), type: 'webhook.test', created_at: expect.any(String) },
        delivery: { event_id: sent.body.data.event.id, event_type: 'webhook.test', status: 'pending', attempt_count: 0, attempts: [] },
      });
      await receiver.waitFor(before + 1);
      const got = receiver.received[before]!;
      expect(got.path).toBe(`/test/${box.id}`);
      expect(got.verified).toBe(true);
      expect(got.headers['webhook-id']).toBe(sent.body.data.event.id);
      expect(got.json).toEqual({ id: sent.body.data.event.id, type: 'webhook.test', created_at: sent.body.data.event.created_at, data: { mailbox_id: box.id, account_id: u.accountId, test: true } });
      await drain(app);
      const [d] = await deliveries(app, u.key, box.id);
      expect(d).toMatchObject({ id: sent.body.data.delivery.id, event_id: sent.body.data.event.id, status: 'succeeded', last_status_code: 204 });

      const reader = await app.key(u, { scope: 'mailbox_read' });
      expect((await app.request('POST', test, { key: reader, body: {} })).body.error.code).toBe('PERMISSION_DENIED');
      const stranger = await app.user();
      expect((await app.request('POST', test, { key: stranger.key, body: {} })).body.error.code).toBe('MAILBOX_NOT_FOUND');
      expect(receiver.received.length).toBe(before + 1);
    });

    it('makes first attempts in event order per webhook, for sequential and concurrent mail', async () => {
      const u = await app.user();
      const box = await mailboxWithAddress(app, u);
      receiver.secret = (await setWebhook(app, u.key, box.id, receiver.url(`/order/${box.id}`))).signing_secret;
      const before = receiver.received.length;
      for (let i = 0; i < 3; i++) await sendMail(app, { to: box.address, subject: `seq ${i}` });
      await Promise.all(Array.from({ length: 6 }, (_, i) => sendMail(app, { to: box.address, subject: `par ${i}` })));
      await receiver.waitFor(before + 9);
      const mine = receiver.received.filter((r) => r.path === `/order/${box.id}`);
      expect(mine.every((r) => r.verified)).toBe(true);
      const listed = await app.request('GET', `/v1/mailboxes/${box.id}/emails`, { key: u.key, query: { order: 'asc', limit: 100 } });
      expect(mine.map((r) => r.json.data.email_id)).toEqual(listed.body.data.emails.map((e: any) => e.id));
    });

    it('nothing is delivered for events of a rolled-back transaction', async () => {
      const u = await app.user();
      const box = await mailboxWithAddress(app, u);
      receiver.secret = (await setWebhook(app, u.key, box.id, receiver.url(`/rollback/${box.id}`))).signing_secret;
      const before = receiver.received.length;
      await rolledBackThenCommitted(app, u.accountId, box.id);
      await receiver.waitFor(before + 1);
      await drain(app);
      const mine = receiver.received.filter((r) => r.path === `/rollback/${box.id}`);
      expect(mine.map((r) => r.json.data.email_id)).toEqual(['eml_committed']);
      expect((await deliveries(app, u.key, box.id)).map((d) => d.status)).toEqual(['succeeded']);
    });
  });
}
