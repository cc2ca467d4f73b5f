import fs from 'node:fs';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DATABASES, startTestApp, type TestApp } from './harness.ts';
import { mailboxWithAddress, sendMail } from './smtp-helpers.ts';
import { subscribed } from './cable-client.ts';
import { makeCert, Receiver, receiverDns, setWebhook, type TestCert } from './webhook-receiver.ts';

// Catch-up after every connect (the documented client loop), and fan-out across nodes: two app
// instances on one Postgres database, mail received by one, pushed on the other's socket.

async function listAsc(app: TestApp, key: string, mailboxId: string, cursor?: string): Promise<{ ids: string[]; cursor: string }> {
  const res = await app.request('GET', `/v1/mailboxes/${mailboxId}/emails`, { key, query: { order: 'asc', cursor } });
  if (res.status !== 200) throw new Error(`list: ${res.status} ${res.text}`);
  return { ids: res.body.data.emails.map((e: any) => e.id), cursor: res.body.data.pagination.next_cursor };
}

for (const kind of DATABASES) {
  describe(`live catch-up [${kind}]`, () => {
    let app: TestApp;
    beforeAll(async () => {
      app = await startTestApp(kind);
    });
    afterAll(async () => {
      await app?.stop();
    });

    it('after every connect, listing with the saved ascending cursor finds what arrived while disconnected', async () => {
      const u = await app.user();
      const box = await mailboxWithAddress(app, u);
      // Connect, then catch up from the start; keep the cursor.
      let { cable } = await subscribed(app, u.key, box.id);
      let saved = (await listAsc(app, u.key, box.id)).cursor;
      const a = (await sendMail(app, { to: box.address })).emailIds[0];
      expect((await cable.next((f) => f.identifier && f.message)).message.data.email_id).toBe(a);
      let page = await listAsc(app, u.key, box.id, saved);
      expect(page.ids).toEqual([a]);
      saved = page.cursor;

      cable.close();
      await cable.whenClosed();
      const missed = [(await sendMail(app, { to: box.address })).emailIds[0], (await sendMail(app, { to: box.address })).emailIds[0]];

      // Reconnect with a new ticket; the catch-up read returns exactly the missed mail.
      ({ cable } = await subscribed(app, u.key, box.id));
      page = await listAsc(app, u.key, box.id, saved);
      expect(page.ids).toEqual(missed);
      saved = page.cursor;
      const c = (await sendMail(app, { to: box.address })).emailIds[0];
      expect((await cable.next((f) => f.identifier && f.message)).message.data.email_id).toBe(c);
      expect((await listAsc(app, u.key, box.id, saved)).ids).toEqual([c]);
      cable.close();
    });
  });
}

describe.skipIf(!DATABASES.includes('postgres'))('two nodes on one Postgres database', () => {
  const schema = `t_nodes_${randomBytes(5).toString('hex')}`;
  let cert: TestCert;
  let receiver: Receiver;
  let nodeA: TestApp;
  let nodeB: TestApp;

  beforeAll(async () => {
    cert = await makeCert();
    receiver = new Receiver(cert);
    await receiver.start();
    const env = { CUBBY_DATABASE_SCHEMA: schema, CUBBY_WEBHOOK_ALLOW_PRIVATE: 'true', CUBBY_WEBHOOK_CA_FILE: cert.certFile };
    nodeA = await startTestApp('postgres', env, { resolver: receiverDns() });
    nodeB = await startTestApp('postgres', { ...env, CUBBY_SECRET_KEY: nodeA.env.CUBBY_SECRET_KEY! }, { resolver: receiverDns() });
  });
  afterAll(async () => {
    await nodeA?.stop();
    await nodeB?.stop();
    await receiver?.stop();
    fs.rmSync(cert.dir, { recursive: true, force: true });
    const client = new pg.Client({ connectionString: process.env.CUBBY_TEST_POSTGRES_URL });
    await client.connect();
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await client.end();
  });

  it('mail received by one node is pushed on a socket of the other', async () => {
    const u = await nodeA.user();
    const box = await mailboxWithAddress(nodeA, u);
    const onB = await subscribed(nodeB, u.key, box.id);
    const onA = await subscribed(nodeA, u.key, box.id);
    const sent = (await sendMail(nodeA, { to: box.address })).emailIds[0];
    expect((await onB.cable.next((f) => f.identifier && f.message)).message.data.email_id).toBe(sent);
    expect((await onA.cable.next((f) => f.identifier && f.message)).message.data.email_id).toBe(sent);
    const back = (await sendMail(nodeB, { to: box.address })).emailIds[0];
    expect((await onA.cable.next((f) => f.identifier && f.message)).message.data.email_id).toBe(back);
    onA.cable.close();
    onB.cable.close();
  });

  it('a lost LISTEN connection ends local sockets (clients catch up) and comes back', async () => {
    const u = await nodeA.user();
    const box = await mailboxWithAddress(nodeA, u);
    const before = await subscribed(nodeB, u.key, box.id);
    const admin = new pg.Client({ connectionString: process.env.CUBBY_TEST_POSTGRES_URL });
    await admin.connect();
    const listeners = async () => (await admin.query(`select pid from pg_stat_activity where query = 'LISTEN "cubby_live_${schema}"'`)).rows.map((r) => r.pid);
    try {
      const pids = await listeners();
      expect(pids.length).toBe(2);
      for (const pid of pids) await admin.query('select pg_terminate_backend($1)', [pid]);
      expect(await before.cable.next((f) => f.type === 'disconnect')).toEqual({ type: 'disconnect', reason: 'server_restart', reconnect: false });
      // Both nodes listen again (new backends), then a new connection gets pushes again.
      for (let i = 0; ; i++) {
        const now = await listeners();
        if (now.length === 2 && !now.some((p) => pids.includes(p))) break;
        if (i > 100) throw new Error('the listeners did not come back');
        await new Promise((r) => setTimeout(r, 100));
      }
    } finally {
      await admin.end();
    }
    const after = await subscribed(nodeB, u.key, box.id);
    const sent = (await sendMail(nodeA, { to: box.address })).emailIds[0];
    expect((await after.cable.next((f) => f.identifier && f.message)).message.data.email_id).toBe(sent);
    after.cable.close();
  });

  it('first webhook attempts stay in order when both nodes receive mail and both run workers', async () => {
    const u = await nodeA.user();
    const box = await mailboxWithAddress(nodeA, u);
    receiver.secret = (await setWebhook(nodeB, u.key, box.id, receiver.url(`/nodes/${box.id}`))).signing_secret;
    for (let i = 0; i < 8; i++) await sendMail(i % 2 ? nodeB : nodeA, { to: box.address, subject: `n${i}` });
    await receiver.waitFor(8);
    const mine = receiver.received.filter((r) => r.path === `/nodes/${box.id}`);
    expect(mine.every((r) => r.verified)).toBe(true);
    const res = await nodeA.request('GET', `/v1/mailboxes/${box.id}/emails`, { key: u.key, query: { order: 'asc' } });
    expect(mine.map((r) => r.json.data.email_id)).toEqual(res.body.data.emails.map((e: any) => e.id));
  });
});
