import { describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import fs from 'node:fs';
import path from 'node:path';
import os from 'node:os';
import net from 'node:net';
import nodemailer from 'nodemailer';
import { describeEachDatabase, startTestApp, type TestApp, type TestUser } from './harness.ts';
import { labelNow, mailboxWithAddress, sendMail, smtpDialogue } from './smtp-helpers.ts';
import { emailsPath, fetchLink } from './emails-helpers.ts';
import { clientKey } from '../src/inbound/smtp-server.ts';
import { fsStoreRoot } from './blob-helpers.ts';

const run = promisify(execFile);
const hasSwaks = await run('swaks', ['--version']).then(() => true, () => false);

async function files(app: TestApp, user: TestUser, mailboxId: string): Promise<string[]> {
  const res = await app.request('GET', `/v1/mailboxes/${mailboxId}/files`, { key: user.key, query: { limit: 100 } });
  expect(res.status).toBe(200);
  return res.body.data.files.map((f: { path: string }) => f.path).sort();
}

async function mailbox(app: TestApp, user: TestUser, id: string) {
  const res = await app.request('GET', `/v1/mailboxes/${id}`, { key: user.key });
  return res.body.data.mailbox;
}

async function emailRow(app: TestApp, id: string) {
  return app.started.deps.db.selectFrom('emails').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
}

describeEachDatabase('inbound SMTP', (app) => {
  it('greets and advertises SIZE, 8BITMIME, SMTPUTF8 and PIPELINING, with no AUTH and no STARTTLS without a certificate', async () => {
    const [greeting, ehlo] = await smtpDialogue(app(), ['EHLO client.example']);
    expect(greeting).toMatch(/^220 /);
    expect(ehlo).toMatch(/250[- ]SIZE \d+/);
    for (const ext of ['8BITMIME', 'SMTPUTF8', 'PIPELINING']) expect(ehlo).toContain(ext);
    expect(ehlo).not.toMatch(/AUTH|STARTTLS/);
  });

  it('stores a message sent with nodemailer as files and an email row, and counts it', async () => {
    const user = await app().user();
    const box = await mailboxWithAddress(app(), user);
    const sent = await sendMail(app(), {
      from: 'Ann Example <ann@example.com>',
      to: box.address,
      subject: 'Quarterly report',
      text: 'Numbers attached.',
      attachments: [{ filename: 'report.csv', content: 'a,b\n1,2\n', contentType: 'text/csv' }],
      messageId: '<report-1@example.com>',
    });
    expect(sent.response).toMatch(/^250 2\.0\.0 /);
    expect(sent.emailIds).toHaveLength(1);
    const id = sent.emailIds[0]!;
    const dir = `_email/${new Date().toISOString().slice(0, 10).replaceAll('-', '/')}/${id}`;
    // Withheld from API keys until the labeler ran: tested without a worker (so without a race) in
    // test/emails-withheld-files.test.ts; here the worker may already have labeled it.
    await labelNow(app());
    expect(await files(app(), user, box.id)).toEqual([`${dir}/attachments/report.csv`, `${dir}/message.eml`, `${dir}/message.json`]);

    const row = await emailRow(app(), id);
    expect(row).toMatchObject({ mailbox_id: box.id, direction: 'received', subject: 'Quarterly report', message_id: 'report-1@example.com', delivered_to: box.address, body_status: 'complete', attachment_count: 1, omitted_attachment_count: 0, conversation_id: id, sender_address: 'ann@example.com' });
    expect(JSON.parse(row.from_addresses)).toEqual([{ address: 'ann@example.com', name: 'Ann Example' }]);

    const json = await app().request('GET', `/v1/mailboxes/${box.id}/files/by_path`, { key: user.key, query: { path: `${dir}/message.json` } });
    expect(json.status).toBe(200);
    const m = await mailbox(app(), user, box.id);
    expect(m.email).toMatchObject({ message_count: 1, unread_count: 1 });
    expect(m.email.last_received_at).toBe(row.received_at);
    const bucket = await app().request('GET', `/api/v1/buckets/${box.id}`, { key: user.key });
    expect(bucket.body.data.bucket.inbound_email).toMatchObject({ received_count: 1, last_received_path: dir });
  });

  it.skipIf(!hasSwaks)('stores a message sent with swaks', async () => {
    const user = await app().user();
    const box = await mailboxWithAddress(app(), user);
    const note = path.join(app().dataDir, 'note.txt');
    fs.writeFileSync(note, 'attached by swaks\n');
    const { stdout } = await run('swaks', ['--server', '127.0.0.1', '--port', String(app().started.ports.smtp), '--to', box.address, '--from', 'ops@example.org', '--header', 'Subject: from swaks', '--body', 'swaks body', '--attach-type', 'text/plain', '--attach', `@${note}`], { timeout: 20_000 });
    const id = /eml_[A-Za-z0-9]+/.exec(String(stdout))?.[0];
    expect(id, String(stdout)).toBeTruthy();
    const row = await emailRow(app(), id!);
    expect(row).toMatchObject({ subject: 'from swaks', sender_address: 'ops@example.org', mailbox_id: box.id, attachment_count: 1 });
  });

  it('does not store executable or key-file attachments; they are counted as omitted', async () => {
    const user = await app().user();
    const box = await mailboxWithAddress(app(), user);
    const sent = await sendMail(app(), { to: box.address, attachments: [{ filename: 'setup.exe', content: 'MZ' }, { filename: 'id_rsa', content: 'key' }, { filename: 'notes.txt', content: 'ok' }] });
    const row = await emailRow(app(), sent.emailIds[0]!);
    expect(row).toMatchObject({ attachment_count: 1, omitted_attachment_count: 2 });
    expect(JSON.parse(row.attachments).map((a: { filename: string }) => a.filename)).toEqual(['notes.txt']);
  });

  it('refuses unknown addresses on our domain with 550 5.1.1 and other domains with 550 5.7.1 (never a relay)', async () => {
    const r = await smtpDialogue(app(), ['EHLO c', 'MAIL FROM:<a@example.com>', 'RCPT TO:<nobody-zzzz@mail.localhost>', 'RCPT TO:<victim@gmail.com>', 'DATA', 'QUIT']);
    expect(r[3]).toMatch(/^550 5\.1\.1 /);
    expect(r[4]).toMatch(/^550 5\.7\.1 .*relay/);
    expect(r[5]).toMatch(/^503 /);
  });

  it('refuses archived mailboxes and mailboxes with receiving disabled with 550 and the reason', async () => {
    const user = await app().user();
    const archived = await mailboxWithAddress(app(), user);
    expect((await app().request('POST', `/v1/mailboxes/${archived.id}/archive`, { key: user.key, body: {} })).status).toBe(200);
    const disabled = await mailboxWithAddress(app(), user);
    await app().started.deps.db.updateTable('mailboxes').set({ receiving_enabled: 0, receiving_blocked_reason: 'abuse_review' }).where('id', '=', disabled.id).execute();
    const r = await smtpDialogue(app(), ['EHLO c', 'MAIL FROM:<a@example.com>', `RCPT TO:<${archived.address}>`, `RCPT TO:<${disabled.address}>`, 'QUIT']);
    expect(r[3]).toMatch(/^550 5\.2\.1 .*archived/);
    expect(r[4]).toMatch(/^550 5\.2\.1 .*abuse_review/);
  });

  it('enforces the sender allowlist when enabled (addresses and domains)', async () => {
    const user = await app().user();
    const box = await mailboxWithAddress(app(), user);
    await app().started.deps.db.updateTable('mailboxes').set({ allowlist_enabled: 1, allowlist_entries: JSON.stringify(['boss@example.com', '@trusted.org']) }).where('id', '=', box.id).execute();
    expect((await sendMail(app(), { from: 'boss@example.com', to: box.address })).emailIds).toHaveLength(1);
    expect((await sendMail(app(), { from: 'anyone@trusted.org', to: box.address })).emailIds).toHaveLength(1);
    const r = await smtpDialogue(app(), ['EHLO c', 'MAIL FROM:<stranger@example.com>', `RCPT TO:<${box.address}>`, 'MAIL FROM:<>', 'QUIT']);
    expect(r[3]).toMatch(/^550 5\.7\.1 .*allowlist/);
  });

  it('answers 452 when the monthly count is used up and 552 for a declared size over the cap', async () => {
    const user = await app().user(); // free plan
    const box = await mailboxWithAddress(app(), user);
    const period = new Date().toISOString().slice(0, 7);
    await app().started.deps.db.insertInto('received_usage').values({ scope_id: user.accountId, period, count: 2_000, bytes: 0 }).execute();
    const r = await smtpDialogue(app(), ['EHLO c', 'MAIL FROM:<a@example.com>', `RCPT TO:<${box.address}>`, 'QUIT']);
    expect(r[3]).toMatch(/^452 4\.2\.2 /);

    const other = await app().user();
    const box2 = await mailboxWithAddress(app(), other);
    const big = await smtpDialogue(app(), ['EHLO c', `MAIL FROM:<a@example.com> SIZE=${30 * 1024 * 1024}`, `RCPT TO:<${box2.address}>`, 'QUIT']);
    expect(big[3]).toMatch(/^552 5\.3\.4 /);
  });

  it("counts a client account's mail against its parent's monthly allowance at RCPT (the billing group)", async () => {
    const parent = await app().user();
    const client = await app().user();
    const box = await mailboxWithAddress(app(), client);
    const db = app().started.deps.db;
    await db.updateTable('accounts').set({ parent_account_id: parent.accountId }).where('id', '=', client.accountId).execute();
    const period = new Date().toISOString().slice(0, 7);
    await db.insertInto('received_usage').values({ scope_id: parent.accountId, period, count: 2_000, bytes: 0 }).execute();
    const r = await smtpDialogue(app(), ['EHLO c', 'MAIL FROM:<a@example.com>', `RCPT TO:<${box.address}>`, 'QUIT']);
    expect(r[3]).toMatch(/^452 4\.2\.2 /);
    // The client account's own row is not the group's: it does not count.
    await db.updateTable('accounts').set({ parent_account_id: null }).where('id', '=', client.accountId).execute();
    await db.insertInto('received_usage').values({ scope_id: box.id, period, count: 2_000, bytes: 0 }).execute();
    const again = await smtpDialogue(app(), ['EHLO c', 'MAIL FROM:<a@example.com>', `RCPT TO:<${box.address}>`, 'QUIT']);
    expect(again[3]).toMatch(/^250 /);
  });

  it('stores one message to several mailboxes once per mailbox (primary address twice counts once)', async () => {
    const user = await app().user();
    const a = await mailboxWithAddress(app(), user);
    const b = await mailboxWithAddress(app(), user);
    const sent = await sendMail(app(), { to: [a.address, b.address, a.address.toUpperCase()], subject: 'to both' });
    expect(sent.emailIds).toHaveLength(2);
    const rows = await app().started.deps.db.selectFrom('emails').select(['mailbox_id', 'delivered_to', 'directory']).where('id', 'in', sent.emailIds).execute();
    expect(rows.map((r) => r.mailbox_id).sort()).toEqual([a.id, b.id].sort());
    // Both mailboxes' counters, written in one statement on Postgres (src/inbound/store.ts).
    for (const id of [a.id, b.id]) {
      const m = await mailbox(app(), user, id);
      expect(m.email).toMatchObject({ message_count: 1, unread_count: 1 });
      expect(m.files_count).toBe(2);
      expect(m.storage_bytes).toBeGreaterThan(0);
    }
    const counters = await app().started.deps.db.selectFrom('mailboxes').select(['id', 'version_number', 'email_seq', 'last_received_path', 'updated_at', 'last_received_at']).where('id', 'in', [a.id, b.id]).execute();
    for (const c of counters) {
      expect(Number(c.email_seq)).toBe(1);
      expect(Number(c.version_number)).toBeGreaterThanOrEqual(1);
      expect(c.last_received_path).toBe(rows.find((r) => r.mailbox_id === c.id)!.directory);
      expect(c.updated_at).toBe(c.last_received_at);
    }
  });

  it('a mailbox archived between RCPT and the end of DATA gets no copy; the other recipient still does', async () => {
    const user = await app().user();
    const a = await mailboxWithAddress(app(), user);
    const b = await mailboxWithAddress(app(), user);
    const lines = ['EHLO c', 'MAIL FROM:<a@example.com>', `RCPT TO:<${a.address}>`, `RCPT TO:<${b.address}>`, 'DATA', 'Subject: late archive\r\n\r\nhello\r\n.', 'QUIT'];
    const r = await smtpDialogue(app(), lines, {
      // After DATA was accepted and before the message ends, mailbox A is archived.
      beforeLine: async (i) => {
        if (i === 5) expect((await app().request('POST', `/v1/mailboxes/${a.id}/archive`, { key: user.key, body: {} })).status).toBe(200);
      },
    });
    expect(r.slice(3, 6).map((x) => x.slice(0, 3))).toEqual(['250', '250', '354']);
    const done = r[6]!;
    expect(done).toMatch(/^250 /);
    const ids = done.match(/eml_[A-Za-z0-9]+/g) ?? [];
    expect(ids).toHaveLength(1);
    expect((await emailRow(app(), ids[0]!)).mailbox_id).toBe(b.id);
  });

  it('refuses a message whose only mailbox was archived before the end of DATA, and stores none of its bytes', async () => {
    const user = await app().user();
    const a = await mailboxWithAddress(app(), user);
    const { blobs } = app().started.deps;
    const root = fsStoreRoot(blobs);
    const blobFiles = () => (fs.existsSync(root) ? fs.readdirSync(root, { recursive: true }).filter((f) => /[0-9a-f]{64}$/.test(String(f))).length : 0);
    expect(blobs.kind).toBe('fs');
    const before = blobFiles();
    const blobRows = async () => (await app().started.deps.db.selectFrom('blobs').select('sha256').execute()).length;
    const rowsBefore = await blobRows();
    const lines = ['EHLO c', 'MAIL FROM:<a@example.com>', `RCPT TO:<${a.address}>`, 'DATA', `Subject: never stored\r\n\r\n${'unique body '.repeat(50)}${Math.random()}\r\n.`, 'QUIT'];
    const r = await smtpDialogue(app(), lines, {
      beforeLine: async (i) => {
        if (i === 4) expect((await app().request('POST', `/v1/mailboxes/${a.id}/archive`, { key: user.key, body: {} })).status).toBe(200);
      },
    });
    expect(r[4]).toMatch(/^354/);
    expect(r[5]).toMatch(/^5\d\d /);
    expect(blobFiles()).toBe(before);
    // Nor in the database, where a message this small would have kept its bytes (src/blobs/inline-blobs.ts).
    expect(await blobRows()).toBe(rowsBefore);
  });

  it('labels received mail by the list headers that only its message.json holds (taken from memory or from the file)', async () => {
    const user = await app().user();
    const box = await mailboxWithAddress(app(), user);
    const news = await sendMail(app(), { to: box.address, subject: 'Lunch on Friday?', text: 'Are you free?', headers: { 'List-Id': '<weekly.example.org>', 'List-Unsubscribe': '<https://example.org/u>' } });
    const plain = await sendMail(app(), { to: box.address, subject: 'Lunch on Friday?', text: 'Are you free?' });
    await labelNow(app());
    expect((await emailRow(app(), news.emailIds[0]!)).label).toBe('Newsletters');
    expect((await emailRow(app(), plain.emailIds[0]!)).label).toBe('Personal');
  });

  it('links replies into one conversation, also when the first message was never received', async () => {
    const user = await app().user();
    const box = await mailboxWithAddress(app(), user);
    const root = await sendMail(app(), { to: box.address, subject: 'Plan', messageId: '<root-1@example.com>' });
    const reply = await sendMail(app(), { to: box.address, subject: 'Re: Plan', messageId: '<reply-1@example.com>', inReplyTo: '<root-1@example.com>', references: '<root-1@example.com>' });
    const other1 = await sendMail(app(), { to: box.address, subject: 'Re: Elsewhere', inReplyTo: '<unseen@example.com>', references: '<unseen@example.com>' });
    const other2 = await sendMail(app(), { to: box.address, subject: 'Re: Elsewhere', inReplyTo: '<unseen-2@example.com>', references: ['<unseen@example.com>', '<unseen-2@example.com>'] });
    const fresh = await sendMail(app(), { to: box.address, subject: 'New topic' });
    const conv = async (id: string) => (await emailRow(app(), id)).conversation_id;
    expect(await conv(reply.emailIds[0]!)).toBe(root.emailIds[0]);
    expect(await conv(other2.emailIds[0]!)).toBe(other1.emailIds[0]);
    expect(await conv(fresh.emailIds[0]!)).toBe(fresh.emailIds[0]);
  });

  it('keeps receiving while a batch upload holds the mailbox write lock', async () => {
    const user = await app().user();
    const box = await mailboxWithAddress(app(), user);
    const session = await app().request('POST', `/api/v1/buckets/${box.id}/upload_sessions`, { key: user.key, body: { client_session_key: 'lock-test-1', expected_file_count: 1 } });
    expect([200, 201]).toContain(session.status);
    const sent = await sendMail(app(), { to: box.address, subject: 'during upload' });
    expect(sent.emailIds).toHaveLength(1);
  });

  it('assigns increasing arrival numbers under concurrency, with exact counters', async () => {
    const user = await app().user({ plan: 'paid' });
    const box = await mailboxWithAddress(app(), user);
    const results = await Promise.all(Array.from({ length: 12 }, (_, i) => sendMail(app(), { to: box.address, subject: `burst ${i}` })));
    expect(results.every((r) => r.emailIds.length === 1)).toBe(true);
    const rows = await app().started.deps.db.selectFrom('emails').select('seq').where('mailbox_id', '=', box.id).orderBy('seq').execute();
    expect(rows.map((r) => Number(r.seq))).toEqual(Array.from({ length: 12 }, (_, i) => i + 1));
    const m = await mailbox(app(), user, box.id);
    expect(m.email).toMatchObject({ message_count: 12, unread_count: 12 });
    expect(m.files_count).toBe(24); // message.eml + message.json each
  });
});

describe('inbound SMTP with a certificate', () => {
  it('offers STARTTLS and receives over TLS', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cubby-tls-'));
    const key = path.join(dir, 'key.pem');
    const cert = path.join(dir, 'cert.pem');
    await run('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', cert, '-days', '1', '-subj', '/CN=mail.localhost']);
    const app = await startTestApp('sqlite', { CUBBY_SMTP_TLS_KEY: key, CUBBY_SMTP_TLS_CERT: cert });
    try {
      const [, ehlo] = await smtpDialogue(app, ['EHLO c']);
      expect(ehlo).toContain('STARTTLS');
      const user = await app.user();
      const box = await mailboxWithAddress(app, user);
      const transport = nodemailer.createTransport({ host: '127.0.0.1', port: app.started.ports.smtp!, requireTLS: true, tls: { rejectUnauthorized: false } });
      const info = await transport.sendMail({ from: 'a@example.com', to: box.address, subject: 'over tls', text: 'secret' });
      transport.close();
      expect(info.response).toMatch(/^250 .*eml_/);
    } finally {
      await app.stop();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('inbound SMTP when storage fails', () => {
  // An S3 store whose endpoint refuses connections: every blob write fails.
  async function appWithDeadStore(inlineMaxBytes: string) {
    const closed = net.createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', () => r()));
    const port = (closed.address() as net.AddressInfo).port;
    await new Promise<void>((r) => closed.close(() => r()));
    return startTestApp('sqlite', {
      CUBBY_BLOB_STORE: 's3', CUBBY_S3_BUCKET: 'nowhere', CUBBY_S3_REGION: 'us-east-1', CUBBY_S3_ENDPOINT: `http://127.0.0.1:${port}`,
      CUBBY_S3_ACCESS_KEY_ID: 'x', CUBBY_S3_SECRET_ACCESS_KEY: 'y', CUBBY_S3_FORCE_PATH_STYLE: 'true', CUBBY_BLOB_INLINE_MAX_BYTES: inlineMaxBytes,
    });
  }

  it('answers 451 4.3.0 so that the sender retries, and stores nothing', async () => {
    // Past the inline limit, the message's blobs must go to the store.
    const app = await appWithDeadStore('16');
    try {
      const user = await app.user();
      const box = await mailboxWithAddress(app, user);
      const r = await smtpDialogue(app, ['EHLO c', 'MAIL FROM:<a@example.com>', `RCPT TO:<${box.address}>`, 'DATA', 'Subject: x\r\n\r\nbody\r\n.', 'QUIT']);
      expect(r[4]).toMatch(/^354/);
      expect(r[5]).toMatch(/^451 4\.3\.0 /);
      const rows = await app.started.deps.db.selectFrom('emails').select('id').where('mailbox_id', '=', box.id).execute();
      expect(rows).toEqual([]);
      expect(await app.started.deps.db.selectFrom('blobs').select('sha256').execute()).toEqual([]);
    } finally {
      await app.stop();
    }
  });

  it('still stores small mail, whose blobs are kept in the database, and serves its files from there', async () => {
    const app = await appWithDeadStore('65536');
    try {
      const user = await app.user();
      const box = await mailboxWithAddress(app, user);
      const message = 'Subject: kept in the database\r\n\r\nbody\r\n';
      const r = await smtpDialogue(app, ['EHLO c', 'MAIL FROM:<a@example.com>', `RCPT TO:<${box.address}>`, 'DATA', `${message}.`, 'QUIT']);
      expect(r[5]).toMatch(/^250 2\.0\.0 Ok: stored eml_/);
      const id = /stored (eml_\w+)/.exec(r[5]!)![1]!;
      await labelNow(app);
      const link = await app.request('GET', emailsPath(box, id, 'raw'), { key: user.key });
      expect(link.status, link.text).toBe(200);
      const raw = await fetchLink(link.body.data.download.url);
      expect(raw.status).toBe(200);
      expect(raw.bytes.toString()).toBe(message);
      const rows = await app.started.deps.db.selectFrom('blobs').select(['sha256', 'inline_bytes']).execute();
      expect(rows.length).toBe(2); // message.eml and message.json
      for (const row of rows) expect(row.inline_bytes).toBeInstanceOf(Buffer);
    } finally {
      await app.stop();
    }
  });
});


describe('inbound SMTP connection limits', () => {
  async function greet(port: number): Promise<{ socket: net.Socket; line: string }> {
    const socket = net.connect(port, '127.0.0.1');
    const line = await new Promise<string>((resolve, reject) => {
      socket.once('data', (d) => resolve(d.toString('latin1')));
      socket.once('error', reject);
    });
    return { socket, line };
  }

  it('refuses a client address over CUBBY_SMTP_MAX_CONNECTIONS_PER_IP with 421, and admits it again once one closes', async () => {
    const app = await startTestApp('sqlite', { CUBBY_SMTP_MAX_CONNECTIONS_PER_IP: '2' });
    try {
      const port = app.started.ports.smtp!;
      const a = await greet(port);
      const b = await greet(port);
      expect(a.line).toMatch(/^220 /);
      expect(b.line).toMatch(/^220 /);
      const c = await greet(port);
      expect(c.line).toMatch(/^421 4\.7\.0 /);
      c.socket.destroy();
      const closed = new Promise((r) => a.socket.once('close', r));
      a.socket.end('QUIT\r\n');
      await closed;
      // The server counts the close when its side of the socket ends: wait for a fresh greeting.
      let d = await greet(port);
      for (let i = 0; i < 20 && !/^220 /.test(d.line); i++) {
        d.socket.destroy();
        await new Promise((r) => setImmediate(r));
        d = await greet(port);
      }
      expect(d.line).toMatch(/^220 /);
      for (const s of [b.socket, d.socket]) s.destroy();
    } finally {
      await app.stop();
    }
  });
});

describe('the per-address connection key', () => {
  it.each([
    ['127.0.0.1', '127.0.0.1'],
    ['::ffff:10.1.2.3', '10.1.2.3'],
    ['2001:db8:1:2:aaaa:bbbb:cccc:dddd', '2001:db8:1:2::/64'],
    ['2001:db8:1:2::9', '2001:db8:1:2::/64'],
    ['2001:DB8::1', '2001:db8:0:0::/64'],
    ['::1', '0:0:0:0::/64'],
  ])('%s counts as %s', (remote, key) => {
    expect(clientKey(remote)).toBe(key);
  });
});
