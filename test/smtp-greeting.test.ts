import { expect, it } from 'vitest';
import net from 'node:net';
import { once } from 'node:events';
import { describeEachDatabase, type TestApp } from './harness.ts';
import { mailboxWithAddress, sendMail } from './smtp-helpers.ts';
import { closeSmtpServer, createSmtpServer } from '../src/inbound/smtp-server.ts';

// The greeting pause is ours to set (CUBBY_SMTP_GREETING_DELAY_MS): by default the server greets at
// once (smtp-server's fixed 100 ms pause capped one-message-per-connection delivery), and with a
// pause a client that talks before the greeting is refused as an early talker.

/** Everything the server says on a fresh connection until it closes or `until` matches. */
async function converse(app: TestApp | number, opts: { sendFirst?: string; until: RegExp }): Promise<string> {
  const socket = net.connect(typeof app === 'number' ? app : app.started.ports.smtp!, '127.0.0.1');
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

  it('greets a connection in the turn of the event loop that accepted it, before work queued behind it (a group commit) runs', async () => {
    // A second server of the app, built as the app builds its own, so that its listener can be watched.
    const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };
    const server = createSmtpServer(app().started.deps, { hostname: 'greeting.test', resolver: async () => [], log: quiet });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
    try {
      // Queued before the server hands the connection on: with a hand-over through setImmediate
      // (smtp-server's own) the greeting would come after this, when nothing has been written yet.
      let writtenWhenQueuedWorkRan = -1;
      server.server.prependListener('connection', (socket: net.Socket) => setImmediate(() => (writtenWhenQueuedWorkRan = socket.bytesWritten)));
      const port = (server.server.address() as net.AddressInfo).port;
      const text = await converse(port, { until: /^220 [^\r\n]*\r\n/ });
      expect(text).toMatch(/^220 greeting\.test ESMTP/);
      expect(writtenWhenQueuedWorkRan).toBe(Buffer.byteLength(text));
    } finally {
      await closeSmtpServer(server, 1000);
    }
  });
  it('gives each session its own id and the address the client connected to, on a listener bound to one address and on a wildcard one', async () => {
    const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };
    for (const host of ['127.0.0.1', '0.0.0.0']) {
      const server = createSmtpServer(app().started.deps, { hostname: 'greeting.test', resolver: async () => [], log: quiet });
      const sessions: { id: string; localAddress: string; localPort: number; remoteAddress: string }[] = [];
      const onConnect = server.onConnect.bind(server);
      server.onConnect = (session, cb) => {
        sessions.push({ id: session.id, localAddress: session.localAddress, localPort: session.localPort, remoteAddress: session.remoteAddress });
        onConnect(session, cb);
      };
      await new Promise<void>((resolve) => server.listen(0, host, () => resolve()));
      try {
        const port = (server.server.address() as net.AddressInfo).port;
        for (let i = 0; i < 3; i++) expect(await converse(port, { until: /^220 [^\r\n]*\r\n/ })).toMatch(/^220 /);
        expect(sessions).toHaveLength(3);
        for (const s of sessions) {
          expect(s.id).toMatch(/^[0-9a-v]{16}$/);
          expect(s.localAddress).toBe('127.0.0.1');
          expect(s.remoteAddress).toBe('127.0.0.1');
          expect(s.localPort).toBe(port);
        }
        expect(new Set(sessions.map((s) => s.id)).size).toBe(3);
      } finally {
        await closeSmtpServer(server, 1000);
      }
    }
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
