import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { adapters, createConsumer } from '@rails/actioncable';
import { DATABASES, startTestApp, type TestApp } from './harness.ts';
import { mailboxWithAddress, sendMail } from './smtp-helpers.ts';
import { cableUrl, identifierOf, RawCable, subscribed, ticket } from './cable-client.ts';
import { rolledBackThenCommitted } from './events-helpers.ts';
import { sha256Hex } from '../src/ids.ts';

// The live subscription: tickets, the ActionCable protocol with the stock @rails/actioncable
// client, pushes of email.received, limits, and disconnection when access goes.

// The stock client is written for browsers: Node 20 has no global WebSocket or window events.
adapters.WebSocket = WebSocket as any;
const g = globalThis as any;
g.addEventListener ??= () => undefined;
g.removeEventListener ??= () => undefined;
g.document ??= { visibilityState: 'visible' };

for (const kind of DATABASES) {
  describe(`live subscription [${kind}]`, () => {
    let app: TestApp;
    const clock = { offsetMs: 0 };
    beforeAll(async () => {
      app = await startTestApp(kind, {}, { now: () => new Date(Date.now() + clock.offsetMs), events: { live: { pingMs: 200, accessCheckMs: 200, maxConnectionsPerKey: 3 } } });
    });
    afterAll(async () => {
      await app?.stop();
    });

    it('issues a 60-second ticket bound to account and mailbox (read permission is enough)', async () => {
      const u = await app.user();
      const box = await mailboxWithAddress(app, u);
      const reader = await app.key(u, { scope: 'mailbox_read' });
      const t = await ticket(app, reader, box.id);
      expect(t).toEqual({
        token: expect.stringMatching(/^[A-Za-z0-9]{43}$/),
        expires_in: 60,
        channel: 'EmailReceivedChannel',
        account_id: u.accountId,
        mailbox_id: box.id,
        websocket_url: `${app.base.replace(/^http/, 'ws')}/cable`,
      });
      const stored = await app.started.deps.db.selectFrom('live_tokens').selectAll().where('mailbox_id', '=', box.id).execute();
      expect(JSON.stringify(stored)).not.toContain(t.token);
      const stranger = await app.user();
      expect((await app.request('GET', `/v1/mailboxes/${box.id}/email/subscription`, { key: stranger.key })).body.error.code).toBe('MAILBOX_NOT_FOUND');
    });

    it('the stock @rails/actioncable client receives email.received as the webhook body', async () => {
      const u = await app.user();
      const box = await mailboxWithAddress(app, u);
      const t = await ticket(app, u.key, box.id);
      const consumer = createConsumer(cableUrl(t));
      const received: any[] = [];
      let gotOne: () => void;
      const arrived = new Promise<void>((r) => (gotOne = r));
      await new Promise<void>((connected) => {
        consumer.subscriptions.create(
          { channel: 'EmailReceivedChannel', account_id: t.account_id, mailbox_id: t.mailbox_id },
          { connected, received: (data: unknown) => (received.push(data), gotOne()) },
        );
      });
      const sent = await sendMail(app, { to: box.address, subject: 'live one', attachments: [{ filename: 'x.txt', content: 'x' }] });
      await arrived;
      consumer.disconnect();
      expect(received[0]).toEqual({
        id: expect.stringMatching(/^evt_/),
        type: 'email.received',
        created_at: expect.any(String),
        data: { account_id: u.accountId, mailbox_id: box.id, email_id: sent.emailIds[0], received_at: expect.any(String), attachment_count: 1 },
      });
    });

    it('speaks the wire protocol: subprotocol, welcome, pings, confirm and reject', async () => {
      const u = await app.user();
      const box = await mailboxWithAddress(app, u);
      const other = await mailboxWithAddress(app, u);
      const t = await ticket(app, u.key, box.id);
      const plain = await app.request('GET', '/cable');
      expect(plain.status).toBe(404);
      expect(plain.body.error.code).toBe('NOT_FOUND');
      const cable = await RawCable.open(cableUrl(t));
      expect(cable.ws.protocol).toBe('actioncable-v1-json');
      expect(await cable.next()).toEqual({ type: 'welcome' });
      const ping = await cable.next((f) => f.type === 'ping');
      expect(ping.message).toEqual(expect.any(Number));
      expect(await cable.subscribe(identifierOf(t, { mailbox_id: other.id }))).toBe('reject_subscription');
      expect(await cable.subscribe(JSON.stringify({ channel: 'OtherChannel' }))).toBe('reject_subscription');
      expect(await cable.subscribe('not json')).toBe('reject_subscription');
      expect(await cable.subscribe(identifierOf(t))).toBe('confirm_subscription');
      // Mail for another mailbox is not pushed here; mail for this one is.
      await sendMail(app, { to: other.address });
      const sent = await sendMail(app, { to: box.address });
      const push = await cable.next((f) => f.identifier && f.message);
      expect(push.identifier).toBe(identifierOf(t));
      expect(push.message.data.email_id).toBe(sent.emailIds[0]);
      cable.close();
    });

    it('tickets are single-use and expire after 60 seconds; bad tickets get disconnect unauthorized', async () => {
      const u = await app.user();
      const box = await mailboxWithAddress(app, u);
      const t = await ticket(app, u.key, box.id);
      const first = await RawCable.open(cableUrl(t));
      expect(await first.next()).toEqual({ type: 'welcome' });
      for (const url of [cableUrl(t), `${t.websocket_url}?email_subscription_token=nope`, t.websocket_url]) {
        const again = await RawCable.open(url);
        expect(await again.next()).toEqual({ type: 'disconnect', reason: 'unauthorized', reconnect: false });
        await again.whenClosed();
      }
      first.close();
      const late = await ticket(app, u.key, box.id);
      clock.offsetMs += 61_000;
      const expired = await RawCable.open(cableUrl(late));
      expect(await expired.next()).toEqual({ type: 'disconnect', reason: 'unauthorized', reconnect: false });
    });

    it('bounds subscriptions per connection, connections per key, command size and command rate', async () => {
      const u = await app.user();
      const box = await mailboxWithAddress(app, u);
      const { cable, t } = await subscribed(app, u.key, box.id);
      for (let i = 1; i < 5; i++) expect(await cable.subscribe(identifierOf(t, { n: i }))).toBe('confirm_subscription');
      expect(await cable.subscribe(identifierOf(t, { n: 5 }))).toBe('reject_subscription');

      const more = [await subscribed(app, u.key, box.id), await subscribed(app, u.key, box.id)];
      const fourth = await RawCable.open(cableUrl(await ticket(app, u.key, box.id)));
      expect(await fourth.next()).toEqual({ type: 'disconnect', reason: 'too_many_connections', reconnect: false });
      await fourth.whenClosed();

      more[0]!.cable.send({ command: 'subscribe', identifier: 'x'.repeat(5000) });
      expect(await more[0]!.cable.next((f) => f.type === 'disconnect')).toEqual({ type: 'disconnect', reason: 'invalid_request', reconnect: false });
      for (let i = 0; i < 40; i++) more[1]!.cable.send({ command: 'unsubscribe', identifier: `{"n":${i}}` });
      expect(await more[1]!.cable.next((f) => f.type === 'disconnect')).toEqual({ type: 'disconnect', reason: 'too_many_requests', reconnect: false });
      cable.close();
      await Promise.all(more.map((m) => m.cable.whenClosed()));
      // Closed connections stop counting: a new one is welcomed.
      await cable.whenClosed();
      const { cable: again } = await subscribed(app, u.key, box.id);
      again.close();
    });

    it('disconnects when the key is revoked or expires, or the mailbox is deleted', async () => {
      const u = await app.user();
      const db = app.started.deps.db;
      for (const loss of ['revoked', 'expired', 'deleted'] as const) {
        const key = await app.key(u);
        const box = await mailboxWithAddress(app, u);
        const { cable } = await subscribed(app, key, box.id);
        const keyId = (await db.selectFrom('api_keys').select('id').where('token_hash', '=', sha256Hex(key)).executeTakeFirstOrThrow()).id;
        if (loss === 'revoked') await db.updateTable('api_keys').set({ revoked_at: new Date().toISOString() }).where('id', '=', keyId).execute();
        if (loss === 'expired') await db.updateTable('api_keys').set({ expires_at: new Date(Date.now() + clock.offsetMs - 1000).toISOString() }).where('id', '=', keyId).execute();
        if (loss === 'deleted') {
          expect((await app.request('POST', `/v1/mailboxes/${box.id}/archive`, { key: u.key })).status).toBe(200);
          expect((await app.request('DELETE', `/v1/mailboxes/${box.id}`, { key: u.key, body: { confirmation: `DELETE ${box.id}` } })).status).toBe(200);
        }
        expect(await cable.next((f) => f.type === 'disconnect'), loss).toEqual({ type: 'disconnect', reason: 'unauthorized', reconnect: false });
        await cable.whenClosed();
      }
    });

    it('pushes nothing for a rolled-back transaction', async () => {
      const u = await app.user();
      const box = await mailboxWithAddress(app, u);
      const { cable } = await subscribed(app, u.key, box.id);
      await rolledBackThenCommitted(app, u.accountId, box.id);
      const push = await cable.next((f) => f.identifier && f.message);
      expect(push.message.data.email_id).toBe('eml_committed');
      cable.close();
    });
  });
}
