import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DATABASES } from './harness.ts';
import { adminUserAndKey, serveEnv, startServe, type ServeProcess } from './serve-process.ts';
import { startSink, type Sink } from './outbound-helpers.ts';
import { openDatabase } from '../src/db/database.ts';

// Exactly-once delivery across crashes of `cubby serve` (SIGKILL): a send accepted (202) by a server
// that dies before delivering is delivered once after a restart; a server killed in the middle of the
// relay's DATA (before its 250) resends after the restart, and the relay has accepted it once.

const PG = process.env.CUBBY_TEST_POSTGRES_URL;

async function api(base: string, key: string, method: string, url: string, body?: unknown) {
  const res = await fetch(`${base}${url}`, { method, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', accept: 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
  return { status: res.status, body: (await res.json()) as any };
}

async function kill9(s: ServeProcess): Promise<void> {
  process.kill(s.pid, 'SIGKILL');
  await s.stop();
}

/** Reads the email until its delivery is final. Across processes there is no event to await: poll. */
async function finalDelivery(base: string, key: string, mailboxId: string, emailId: string) {
  for (;;) {
    const res = await api(base, key, 'GET', `/v1/mailboxes/${mailboxId}/emails/${emailId}`);
    expect(res.status).toBe(200);
    const d = res.body.data.email.delivery;
    if (!['queued', 'deferred'].includes(d.status)) return d;
    await new Promise((r) => setTimeout(r, 50));
  }
}

for (const kind of DATABASES) {
  describe(`sending survives a crash of cubby serve [${kind}]`, () => {
    let relay: Sink;
    let dataDir: string;
    let env: Record<string, string>;
    const schema = `t_send_${randomBytes(4).toString('hex')}`;
    let user: { email: string; key: string };

    beforeAll(async () => {
      relay = await startSink();
      dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cubby-send-crash-'));
      env = serveEnv(dataDir, { CUBBY_SMTP_RELAY_URL: relay.url, ...(kind === 'postgres' ? { CUBBY_DATABASE_URL: PG!, CUBBY_DATABASE_SCHEMA: schema } : {}) });
      user = await adminUserAndKey(env, 'free');
    }, 120_000);
    afterAll(async () => {
      await relay?.close();
      fs.rmSync(dataDir, { recursive: true, force: true });
      if (kind === 'postgres') {
        const c = new pg.Client({ connectionString: PG });
        await c.connect();
        await c.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
        await c.end();
      }
    });

    it('accepted, then killed before the worker ran: delivered exactly once after restart', async () => {
      const noWorker = await startServe({ ...env, CUBBY_ROLES: 'api,smtp' });
      const box = await api(noWorker.base, user.key, 'POST', '/v1/mailboxes', { mailbox: { title: 'Crash Desk' } });
      expect(box.status).toBe(201);
      const mailboxId = box.body.data.mailbox.id;
      const res = await api(noWorker.base, user.key, 'POST', `/v1/mailboxes/${mailboxId}/emails`, { to: [user.email], subject: 'Before the crash', text: 'Deliver me once.' });
      expect(res.status).toBe(202);
      expect(res.body.data.email.delivery.status).toBe('queued');
      await kill9(noWorker);
      expect(relay.messages).toHaveLength(0);

      const restarted = await startServe(env);
      try {
        await relay.waitFor(1);
        const d = await finalDelivery(restarted.base, user.key, mailboxId, res.body.data.email.id);
        expect(d).toEqual({ status: 'sent', recipients: { [user.email]: 'sent' } });
        expect(relay.messages).toHaveLength(1);
        expect(relay.messages[0]!.raw.toString()).toContain('Subject: Before the crash');
      } finally {
        await restarted.stop();
      }
    }, 180_000);

    it('killed during the relay transaction, before its 250: resent after restart, accepted once', async () => {
      const before = relay.messages.length;
      relay.respond = (_m, i) => (i === before ? 'hold' : null);
      const first = await startServe(env);
      const box = await api(first.base, user.key, 'POST', '/v1/mailboxes', { mailbox: { title: 'Mid-flight Desk' } });
      const mailboxId = box.body.data.mailbox.id;
      const res = await api(first.base, user.key, 'POST', `/v1/mailboxes/${mailboxId}/emails`, { to: [user.email], subject: 'Mid-flight', text: 'Resend me.' });
      expect(res.status).toBe(202);
      await relay.waitFor(before + 1); // the relay has the whole message but has not answered
      await kill9(first);

      // The dead worker's lease would run out in two minutes; let that time pass in the database.
      const database = await openDatabase(env.CUBBY_DATABASE_URL ?? `sqlite:${path.join(dataDir, 'cubby.db')}`, kind === 'postgres' ? schema : undefined);
      try {
        const state = await database.db.selectFrom('outbound_recipients').select(['status']).where('message_id', '=', res.body.data.email.id).executeTakeFirstOrThrow();
        expect(state.status).toBe('sending');
        await database.db.updateTable('jobs').set({ locked_until: new Date(0).toISOString() }).where('task', '=', 'outbound.deliver').where('status', '=', 'running').execute();
      } finally {
        await database.close();
      }

      const restarted = await startServe(env);
      try {
        const d = await finalDelivery(restarted.base, user.key, mailboxId, res.body.data.email.id);
        expect(d.status).toBe('sent');
        const accepted = relay.messages.slice(before).filter((m) => m.raw.toString().includes('Subject: Mid-flight'));
        expect(accepted).toHaveLength(1);
      } finally {
        await restarted.stop();
      }
    }, 180_000);
  });
}
