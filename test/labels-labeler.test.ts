import { afterEach, describe, expect, it } from 'vitest';
import { describeEachDatabase, type TestApp } from './harness.ts';
import { newMailbox, uploadFile } from './files-helpers.ts';
import { Worker } from '../src/jobs/worker.ts';
import { enqueue } from '../src/jobs/queue.ts';
import { newId } from '../src/ids.ts';
import { iso } from '../src/time.ts';
import type { EmailsTable } from '../src/db/schema.ts';
import { LABEL_EMAIL_TASK, labelRetryAfterSeconds, registerLabeler } from '../src/labels/labeler.ts';
import { builtinProvider, type LabelProvider } from '../src/labels/provider.ts';
import { GTUBE } from '../src/labels/classify.ts';

// The labeling job against the real database and blob store. Email rows are written directly (the
// SMTP pipeline that will write them is built separately); message.json is a real file uploaded
// through the API, so the job reads it the way it reads stored mail.

describeEachDatabase('labels.label_email job', (app) => {
  const workers: Worker[] = [];
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((w) => w.stop()));
  });

  async function startLabeler(a: TestApp, provider: LabelProvider = builtinProvider) {
    const d = a.started.deps;
    const w = new Worker({ db: d.db, dialect: d.dialect, now: () => new Date(), log: { error: () => undefined }, pollMs: 20 });
    workers.push(w);
    registerLabeler(w, d, provider);
    await w.start();
    return w;
  }

  let seq = 0;
  async function insertEmail(a: TestApp, mailboxId: string, accountId: string, over: Partial<EmailsTable> = {}) {
    const id = newId('eml');
    const now = iso();
    await a.started.deps.db
      .insertInto('emails')
      .values({
        id,
        mailbox_id: mailboxId,
        account_id: accountId,
        seq: ++seq,
        direction: 'received',
        conversation_id: id,
        thread_key: null,
        subject: 'Lunch on Friday?',
        subject_search: 'lunch on friday?',
        from_addresses: JSON.stringify([{ address: 'ana@example.org', name: 'Ana' }]),
        sender_address: 'ana@example.org',
        to_addresses: '[]',
        cc_addresses: '[]',
        reply_to_addresses: '[]',
        message_id: null,
        in_reply_to: '[]',
        reference_ids: '[]',
        delivered_to: 'box@example.test',
        received_at: now,
        body_status: 'complete',
        body_text: 'Are you free?',
        attachment_count: 0,
        omitted_attachment_count: 0,
        attachments: '[]',
        size_bytes: 100,
        raw_sha256: null,
        directory: null,
        raw_file_id: null,
        raw_version_id: null,
        json_file_id: null,
        mail_from: null,
        client_ip: null,
        helo: null,
        auth_results: null,
        spam_flags: '[]',
        labeling: 'pending',
        label: null,
        labeled_at: null,
        read_at: null,
        read_by_user_id: null,
        read_by_api_key_id: null,
        delivery: null,
        created_at: now,
        ...over,
      })
      .execute();
    return id;
  }

  async function label(a: TestApp, w: Worker, emailId: string) {
    const d = a.started.deps;
    const jobId = await enqueue(d.db, d.dialect, LABEL_EMAIL_TASK, { email_id: emailId }, new Date());
    await w.drain();
    const job = await d.db.selectFrom('jobs').select(['status', 'last_error']).where('id', '=', jobId!).executeTakeFirstOrThrow();
    const row = await d.db.selectFrom('emails').select(['labeling', 'label', 'labeled_at']).where('id', '=', emailId).executeTakeFirst();
    return { job, row };
  }

  async function setup(a: TestApp) {
    const u = await a.user();
    const m = await newMailbox(a, u.key);
    return { u, m };
  }

  it('reads message.json: list headers there make a newsletter of what the row alone would call personal', async () => {
    const a = app();
    const { u, m } = await setup(a);
    const message = {
      version: 1,
      subject: 'Lunch on Friday?',
      headers: [{ name: 'List-Id', value: '<weekly.example.org>' }],
      list_headers: { list_id: '<weekly.example.org>', list_unsubscribe: '<https://example.org/u>', list_unsubscribe_post: null, precedence: 'bulk', auto_submitted: null },
      text: 'Are you free?',
      attachments: [],
    };
    const saved = await uploadFile(a, u.key, m.id, 'mail/message.json', JSON.stringify(message));
    expect(saved.status, saved.text).toBe(201);
    const withJson = await insertEmail(a, m.id, u.accountId, { json_file_id: saved.body.data.file.id });
    const rowOnly = await insertEmail(a, m.id, u.accountId);
    const w = await startLabeler(a);

    const newsletter = await label(a, w, withJson);
    expect(newsletter.job.status).toBe('done');
    expect(newsletter.row).toMatchObject({ labeling: 'done', label: 'Newsletters' });
    expect(newsletter.row!.labeled_at).toMatch(/^\d{4}-\d\d-\d\dT.*Z$/);
    expect((await label(a, w, rowOnly)).row).toMatchObject({ labeling: 'done', label: 'Personal' });
  });

  it('labels from the row alone when message.json is missing: spam flags make Junk', async () => {
    const a = app();
    const { u, m } = await setup(a);
    const junk = await insertEmail(a, m.id, u.accountId, { spam_flags: JSON.stringify(['gtube']), json_file_id: newId('df') });
    const gtube = await insertEmail(a, m.id, u.accountId, { body_text: `x ${GTUBE} y` });
    const w = await startLabeler(a);
    expect((await label(a, w, junk)).row).toMatchObject({ labeling: 'done', label: 'Junk' });
    expect((await label(a, w, gtube)).row).toMatchObject({ labeling: 'done', label: 'Junk' });
  });

  it('uses authentication results and attachments from the row', async () => {
    const a = app();
    const { u, m } = await setup(a);
    const spoofed = await insertEmail(a, m.id, u.accountId, {
      auth_results: JSON.stringify({ spf: { result: 'none', domain: null }, dkim: [], dmarc: { result: 'fail', policy: 'reject', domain: 'bank.example' }, arc: { result: 'none' }, header: 'x' }),
    });
    const invoice = await insertEmail(a, m.id, u.accountId, {
      subject: 'Documents',
      attachments: JSON.stringify([{ id: 'df_1', filename: 'invoice-7.pdf', content_type: 'application/pdf', size_bytes: 10 }]),
    });
    const w = await startLabeler(a);
    expect((await label(a, w, spoofed)).row?.label).toBe('Junk');
    expect((await label(a, w, invoice)).row?.label).toBe('Receipts');
  });

  it('is idempotent and finishes quietly when the email is gone or already labeled', async () => {
    const a = app();
    const { u, m } = await setup(a);
    const labeled = await insertEmail(a, m.id, u.accountId, { labeling: 'done', label: 'Receipts', labeled_at: '2020-01-01T00:00:00.000Z' });
    const w = await startLabeler(a);
    const again = await label(a, w, labeled);
    expect(again.job.status).toBe('done');
    expect(again.row).toEqual({ labeling: 'done', label: 'Receipts', labeled_at: '2020-01-01T00:00:00.000Z' });
    const gone = await label(a, w, newId('eml'));
    expect(gone.job.status).toBe('done');
    expect(gone.row).toBeUndefined();
  });

  it('sets no label when nothing fits, and still ends the pending state', async () => {
    const a = app();
    const { u, m } = await setup(a);
    const anonymous = await insertEmail(a, m.id, u.accountId, { from_addresses: '[]', sender_address: null });
    const w = await startLabeler(a);
    expect((await label(a, w, anonymous)).row).toMatchObject({ labeling: 'done', label: null });
  });

  it('one email the provider cannot label does not hold up the others; the last attempt releases it uncategorised', async () => {
    const a = app();
    const { u, m } = await setup(a);
    const good = await insertEmail(a, m.id, u.accountId, { subject: 'Your receipt' });
    const bad = await insertEmail(a, m.id, u.accountId, { subject: 'boom' });
    const flaky: LabelProvider = { name: 'flaky', label: async (input, signal) => (input.subject === 'boom' ? Promise.reject(new Error('provider down')) : builtinProvider.label(input, signal)) };
    const { labelEmails } = await import('../src/labels/labeler.ts');
    await expect(labelEmails(a.started.deps, flaky, [good, bad])).rejects.toThrow('provider down');
    const rows = async () => Object.fromEntries((await a.started.deps.db.selectFrom('emails').select(['id', 'labeling', 'label']).where('id', 'in', [good, bad]).execute()).map((r) => [r.id, r]));
    expect((await rows())[good]).toMatchObject({ labeling: 'done', label: 'Receipts' });
    expect((await rows())[bad]).toMatchObject({ labeling: 'pending' });
    await labelEmails(a.started.deps, flaky, [good, bad], true);
    expect((await rows())[bad]).toMatchObject({ labeling: 'done', label: null });
  });

  it('fails a malformed payload at once', async () => {
    const a = app();
    const d = a.started.deps;
    const w = await startLabeler(a);
    const jobId = await enqueue(d.db, d.dialect, LABEL_EMAIL_TASK, { id: 'nope' }, new Date());
    await w.drain();
    const job = await d.db.selectFrom('jobs').select(['status', 'attempts']).where('id', '=', jobId!).executeTakeFirstOrThrow();
    expect(job).toEqual({ status: 'failed', attempts: 1 });
  });
});

describe('labelRetryAfterSeconds', () => {
  const at = (receivedAt: string) => ({ received_at: receivedAt });
  const now = new Date('2025-01-01T12:00:00.000Z');
  it.each([
    ['just arrived', '2025-01-01T12:00:00.000Z', 2],
    ['a clock a little ahead of ours', '2025-01-01T12:00:03.000Z', 2],
    ['9 s old', '2025-01-01T11:59:51.000Z', 2],
    ['30 s old', '2025-01-01T11:59:30.000Z', 5],
    ['ten minutes old', '2025-01-01T11:50:00.000Z', 60],
    ['a day old', '2024-12-31T12:00:00.000Z', 60],
    ['an unreadable time', 'garbage', 2],
  ])('%s', (_name, receivedAt, seconds) => {
    expect(labelRetryAfterSeconds(at(receivedAt), now)).toBe(seconds);
  });
});
