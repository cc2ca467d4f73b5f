import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DATABASES, startTestApp, type TestApp } from './harness.ts';
import { mailboxWithAddress } from './smtp-helpers.ts';
import { drain, listEmails, readEmail, sent, zone } from './outbound-helpers.ts';

// Sending from a mailbox (POST /v1/mailboxes/{id}/emails) between mailboxes of this service:
// stored under _email/ as `sent`, delivered through the inbound pipeline, replies thread.

for (const kind of DATABASES) {
  describe(`sending between mailboxes [${kind}]`, () => {
    let app: TestApp;
    beforeAll(async () => {
      app = await startTestApp(kind, {}, { resolver: zone({}) });
    });
    afterAll(async () => {
      await app?.stop();
    });

    it('a reply round trip between two mailboxes threads into one conversation on both sides', async () => {
      const user = await app.user({ plan: 'free' });
      const a = await mailboxWithAddress(app, user, 'Alpha Desk');
      const b = await mailboxWithAddress(app, user, 'Beta Desk');

      const first = await sent(app, user.key, a.id, { to: [b.address], subject: 'Quarterly numbers', text: 'Here they are.' });
      expect(first.direction).toBe('sent');
      expect(first.delivery).toEqual({ status: 'queued', recipients: { [b.address]: 'queued' } });
      expect(first.from_addresses).toEqual([{ address: a.address, name: 'Alpha Desk' }]);
      expect(first.to_addresses).toEqual([{ address: b.address, name: null }]);
      expect(first.message_id).toMatch(new RegExp(`@${a.address.split('@')[1]!.replace(/\./g, '\\.')}$`));
      expect(first.subject).toBe('Quarterly numbers');
      await drain(app);

      expect((await readEmail(app, user.key, a.id, first.id)).delivery).toEqual({ status: 'sent', recipients: { [b.address]: 'sent' } });
      const inB = await listEmails(app, user.key, b.id);
      expect(inB).toHaveLength(1);
      expect(inB[0].message_id).toBe(first.message_id);
      expect(inB[0].from_addresses).toEqual([{ address: a.address, name: 'Alpha Desk' }]);

      // B answers without `to`: the original sender passed (internal) authentication.
      const reply = await sent(app, user.key, b.id, { in_reply_to: inB[0].id, text: 'Thanks!' });
      expect(reply.subject).toBe('Re: Quarterly numbers');
      expect(reply.to_addresses).toEqual([{ address: a.address, name: null }]);
      expect(reply.in_reply_to).toEqual([first.message_id]);
      expect(reply.references).toEqual([first.message_id]);
      expect(reply.conversation_id).toBe(inB[0].conversation_id);
      await drain(app);

      const inA = await listEmails(app, user.key, a.id, { direction: 'all', order: 'asc' });
      expect(inA.map((e) => [e.direction, e.subject])).toEqual([
        ['sent', 'Quarterly numbers'],
        ['received', 'Re: Quarterly numbers'],
      ]);
      expect(inA[1].conversation_id).toBe(first.conversation_id);
      expect(inA[1].in_reply_to).toEqual([first.message_id]);
      expect((await listEmails(app, user.key, a.id, { direction: 'sent' })).map((e) => e.id)).toEqual([first.id]);

      // And back again: a reply to the reply keeps the whole chain in References.
      const again = await sent(app, user.key, a.id, { in_reply_to: inA[1].id, text: 'You are welcome.' });
      expect(again.subject).toBe('Re: Quarterly numbers');
      expect(again.references).toEqual([first.message_id, reply.message_id]);
      expect(again.conversation_id).toBe(first.conversation_id);
      await drain(app);
      const inB2 = await listEmails(app, user.key, b.id, { direction: 'all', order: 'asc' });
      expect(inB2).toHaveLength(3);
      expect(new Set(inB2.map((e) => e.conversation_id)).size).toBe(1);
    });
  });
}
