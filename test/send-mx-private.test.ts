import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DATABASES, startTestApp, type TestApp } from './harness.ts';
import { mailboxWithAddress, sendMail } from './smtp-helpers.ts';
import { drain, readEmail, sent, startSink, zone, type Sink } from './outbound-helpers.ts';

// Regression: direct MX delivery dialled whatever address a recipient domain's DNS named, so a
// tenant who owns a domain (and mails its own mailbox from it to become a "correspondent") could
// point the MX at 127.0.0.1, 10.x or the cloud metadata address and make the service open SMTP
// sessions inside our network, reading reachability back from delivery statuses. With the default
// configuration (CUBBY_SMTP_ALLOW_PRIVATE_MX unset) such hosts are ignored and nothing is dialled.

const SPF = { TXT: [['v=spf1 ip4:127.0.0.1 -all']] };

for (const kind of DATABASES) {
  describe(`MX hosts on non-public addresses are never dialled [${kind}]`, () => {
    let app: TestApp;
    let mx: Sink;
    const DNS = zone({
      'loop.test': { ...SPF, MX: [{ exchange: 'mx.loop.test', priority: 10 }] },
      'mx.loop.test': { A: ['127.0.0.1'] },
      'inside.test': { ...SPF, MX: [{ exchange: 'a.inside.test', priority: 10 }, { exchange: 'b.inside.test', priority: 20 }, { exchange: 'c.inside.test', priority: 30 }] },
      'a.inside.test': { A: ['10.1.2.3'] },
      'b.inside.test': { A: ['169.254.169.254'] },
      'c.inside.test': { AAAA: ['::ffff:127.0.0.1'] },
      // No MX: the domain itself is the mail host (RFC 5321 §5.1), and it is loopback.
      'implicit.test': { ...SPF, A: ['127.0.0.1'] },
    });

    beforeAll(async () => {
      mx = await startSink();
      // mxPort points at the sink on 127.0.0.1: were the address dialled, the sink would get the mail.
      app = await startTestApp(kind, {}, { resolver: DNS, mxPort: mx.port });
    });
    afterAll(async () => {
      await app?.stop();
      await mx?.close();
    });

    it('fails the recipient with a reply naming the ignored address, and the host behind it receives nothing', async () => {
      for (const [from, ignored] of [
        ['eve@loop.test', /127\.0\.0\.1 \(loopback\)/],
        ['eve@inside.test', /10\.1\.2\.3 \(private\)/],
        ['eve@implicit.test', /127\.0\.0\.1 \(loopback\)/],
      ] as const) {
        const user = await app.user({ plan: 'paid' });
        const box = await mailboxWithAddress(app, user, 'Desk');
        const r = await sendMail(app, { from, to: box.address, subject: 'Hi' });
        expect(r.emailIds).toHaveLength(1);
        const reply = await sent(app, user.key, box.id, { in_reply_to: r.emailIds[0], text: 'Answer' });
        await drain(app);
        expect((await readEmail(app, user.key, box.id, reply.id)).delivery).toEqual({ status: 'failed', recipients: { [from]: 'failed' } });
        const row = await app.started.deps.db.selectFrom('outbound_recipients').selectAll().where('message_id', '=', reply.id).executeTakeFirstOrThrow();
        expect(row.last_reply).toMatch(/non-public addresses/);
        expect(row.last_reply).toMatch(ignored);
        // Failed at once, not deferred for four days of retries.
        expect(row.attempts).toBe(1);
      }
      expect(mx.messages).toHaveLength(0);
    });

    it('CUBBY_SMTP_ALLOW_PRIVATE_MX=true (tests, closed networks) dials them', async () => {
      const open = await startTestApp(kind, { CUBBY_SMTP_ALLOW_PRIVATE_MX: 'true' }, { resolver: DNS, mxPort: mx.port });
      try {
        const user = await open.user({ plan: 'paid' });
        const box = await mailboxWithAddress(open, user, 'Desk');
        const r = await sendMail(open, { from: 'eve@loop.test', to: box.address, subject: 'Hi' });
        const reply = await sent(open, user.key, box.id, { in_reply_to: r.emailIds[0], text: 'Answer' });
        await drain(open);
        expect((await readEmail(open, user.key, box.id, reply.id)).delivery.status).toBe('sent');
        expect(mx.messages.map((m) => m.rcptTo)).toEqual([['eve@loop.test']]);
      } finally {
        await open.stop();
      }
    });
  });
}
