import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DATABASES, type TestApp, type TestUser } from './harness.ts';
import { mailboxWithAddress, sendMail } from './smtp-helpers.ts';
import { deliveries, drain, makeCert, Receiver, setWebhook, startHookApp, type TestCert } from './webhook-receiver.ts';

// Delivery rules over time (COMPAT.md): retries on network errors, 408, 429 and 5xx, with the
// receiver's Retry-After honoured; stop on other 4xx, redirects and oversized responses; give up
// after 24 hours. Nobody waits: the app runs on a clock the tests move forward, and the worker is
// drained after each move.

const HOUR = 3_600_000;

for (const kind of DATABASES) {
  describe(`webhooks: retries and stops [${kind}]`, () => {
    let cert: TestCert;
    let receiver: Receiver;
    let app: TestApp;
    let clock: { offsetMs: number };

    beforeAll(async () => {
      cert = await makeCert();
      receiver = new Receiver(cert);
      receiver.ignoreTimestamp = true; // the app's clock runs ahead of the receiver's
      await receiver.start();
      ({ app, clock } = await startHookApp(kind, cert));
    });
    afterAll(async () => {
      await app?.stop();
      await receiver?.stop();
      fs.rmSync(cert.dir, { recursive: true, force: true });
    });

    /** A mailbox whose webhook points at its own path on the receiver. */
    async function hooked(u: TestUser) {
      const box = await mailboxWithAddress(app, u);
      const p = `/r/${box.id}`;
      receiver.secret = (await setWebhook(app, u.key, box.id, receiver.url(p))).signing_secret;
      return { box, hits: () => receiver.received.filter((r) => r.path === p) };
    }

    it('receiver down, then up: every event is delivered, same event id, fresh signature per attempt', async () => {
      const u = await app.user();
      const { box, hits } = await hooked(u);
      const port = receiver.port;
      await receiver.stop();
      const sent = [];
      for (let i = 0; i < 3; i++) sent.push((await sendMail(app, { to: box.address, subject: `down ${i}` })).emailIds[0]);
      await drain(app);
      const waiting = await deliveries(app, u.key, box.id);
      expect(waiting.map((d) => d.status)).toEqual(['retrying', 'retrying', 'retrying']);
      expect(waiting[0].attempts[0]).toMatchObject({ attempt: 1, outcome: 'retry', status_code: null, error: expect.stringContaining('connection failed') });

      await receiver.start(port);
      let n = 0;
      receiver.respond = (r) => (r.path === `/r/${box.id}` && n++ === 0 ? { status: 500 } : { status: 200, body: 'ok' });
      clock.offsetMs += HOUR;
      await drain(app);
      clock.offsetMs += HOUR;
      await drain(app);
      receiver.respond = () => ({ status: 204 });
      const done = await deliveries(app, u.key, box.id);
      expect(done.map((d) => d.status)).toEqual(['succeeded', 'succeeded', 'succeeded']);
      expect(new Set(hits().filter((h) => h.verified).map((h) => h.json.data.email_id))).toEqual(new Set(sent));
      // The event that got a 500 first came twice, with one id and two signatures.
      const byEvent = new Map<string, typeof hits extends () => (infer H)[] ? H[] : never>();
      for (const h of hits()) byEvent.set(h.headers['webhook-id']!, [...(byEvent.get(h.headers['webhook-id']!) ?? []), h]);
      const twice = [...byEvent.values()].find((v) => v.length === 2)!;
      expect(twice[0]!.headers['webhook-signature']).not.toBe(twice[1]!.headers['webhook-signature']);
      expect(twice[0]!.headers['webhook-timestamp']).not.toBe(twice[1]!.headers['webhook-timestamp']);
    });

    it.each([410, 400, 401, 404, 422])('a %i answer stops the delivery at once', async (status) => {
      const u = await app.user();
      const { box, hits } = await hooked(u);
      receiver.respond = (r) => (r.path === `/r/${box.id}` ? { status } : { status: 204 });
      await sendMail(app, { to: box.address });
      await drain(app);
      clock.offsetMs += 2 * HOUR;
      await drain(app);
      receiver.respond = () => ({ status: 204 });
      expect(hits()).toHaveLength(1);
      const [d] = await deliveries(app, u.key, box.id);
      expect(d).toMatchObject({ status: 'failed', attempt_count: 1, last_status_code: status, next_attempt_at: null });
      expect(d.attempts[0]).toMatchObject({ outcome: 'failed', status_code: status });
    });

    it('429 with Retry-After: the next attempt waits exactly that long (capped at an hour)', async () => {
      const u = await app.user();
      const { box, hits } = await hooked(u);
      receiver.respond = (r) => (r.path === `/r/${box.id}` && hits().length === 1 ? { status: 429, headers: { 'retry-after': '120' } } : { status: 204 });
      await sendMail(app, { to: box.address });
      await drain(app);
      let [d] = await deliveries(app, u.key, box.id);
      expect(d.status).toBe('retrying');
      expect(Date.parse(d.next_attempt_at) - Date.parse(d.attempts[0].started_at)).toBeGreaterThanOrEqual(120_000);
      expect(Date.parse(d.next_attempt_at) - Date.parse(d.attempts[0].started_at)).toBeLessThan(125_000);
      clock.offsetMs += 110_000;
      await drain(app);
      expect(hits()).toHaveLength(1);
      clock.offsetMs += 15_000;
      await drain(app);
      expect(hits()).toHaveLength(2);
      [d] = await deliveries(app, u.key, box.id);
      expect(d).toMatchObject({ status: 'succeeded', attempt_count: 2 });

      const other = await hooked(u);
      receiver.respond = (r) => (r.path === `/r/${other.box.id}` ? { status: 503, headers: { 'retry-after': '999999' } } : { status: 204 });
      await sendMail(app, { to: other.box.address });
      await drain(app);
      receiver.respond = () => ({ status: 204 });
      const [o] = await deliveries(app, u.key, other.box.id);
      expect(Date.parse(o.next_attempt_at) - Date.parse(o.attempts[0].started_at)).toBeLessThan(3600_000 + 5000);
      expect(Date.parse(o.next_attempt_at) - Date.parse(o.attempts[0].started_at)).toBeGreaterThanOrEqual(3600_000);
    });

    it('redirects are not followed, and a response over 64 KiB stops the delivery', async () => {
      const u = await app.user();
      const a = await hooked(u);
      const b = await hooked(u);
      receiver.respond = (r) =>
        r.path === `/r/${a.box.id}` ? { status: 302, headers: { location: 'https://169.254.169.254/latest/meta-data/' } } : r.path === `/r/${b.box.id}` ? { status: 200, body: Buffer.alloc(70 * 1024, 'x') } : { status: 204 };
      await sendMail(app, { to: a.box.address });
      await sendMail(app, { to: b.box.address });
      await drain(app);
      clock.offsetMs += 2 * HOUR;
      await drain(app);
      receiver.respond = () => ({ status: 204 });
      expect(a.hits()).toHaveLength(1);
      expect(b.hits()).toHaveLength(1);
      const [da] = await deliveries(app, u.key, a.box.id);
      expect(da).toMatchObject({ status: 'failed', last_status_code: 302, last_error: expect.stringContaining('redirect') });
      const [db] = await deliveries(app, u.key, b.box.id);
      expect(db).toMatchObject({ status: 'failed', last_error: expect.stringContaining('larger than 65536 bytes') });
    });

    it('keeps retrying 5xx with growing, jittered delays for 24 hours, then records the delivery as given up', async () => {
      const u = await app.user();
      const { box, hits } = await hooked(u);
      receiver.respond = (r) => (r.path === `/r/${box.id}` ? { status: 503 } : { status: 204 });
      await sendMail(app, { to: box.address });
      await drain(app);
      for (let i = 0; i < 30 && (await deliveries(app, u.key, box.id))[0].status === 'retrying'; i++) {
        clock.offsetMs += HOUR;
        await drain(app);
      }
      receiver.respond = () => ({ status: 204 });
      const [d] = await deliveries(app, u.key, box.id);
      expect(d.status).toBe('failed');
      expect(d.last_error).toMatch(/gave up after \d+ attempts/);
      expect(hits()).toHaveLength(d.attempt_count);
      expect(d.attempt_count).toBeGreaterThanOrEqual(10);
      const created = Date.parse(d.created_at);
      const planned = d.attempts.map((a: any) => a.next_attempt_at).filter(Boolean).map(Date.parse);
      // Delays grow, and none is planned after the 24-hour window.
      expect(planned.every((t: number) => t <= created + 24 * HOUR)).toBe(true);
      const gaps = planned.map((t: number, i: number) => t - Date.parse(d.attempts[i].started_at));
      expect(gaps.slice(0, 5)).toEqual([...gaps.slice(0, 5)].sort((x, y) => x - y));
      expect(d.attempts.at(-1)).toMatchObject({ outcome: 'failed', next_attempt_at: null });
    });

    it('a new URL or a rotation cancels waiting deliveries; DELETE cancels queued ones; so does deleting the mailbox', async () => {
      const u = await app.user();
      for (const change of ['rotate', 'url', 'delete', 'mailbox'] as const) {
        const { box, hits } = await hooked(u);
        receiver.respond = (r) => (r.path === `/r/${box.id}` ? { status: 500 } : { status: 204 });
        await sendMail(app, { to: box.address });
        await drain(app);
        expect((await deliveries(app, u.key, box.id))[0].status).toBe('retrying');
        if (change === 'rotate') await setWebhook(app, u.key, box.id, receiver.url(`/r/${box.id}`), { rotate_secret: true });
        if (change === 'url') await setWebhook(app, u.key, box.id, receiver.url(`/elsewhere/${box.id}`));
        if (change === 'delete') expect((await app.request('DELETE', `/v1/mailboxes/${box.id}/email/webhook`, { key: u.key })).status).toBe(200);
        if (change === 'mailbox') {
          expect((await app.request('POST', `/v1/mailboxes/${box.id}/archive`, { key: u.key })).status).toBe(200);
          expect((await app.request('DELETE', `/v1/mailboxes/${box.id}`, { key: u.key, body: { confirmation: `DELETE ${box.id}` } })).status).toBe(200);
        }
        receiver.respond = () => ({ status: 204 });
        clock.offsetMs += 2 * HOUR;
        await drain(app);
        expect(hits(), change).toHaveLength(1);
        const [d] = await app.started.deps.db.selectFrom('webhook_deliveries').selectAll().where('mailbox_id', '=', box.id).execute();
        expect(d, change).toMatchObject({ status: 'cancelled', last_error: expect.stringMatching(/cancelled|removed/) });
        const queued = await app.started.deps.db.selectFrom('jobs').select('status').where('task', '=', 'webhooks.retry').where('payload', 'like', `%${d!.id}%`).execute();
        // Settings changes cancel the queued retry; for a deleted mailbox the retry runs and stands down.
        expect(queued.map((j) => j.status), change).toEqual([change === 'mailbox' ? 'done' : 'cancelled']);
      }
    });
  });
}
