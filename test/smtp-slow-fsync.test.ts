import { durableGate } from './durable-gate.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DATABASES, startTestApp, type TestApp } from './harness.ts';
import { mailboxWithAddress, sendMail, smtpSession } from './smtp-helpers.ts';

// A commit waits for the disk (the WAL fsync on SQLite) off the event loop, and the group commit
// goes on with the next group meanwhile: a slow fsync holds back only the 250s it covers. The
// app's `beforeDurable` hook stands for the slow fsync: it is awaited before a commit is made
// durable, and here it holds the first message's commit until the test lets it go.

for (const kind of DATABASES) {
  describe(`SMTP while a commit waits for a slow fsync [${kind}]`, () => {
    let app: TestApp;
    const gate = durableGate();
    beforeAll(async () => {
      app = await startTestApp(kind, {}, { beforeDurable: gate.beforeDurable });
    });
    afterAll(async () => {
      await app?.stop();
    });

    it('greets and serves other sessions, and accepts their mail, while the first message waits; the first is answered 250 once the disk is done', async () => {
      const user = await app.user();
      const box = await mailboxWithAddress(app, user);
      const held = gate.hold();

      const slow = await smtpSession(app);
      expect(slow.greeting).toMatch(/^220 /);
      expect(await slow.send('EHLO slow.example')).toMatch(/^250[ -]/);
      expect(await slow.send('MAIL FROM:<slow@example.com>')).toMatch(/^250 /);
      expect(await slow.send(`RCPT TO:<${box.address}>`)).toMatch(/^250 /);
      expect(await slow.send('DATA')).toMatch(/^354 /);
      slow.write(`From: slow@example.com\r\nTo: ${box.address}\r\nSubject: waits for the disk\r\n\r\nslow\r\n.\r\n`);
      let slowReply: string | null = null;
      const slowAnswered = slow.reply().then((r) => (slowReply = r));
      // Committed, and now waiting for the (held) fsync.
      await held.entered;

      const other = await smtpSession(app);
      expect(other.greeting).toMatch(/^220 /);
      expect(await other.send('EHLO other.example')).toMatch(/^250[ -]/);
      other.close();
      const sent = await sendMail(app, { to: box.address, subject: 'not held back' });
      expect(sent.response).toMatch(/^250 /);
      expect(sent.emailIds).toHaveLength(1);
      expect(slowReply).toBeNull();

      held.release();
      await slowAnswered;
      expect(slowReply).toMatch(/^250 .*eml_/);
      slow.close();
      const mailbox = await app.request('GET', `/v1/mailboxes/${box.id}`, { key: user.key });
      expect(mailbox.body.data.mailbox.email.message_count).toBe(2);
    });
  });
}
