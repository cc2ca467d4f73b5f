import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { PLANS } from '../src/accounts/plans.ts';
import { SERVER_MAX_MESSAGE_BYTES } from '../src/inbound/recipients.ts';
import { describeEachDatabase, type TestApp, type TestUser } from './harness.ts';
import { labelNow, mailboxWithAddress } from './smtp-helpers.ts';
import { RawSmtp, storedBytes } from './smtp-raw-client.ts';
import { hostileCorpus, type HostileCase } from './fixtures/hostile/corpus.ts';
import { assertSafeEmailPath, BODY_STATUSES, downloadFile, emailDir, listFiles, sha256 } from './mail-store-checks.ts';

// The hostile corpus through the whole inbound path: real SMTP into the real app, then what was
// stored read back through the files API. Each message is stored or refused with a clear code,
// the server keeps answering (the same connection takes a normal message right after), and every
// file of a stored email sits inside its own `_email/<date>/<id>/` folder with the exact bytes sent.

const CAP = PLANS.paid.max_received_email_message_bytes!;
const CORPUS = hostileCorpus({ maxMessageBytes: CAP, serverMaxBytes: SERVER_MAX_MESSAGE_BYTES });
const SENDER = 'mallory@hostile.test';
/** Text fields of the row that must be free of control characters (NUL included). */
const TEXT_FIELDS = ['subject', 'message_id', 'sender_address'] as const;

const normal = (tag: string) =>
  Buffer.from(`From: Ann <ann@example.com>\r\nTo: box@example.com\r\nSubject: after ${tag}\r\nMessage-ID: <after-${tag.replace(/\W+/g, '-')}@example.com>\r\n\r\nStill here.\r\n`);

describeEachDatabase('hostile messages over SMTP', (app) => {
  let user: TestUser;
  let box: { id: string; address: string };

  beforeAll(async () => {
    // Paid: its 50 MiB message cap takes the 20 MiB attachment (28 MB as base64) that free refuses.
    user = await app().user({ plan: 'paid' });
    box = await mailboxWithAddress(app(), user, 'hostile');
  });

  const rows = () => app().started.deps.db.selectFrom('emails').selectAll().where('mailbox_id', '=', box.id).execute();
  const count = async () => Number((await app().started.deps.db.selectFrom('emails').select((eb) => eb.fn.countAll().as('n')).where('mailbox_id', '=', box.id).executeTakeFirstOrThrow()).n);

  // One connection for the corpus (smtp-server holds every greeting back 100 ms to catch early
  // talkers); a message that breaks it fails its own test and the next one reconnects.
  let conn: RawSmtp | undefined;
  const client = async () => (conn && !conn.closed ? conn : (conn = await RawSmtp.open(app().started.ports.smtp!)));
  afterAll(async () => conn?.quit());

  for (const c of CORPUS) {
    const outcome = c.expect === 'stored' ? 'stored' : `refused ${c.expect.code} ${c.expect.stage === 'end' ? 'after DATA' : `at ${c.expect.stage.toUpperCase()}`}`;
    it(`${c.name} (${c.raw.length} bytes): ${outcome}`, async () => {
      const smtp = await client();
      const before = await count();
      const res = await smtp.send({ from: SENDER, to: [box.address], raw: c.raw, size: c.declaredSize });
      if (c.expect === 'stored') {
        expect({ stage: res.stage, code: res.code }, res.text).toEqual({ stage: 'end', code: 250 });
        expect(res.emailIds).toHaveLength(1);
        await checkStored(app(), user, box, c, res.emailIds[0]!);
      } else {
        expect({ stage: res.stage, code: res.code }, res.text).toEqual(c.expect);
        expect(res.text).toMatch(/^5\d\d \S/);
        expect(await count()).toBe(before);
      }
      // The same connection still takes an ordinary message.
      const after = await smtp.send({ from: 'ann@example.com', to: [box.address], raw: normal(c.name) });
      expect(after.code, after.text).toBe(250);
    }, 60_000);
  }

  it('ends DATA only at CRLF . CRLF: bare-LF dot lines cannot smuggle a second message', async () => {
    const before = await count();
    const payload = Buffer.from(
      'From: a@hostile.test\r\nSubject: carrier\r\n\r\nhello\n.\nMAIL FROM:<evil@hostile.test>\nRCPT TO:<' + box.address + '>\nDATA\nSubject: smuggled 1\n\nx\n.\n' +
        'RSET\r\n.\nQUIT\n\r\n.\rDATA\r\nSubject: smuggled 2\r\n\r\ny\r\n',
    );
    const res = await (await client()).send({ from: SENDER, to: [box.address], raw: payload, wire: Buffer.concat([payload, Buffer.from('.\r\n')]) });
    expect(res.code, res.text).toBe(250);
    expect(await count()).toBe(before + 1);
    const row = await app().started.deps.db.selectFrom('emails').select(['subject', 'size_bytes']).where('id', '=', res.emailIds[0]!).executeTakeFirstOrThrow();
    expect(row).toEqual({ subject: 'carrier', size_bytes: payload.length });
  });

  it('stores one hostile message for two mailboxes, each inside its own email folder', async () => {
    const other = await mailboxWithAddress(app(), user, 'hostile two');
    const c = CORPUS.find((x) => x.name === 'attachment-name/all-in-one')!;
    const res = await (await client()).send({ from: SENDER, to: [box.address, other.address], raw: c.raw });
    expect(res.code, res.text).toBe(250);
    expect(res.emailIds).toHaveLength(2);
    const [a, b] = await Promise.all(res.emailIds.map((id) => app().started.deps.db.selectFrom('emails').selectAll().where('id', '=', id).executeTakeFirstOrThrow()));
    expect([a!.mailbox_id, b!.mailbox_id].sort()).toEqual([box.id, other.id].sort());
    await checkStored(app(), user, a!.mailbox_id === box.id ? box : other, c, a!.id);
    await checkStored(app(), user, b!.mailbox_id === box.id ? box : other, c, b!.id);
  });

  it('stores two messages with the same Message-ID as two emails', async () => {
    const dup = (await rows()).filter((r) => r.message_id === 'dup-across@hostile.test');
    expect(dup.map((r) => r.subject).sort()).toEqual(['dup first', 'dup second']);
    expect(new Set(dup.map((r) => r.id)).size).toBe(2);
  });

  it('keeps every file of the mailbox inside the folder of exactly one email, and counts every email', async () => {
    const db = app().started.deps.db;
    const all = await rows();
    const files = await db.selectFrom('files').select(['path', 'basename', 'folder']).where('mailbox_id', '=', box.id).where('deleted_at', 'is', null).execute();
    const byId = new Map(all.map((r) => [r.id, r]));
    const perEmail = new Map<string, number>();
    for (const f of files) {
      const m = /^_email\/\d{4}\/\d{2}\/\d{2}\/(eml_[A-Za-z0-9]+)\//.exec(f.path);
      expect(m, f.path).not.toBeNull();
      const row = byId.get(m![1]!);
      expect(row, `${f.path} has no email row`).toBeDefined();
      assertSafeEmailPath(f.path, emailDir(row!.received_at, row!.id));
      expect(f.path).toBe(`${f.folder}/${f.basename}`);
      perEmail.set(row!.id, (perEmail.get(row!.id) ?? 0) + 1);
    }
    for (const r of all) expect(perEmail.get(r.id), r.id).toBe(2 + r.attachment_count);
    const mailbox = await db.selectFrom('mailboxes').select(['message_count', 'email_seq']).where('id', '=', box.id).executeTakeFirstOrThrow();
    expect(Number(mailbox.message_count)).toBe(all.length);
    expect(Number(mailbox.email_seq)).toBe(all.length);
  });

  it('writes nothing outside the blob store: the data dir holds the database and content-addressed blobs only', async () => {
    const found = walk(app().dataDir);
    const db = /^cubby\.db(-wal|-shm|-journal)?$/;
    const blob = /^blobs\/([0-9a-f]{2})\/([0-9a-f]{64})$/;
    for (const rel of found) {
      const m = blob.exec(rel);
      expect(db.test(rel) || (m !== null && m[2]!.startsWith(m[1]!)), `unexpected file in the data dir: ${rel}`).toBe(true);
    }
    // Every email file's bytes are a blob there, or kept in its database row (src/blobs/inline-blobs.ts).
    const versions = await app()
      .started.deps.db.selectFrom('file_versions')
      .innerJoin('blobs', 'blobs.sha256', 'file_versions.sha256')
      .select(['file_versions.sha256', 'blobs.inline_bytes'])
      .where('mailbox_id', '=', box.id)
      .execute();
    expect(versions.some((v) => v.inline_bytes)).toBe(true);
    expect(versions.some((v) => !v.inline_bytes)).toBe(true); // the corpus has messages past the inline limit
    for (const v of versions) expect(v.inline_bytes !== null || found.has(`blobs/${v.sha256!.slice(0, 2)}/${v.sha256}`), v.sha256!).toBe(true);
    // The `../../../../tmp/…` attachment name was never taken as a path.
    expect(fs.existsSync('/tmp/cubby-hostile-escape.txt')).toBe(false);
  });

  it('answers a normal message on a fresh connection after the whole corpus', async () => {
    const client = await RawSmtp.open(app().started.ports.smtp!);
    try {
      const res = await client.send({ from: 'ann@example.com', to: [box.address], raw: normal('corpus') });
      expect(res.code, res.text).toBe(250);
      expect(res.emailIds).toHaveLength(1);
    } finally {
      await client.quit();
    }
  });
});

async function checkStored(app: TestApp, user: TestUser, box: { id: string; address: string }, c: HostileCase, id: string): Promise<void> {
  const row = await app.started.deps.db.selectFrom('emails').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
  const sent = storedBytes(c.raw);
  const dir = emailDir(row.received_at, id);
  expect(row).toMatchObject({ mailbox_id: box.id, direction: 'received', directory: dir, size_bytes: sent.length, raw_sha256: sha256(sent), delivered_to: box.address });
  expect(BODY_STATUSES).toContain(row.body_status);
  if (c.row) expect(row).toMatchObject(c.row);
  if (c.attachmentsSent !== undefined) expect(row.attachment_count + row.omitted_attachment_count).toBe(c.attachmentsSent);
  for (const field of TEXT_FIELDS) expect(row[field] ?? '', field).not.toMatch(/[\u0000-\u001f\u007f]/);

  // API keys see an email's files once it is labeled (withheld until then).
  await labelNow(app);
  const base = app.base;
  const top = await listFiles(base, user.key, box.id, { folder: dir });
  expect(top.map((f) => f.basename)).toEqual(['message.eml', 'message.json']);
  const attached = await listFiles(base, user.key, box.id, { folder: `${dir}/attachments` });
  expect(attached).toHaveLength(row.attachment_count);
  for (const f of [...top, ...attached]) assertSafeEmailPath(f.path, dir);
  // Nothing else anywhere in the mailbox mentions this email's id outside its folder.
  for (const f of await listFiles(base, user.key, box.id, { q: id })) expect(f.path.startsWith(`${dir}/`), f.path).toBe(true);

  const eml = await downloadFile(base, user.key, box.id, top[0]!.id);
  expect(eml.length).toBe(sent.length);
  expect(eml.equals(sent), 'message.eml differs from the bytes sent').toBe(true);
  const json = JSON.parse((await downloadFile(base, user.key, box.id, top[1]!.id)).toString('utf8'));
  expect(json.delivered_to).toBe(box.address);

  // The row's attachments are exactly the files in attachments/, with their bytes.
  const listed = JSON.parse(row.attachments) as { id: string; filename: string; size_bytes: number }[];
  expect(listed.map((a) => a.id).sort()).toEqual(attached.map((f) => f.id).sort());
  const byId = new Map(attached.map((f) => [f.id, f]));
  const digests = [];
  for (const a of listed) {
    const f = byId.get(a.id)!;
    expect(f.basename).toBe(a.filename);
    const bytes = await downloadFile(base, user.key, box.id, f.id);
    expect(bytes.length).toBe(a.size_bytes);
    expect(sha256(bytes)).toBe(f.current_file_version!.sha256);
    digests.push({ size: bytes.length, sha256: sha256(bytes) });
  }
  if (c.attachments) expect(digests).toEqual(c.attachments);
}

/** Every regular file under `root`, as paths relative to it (with `/`). */
function walk(root: string): Set<string> {
  const out = new Set<string>();
  const visit = (dir: string) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, e.name);
      if (e.isDirectory()) visit(full);
      else out.add(path.relative(root, full).split(path.sep).join('/'));
    }
  };
  visit(root);
  return out;
}
