import { expect, it } from 'vitest';
import net from 'node:net';
import { once } from 'node:events';
import { describeEachDatabase, type TestApp } from './harness.ts';
import { mailboxWithAddress, sendMail } from './smtp-helpers.ts';

// The greeting pause is ours to set (CUBBY_SMTP_GREETING_DELAY_MS): by default the server greets at
// once (smtp-server's fixed 100 ms pause capped one-message-per-connection delivery), and with a
// pause a client that talks before the greeting is refused as an early talker.

/** Everything the server says on a fresh connection until it closes or `until` matches. */
async function converse(app: TestApp, opts: { sendFirst?: string; until: RegExp }): Promise<string> {
  const socket = net.connect(app.started.ports.smtp!, '127.0.0.1');
  await once(socket, 'connect');
  if (opts.sendFirst) socket.write(opts.sendFirst);
  let text = '';
  await new Promise<void>((resolve) => {
    socket.on('data', (d) => {
      text += d.toString('latin1');
      if (opts.until.test(text)) resolve();
    });
    socket.on('close', () => resolve());
  });
  socket.destroy();
  return text;
}

describeEachDatabase('SMTP greeting without a pause (default)', (app) => {
  it('greets at once, answers a client that pipelines EHLO right after connecting, and stores mail', async () => {
    const user = await app().user();
    const box = await mailboxWithAddress(app(), user);
    const early = await converse(app(), { sendFirst: 'EHLO early.example\r\n', until: /\r\n250 [^\r\n]*\r\n$/ });
    expect(early).toMatch(/^220 /);
    expect(early).not.toMatch(/talk too soon/);
    expect(early).toMatch(/250[ -]/);
    const sent = await sendMail(app(), { to: box.address, subject: 'greeted at once' });
    expect(sent.response).toMatch(/^250 /);
  });
});

describeEachDatabase(
  'SMTP greeting with CUBBY_SMTP_GREETING_DELAY_MS',
  (app) => {
    it('refuses a client that talks before the greeting with 421, and serves one that waits', async () => {
      const early = await converse(app(), { sendFirst: 'EHLO early.example\r\n', until: /421 [^\r\n]*\r\n/ });
      expect(early).toMatch(/421 [^\r\n]*talk too soon/i);
      const user = await app().user();
      const box = await mailboxWithAddress(app(), user);
      const sent = await sendMail(app(), { to: box.address, subject: 'waited for the greeting' });
      expect(sent.response).toMatch(/^250 /);
    });
  },
  { CUBBY_SMTP_GREETING_DELAY_MS: '300' },
);
