import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { DATABASES } from './harness.ts';
import { adminUserAndKey, serveEnv, startServe, type ServeProcess } from './serve-process.ts';
import { RawSmtp } from './smtp-raw-client.ts';

// SIGTERM to a real `cubby serve` with mail in flight: the listeners close at once, a session
// idle mid-transaction is told 421, DATA in progress is stored and answered 250, the process
// exits 0; after a restart the message is there exactly once.

const PG_URL = process.env.CUBBY_TEST_POSTGRES_URL;

function refused(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    s.once('connect', () => {
      s.destroy();
      resolve(false);
    });
    s.once('error', () => resolve(true));
  });
}

for (const kind of DATABASES) {
  describe(`graceful shutdown [${kind}]`, () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cubby-shutdown-'));
    const schema = `t_shutdown_${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;
    const env = serveEnv(dataDir, {
      CUBBY_LOG_LEVEL: 'info',
      CUBBY_SHUTDOWN_GRACE_S: '20',
      ...(kind === 'postgres' ? { CUBBY_DATABASE_URL: PG_URL!, CUBBY_DATABASE_SCHEMA: schema } : {}),
    });
    let server: ServeProcess | undefined;

    afterAll(async () => {
      await server?.stop();
      fs.rmSync(dataDir, { recursive: true, force: true });
      if (kind === 'postgres') {
        const c = new pg.Client({ connectionString: PG_URL });
        await c.connect();
        await c.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
        await c.end();
      }
    });

    it('finishes DATA in progress, answers 421 to idle sessions, refuses new connections, exits 0, and loses or doubles nothing', async () => {
      server = await startServe(env);
      const { key } = await adminUserAndKey(env);
      const auth = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
      const created = await fetch(`${server.base}/v1/mailboxes`, { method: 'POST', headers: auth, body: JSON.stringify({ mailbox: { title: 'Shutdown' } }) });
      const mailbox = (await created.json()).data.mailbox;
      const smtpPort = server.smtpPort!;

      // In DATA: headers and half the body sent when SIGTERM arrives.
      const inData = await RawSmtp.open(smtpPort);
      expect((await inData.command('MAIL FROM:<sender@example.org>')).code).toBe(250);
      expect((await inData.command(`RCPT TO:<${mailbox.email.address}>`)).code).toBe(250);
      expect((await inData.command('DATA')).code).toBe(354);
      inData.write(`From: sender@example.org\r\nTo: ${mailbox.email.address}\r\nSubject: In flight\r\nMessage-ID: <inflight@example.org>\r\n\r\nFirst half, `);
      // Idle in the middle of a transaction (after RCPT).
      const idle = await RawSmtp.open(smtpPort);
      expect((await idle.command('MAIL FROM:<other@example.org>')).code).toBe(250);
      expect((await idle.command(`RCPT TO:<${mailbox.email.address}>`)).code).toBe(250);

      server.signal('SIGTERM');
      // The idle session hears 421 without asking: the shutdown has begun and the listener is closed.
      expect((await idle.reply()).code).toBe(421);
      expect(await refused(smtpPort)).toBe(true);
      expect(await refused(Number(new URL(server.base).port))).toBe(true);

      inData.write('second half.\r\n.\r\n');
      const stored = await inData.reply();
      expect(stored.code, stored.text).toBe(250);
      const emailId = /eml_[A-Za-z0-9]+/.exec(stored.text)![0];
      expect(await server.exited).toEqual({ code: 0, signal: null });

      // Restarted on the same data: the message is there once; the idle session's is not.
      server = await startServe(env);
      const list = await fetch(`${server.base}/v1/mailboxes/${mailbox.id}/emails`, { headers: auth });
      const emails = (await list.json()).data.emails;
      expect(emails.map((e: { id: string }) => e.id)).toEqual([emailId]);
    });
  });
}
