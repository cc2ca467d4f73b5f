import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DATABASES, startTestApp, type TestApp } from './harness.ts';
import { mailboxWithAddress, sendMail } from './smtp-helpers.ts';
import { drain, readEmail, sent, smtpReply, startSink, zone, type Sink } from './outbound-helpers.ts';
import { authenticateMessage } from '../src/inbound/authenticate.ts';
import { createDkimKey } from '../src/outbound/dkim.ts';
import { sendSystemMail } from '../src/outbound/system-mail.ts';
import { DELIVER_TASK } from '../src/outbound/queue.ts';

// Delivery to the outside world: a real SMTP server (smtp-server) is the recipient's MX, found
// through DNS records served by the test; DKIM signatures are verified with the same DNS.

for (const kind of DATABASES) {
  describe(`delivery to MX hosts [${kind}]`, () => {
    let app: TestApp;
    let mx: Sink;
    let offsetMs = 0;
    const DNS = zone({
      'partner.test': { TXT: [['v=spf1 ip4:127.0.0.1 -all']], MX: [{ exchange: 'mx.partner.test', priority: 10 }, { exchange: 'backup.partner.test', priority: 20 }] },
      // The preferred host does not answer; the backup is our sink.
      'mx.partner.test': { A: ['127.0.0.9'] },
      'backup.partner.test': { A: ['127.0.0.1'] },
      'nomx.test': { TXT: [['v=spf1 ip4:127.0.0.1 -all']] },
      'nullmx.test': { TXT: [['v=spf1 ip4:127.0.0.1 -all']], MX: [{ exchange: '', priority: 0 }] },
    });

    beforeAll(async () => {
      mx = await startSink();
      // The sink listens on 127.0.0.1: allow MX hosts on non-public addresses (test/send-mx-private.test.ts checks the default).
      app = await startTestApp(kind, { CUBBY_SMTP_ALLOW_PRIVATE_MX: 'true' }, { resolver: DNS, mxPort: mx.port, now: () => new Date(Date.now() + offsetMs) });
      const record = await createDkimKey(app.started.deps, 'mail.localhost', 'cubby1');
      DNS.records[record.name] = { TXT: [[record.value]] };
    });
    afterAll(async () => {
      await app?.stop();
      await mx?.close();
    });

    /** A paid mailbox that `from` has emailed (SPF pass), so it may write back. */
    async function correspondent(from: string) {
      const user = await app.user({ plan: 'paid' });
      const box = await mailboxWithAddress(app, user, 'Support');
      const r = await sendMail(app, { from, to: box.address, subject: 'Question' });
      expect(r.emailIds).toHaveLength(1);
      return { user, box, received: r.emailIds[0]! };
    }

    async function recipientRow(emailId: string) {
      return app.started.deps.db.selectFrom('outbound_recipients').selectAll().where('message_id', '=', emailId).executeTakeFirstOrThrow();
    }

    it('delivers a reply to the MX (skipping a host that does not answer), DKIM-signed, and records the remote reply', async () => {
      mx.respond = () => null;
      const { user, box, received } = await correspondent('alice@partner.test');
      const before = mx.messages.length;
      const reply = await sent(app, user.key, box.id, { in_reply_to: received, text: 'Answer' });
      expect(reply.delivery).toEqual({ status: 'queued', recipients: { 'alice@partner.test': 'queued' } });
      await drain(app);
      expect(mx.messages.length).toBe(before + 1);
      const m = mx.messages.at(-1)!;
      expect(m.mailFrom).toBe(box.address);
      expect(m.rcptTo).toEqual(['alice@partner.test']);
      expect(m.raw.toString()).toContain('Subject: Re: Question');
      const auth = await authenticateMessage({ raw: m.raw, clientIp: '127.0.0.1', helo: 'mail.localhost', mailFrom: box.address, mta: 'mx.partner.test', resolver: DNS });
      expect(auth.dkim[0]).toMatchObject({ result: 'pass', domain: 'mail.localhost', selector: 'cubby1' });

      expect((await readEmail(app, user.key, box.id, reply.id)).delivery).toEqual({ status: 'sent', recipients: { 'alice@partner.test': 'sent' } });
      const row = await recipientRow(reply.id);
      expect(row).toMatchObject({ status: 'sent', route: 'mx:backup.partner.test', attempts: 1 });
      expect(row.last_reply).toMatch(/^250 .*SINK/);
    });

    it('a temporary failure is deferred and retried with backoff, then delivered once', async () => {
      const { user, box, received } = await correspondent('bob@partner.test');
      let calls = 0;
      mx.respond = () => (calls++ === 0 ? smtpReply(451, '4.3.0 try again later') : null);
      const before = mx.messages.length;
      const reply = await sent(app, user.key, box.id, { in_reply_to: received, text: 'Answer' });
      await drain(app);
      expect((await readEmail(app, user.key, box.id, reply.id)).delivery).toEqual({ status: 'deferred', recipients: { 'bob@partner.test': 'deferred' } });
      expect(await recipientRow(reply.id)).toMatchObject({ status: 'deferred', attempts: 1, last_reply: '451 4.3.0 try again later' });
      expect(mx.messages.length).toBe(before);

      // Nothing is due before the backoff; after it, the retry delivers.
      offsetMs += 10 * 60_000;
      await drain(app);
      expect(calls).toBe(2);
      expect(mx.messages.length).toBe(before + 1);
      expect((await readEmail(app, user.key, box.id, reply.id)).delivery.status).toBe('sent');
      expect(await recipientRow(reply.id)).toMatchObject({ status: 'sent', attempts: 2 });
      mx.respond = () => null;
    });

    it('a permanent refusal bounces; a domain without a mail server fails; the replies are kept', async () => {
      const { user, box, received } = await correspondent('gone@partner.test');
      mx.rcpt = (a) => (a === 'gone@partner.test' ? smtpReply(550, '5.1.1 no such user here') : null);
      const bounced = await sent(app, user.key, box.id, { in_reply_to: received, text: 'Hello?' });
      await drain(app);
      mx.rcpt = () => null;
      expect((await readEmail(app, user.key, box.id, bounced.id)).delivery).toEqual({ status: 'bounced', recipients: { 'gone@partner.test': 'bounced' } });
      expect((await recipientRow(bounced.id)).last_reply).toBe('550 5.1.1 no such user here');

      for (const [from, why] of [['carol@nomx.test', /has no mail server/], ['dave@nullmx.test', /accepts no mail/]] as const) {
        const c = await correspondent(from);
        const e = await sent(app, c.user.key, c.box.id, { in_reply_to: c.received, text: 'Hello?' });
        await drain(app);
        expect((await readEmail(app, c.user.key, c.box.id, e.id)).delivery.status).toBe('failed');
        expect((await recipientRow(e.id)).last_reply).toMatch(why);
      }
    });

    it('several recipients: each has its own status; own mailboxes are stored directly, the rest goes to the MX', async () => {
      const { user, box } = await correspondent('erin@partner.test');
      const sibling = await mailboxWithAddress(app, user);
      await sendMail(app, { from: 'frank@partner.test', to: box.address, subject: 'Hi' });
      mx.rcpt = (a) => (a === 'frank@partner.test' ? smtpReply(550, '5.1.1 unknown') : null);
      const before = mx.messages.length;
      const e = await sent(app, user.key, box.id, { to: ['erin@partner.test', sibling.address], cc: ['frank@partner.test'], subject: 'Update', text: 'News' });
      await drain(app);
      mx.rcpt = () => null;
      expect((await readEmail(app, user.key, box.id, e.id)).delivery).toEqual({
        status: 'partially_sent',
        recipients: { 'erin@partner.test': 'sent', [sibling.address]: 'sent', 'frank@partner.test': 'bounced' },
      });
      // One copy per outside recipient; the sibling's copy never left the service.
      expect(mx.messages.length).toBe(before + 1);
      expect(mx.messages.at(-1)!.rcptTo).toEqual(['erin@partner.test']);
      const local = await app.started.deps.db.selectFrom('outbound_recipients').select(['route', 'last_reply']).where('message_id', '=', e.id).where('address', '=', sibling.address).executeTakeFirstOrThrow();
      expect(local.route).toBe('local');
    });

    it('a delivery interrupted after storing locally but before recording it is not stored twice', async () => {
      const user = await app.user();
      const a = await mailboxWithAddress(app, user);
      const b = await mailboxWithAddress(app, user);
      const e = await sent(app, user.key, a.id, { to: [b.address], subject: 'Once', text: 'Only once' });
      await drain(app);
      // The state a crash between the two transactions leaves: stored in b, still queued here.
      const db = app.started.deps.db;
      await db.updateTable('outbound_recipients').set({ status: 'queued', last_reply: null }).where('message_id', '=', e.id).execute();
      await db.transaction().execute((trx) => app.started.deps.jobs.enqueue(trx, DELIVER_TASK, { message_id: e.id, address: b.address }));
      await drain(app);
      const inB = await db.selectFrom('emails').select('id').where('mailbox_id', '=', b.id).where('direction', '=', 'received').execute();
      expect(inB).toHaveLength(1);
      expect((await recipientRow(e.id)).last_reply).toMatch(/already delivered/);
    });

    it('system mail reaches our own mailboxes through the inbound pipeline and outside addresses through the MX; its sealed body is dropped once delivered', async () => {
      const user = await app.user();
      const box = await mailboxWithAddress(app, user);
      const before = mx.messages.length;
      await sendSystemMail(app.started.deps, { to: box.address, subject: 'Your sign-in code', text: 'Code: 123456' });
      await sendSystemMail(app.started.deps, { to: 'Grace@Partner.test', subject: 'Site access code', text: 'Code: 654321', html: '<b>654321</b>' });
      await drain(app);
      const got = await app.started.deps.db.selectFrom('emails').selectAll().where('mailbox_id', '=', box.id).executeTakeFirstOrThrow();
      expect(got.subject).toBe('Your sign-in code');
      expect(got.body_text).toContain('123456');
      expect(JSON.parse(got.from_addresses)).toEqual([{ address: 'no-reply@mail.localhost', name: 'Cubby' }]);
      expect(mx.messages.length).toBe(before + 1);
      expect(mx.messages.at(-1)!.rcptTo).toEqual(['grace@partner.test']);
      const sys = await app.started.deps.db.selectFrom('outbound_messages').select(['sealed_raw']).where('kind', '=', 'system').execute();
      expect(sys.length).toBeGreaterThanOrEqual(2);
      expect(sys.every((s) => s.sealed_raw === null)).toBe(true);
    });
  });

  describe(`delivery through a relay [${kind}]`, () => {
    let app: TestApp;
    let relay: Sink;
    beforeAll(async () => {
      relay = await startSink({ auth: { user: 'cubby@relay', pass: 'relay secret' } });
      app = await startTestApp(kind, { CUBBY_SMTP_RELAY_URL: relay.url }, { resolver: zone({}) });
    });
    afterAll(async () => {
      await app?.stop();
      await relay?.close();
    });

    it('hands outside mail to CUBBY_SMTP_RELAY_URL with its credentials; own mailboxes stay local', async () => {
      const user = await app.user();
      const a = await mailboxWithAddress(app, user, 'Relay Desk');
      const b = await mailboxWithAddress(app, user);
      const e = await sent(app, user.key, a.id, { to: [user.email], cc: [b.address], subject: 'Via relay', text: 'Hello' });
      await drain(app);
      expect(relay.messages).toHaveLength(1);
      expect(relay.messages[0]).toMatchObject({ mailFrom: a.address, rcptTo: [user.email.toLowerCase()], user: 'cubby@relay' });
      expect(relay.messages[0]!.raw.toString()).toMatch(/^From: Relay Desk <[^>]+>/m);
      expect((await readEmail(app, user.key, a.id, e.id)).delivery).toEqual({ status: 'sent', recipients: { [user.email.toLowerCase()]: 'sent', [b.address]: 'sent' } });
      const row = await app.started.deps.db.selectFrom('outbound_recipients').selectAll().where('message_id', '=', e.id).where('address', '=', user.email.toLowerCase()).executeTakeFirstOrThrow();
      expect(row.route).toBe('relay');
    });
  });
}
