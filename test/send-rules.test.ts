import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DATABASES, startTestApp, type TestApp } from './harness.ts';
import { mailboxWithAddress, sendMail } from './smtp-helpers.ts';
import { addMember, drain, listEmails, send, sent, zone } from './outbound-helpers.ts';
import { setAccountStatus, setAccountSuspended } from '../src/accounts/accounts.service.ts';
import { usagePeriod } from '../src/inbound/usage.ts';
import { uploadFile } from './files-helpers.ts';

// Every refusal of POST /v1/mailboxes/{id}/emails, each with its own code; and the
// sending_enabled / sending_blocked_reason fields that announce the state-based ones.

const DNS = zone({
  // Senders that pass SPF from 127.0.0.1 (the test's SMTP client), aligned with their From.
  'partner.test': { TXT: [['v=spf1 ip4:127.0.0.1 -all']] },
  // SPF passes for this envelope domain, but its mail claims another From domain.
  'evil.test': { TXT: [['v=spf1 ip4:127.0.0.1 -all']] },
  // No verdict either way: not authenticated (and not junk).
  'neutral.test': { TXT: [['v=spf1 ?all']] },
});

function expectError(res: { status: number; body: any; text: string; headers: Headers }, status: number, code: string) {
  expect(res.status, res.text).toBe(status);
  expect(res.body.success).toBe(false);
  expect(res.body.error.code).toBe(code);
  return res.body.error;
}

for (const kind of DATABASES) {
  describe(`send rules [${kind}]`, () => {
    let app: TestApp;
    beforeAll(async () => {
      app = await startTestApp(kind, { CUBBY_SEND_RATE_PER_HOUR: '5' }, { resolver: DNS });
    });
    afterAll(async () => {
      await app?.stop();
    });

    async function received(box: { address: string }, from: string, extra: { replyTo?: string; headerFrom?: string } = {}) {
      const headerFrom = extra.headerFrom ?? from;
      const raw = [`From: ${headerFrom}`, `To: ${box.address}`, `Subject: Hello from ${headerFrom}`, `Message-ID: <${Math.random().toString(36).slice(2)}@${from.split('@')[1]}>`, ...(extra.replyTo ? [`Reply-To: ${extra.replyTo}`] : []), '', 'Hi.', ''].join('\r\n');
      const r = await sendMail(app, { from, to: box.address, raw });
      expect(r.emailIds).toHaveLength(1);
      return r.emailIds[0]!;
    }

    it('allows account members and other mailboxes of the account; refuses its own address, strangers and other accounts', async () => {
      const owner = await app.user({ plan: 'free' });
      const colleague = await app.user({ email: `colleague-${Date.now()}@elsewhere.test` });
      await addMember(app, owner, colleague);
      const a = await mailboxWithAddress(app, owner);
      const b = await mailboxWithAddress(app, owner);
      const foreign = await mailboxWithAddress(app, await app.user());

      const ok = await sent(app, owner.key, a.id, { to: [b.address], cc: [colleague.email.toUpperCase(), owner.email], subject: 'Team', text: 'Hi all' });
      expect(Object.keys(ok.delivery.recipients)).toEqual([b.address, colleague.email.toLowerCase(), owner.email.toLowerCase()]);

      expect(expectError(await send(app, owner.key, a.id, { to: [a.address], subject: 'x', text: 'y' }), 403, 'EMAIL_RECIPIENT_NOT_ALLOWED').details).toMatchObject({ address: a.address, reason: 'own_address' });
      expect(expectError(await send(app, owner.key, a.id, { to: ['nobody@partner.test'], subject: 'x', text: 'y' }), 403, 'EMAIL_RECIPIENT_NOT_ALLOWED').details).toMatchObject({ address: 'nobody@partner.test', reason: 'not_a_known_correspondent' });
      expectError(await send(app, owner.key, a.id, { to: [b.address], cc: [foreign.address], subject: 'x', text: 'y' }), 403, 'EMAIL_RECIPIENT_NOT_ALLOWED');
      // Nothing was stored for the refused sends.
      expect(await listEmails(app, owner.key, a.id, { direction: 'sent' })).toHaveLength(1);
    });

    it('outside senders who emailed the mailbox: authenticated ones on paid plans only; unauthenticated, unaligned and Reply-To never', async () => {
      const paid = await app.user({ plan: 'paid' });
      const box = await mailboxWithAddress(app, paid);
      const alice = await received(box, 'alice@partner.test', { replyTo: 'boss@partner-other.test' });
      await received(box, 'mallory@neutral.test');
      const forged = await received(box, 'bounce@evil.test', { headerFrom: 'ceo@bank.test' });
      await drain(app);

      const reply = await sent(app, paid.key, box.id, { in_reply_to: alice, text: 'Got it' });
      expect(reply.to_addresses).toEqual([{ address: 'alice@partner.test', name: null }]);
      expect(reply.subject).toBe('Re: Hello from alice@partner.test');
      // Reply-To named someone else: it neither receives the default reply nor becomes writable.
      expectError(await send(app, paid.key, box.id, { to: ['boss@partner-other.test'], subject: 'x', text: 'y' }), 403, 'EMAIL_RECIPIENT_NOT_ALLOWED');
      expectError(await send(app, paid.key, box.id, { to: ['mallory@neutral.test'], subject: 'x', text: 'y' }), 403, 'EMAIL_RECIPIENT_UNAUTHENTICATED');
      // SPF passed for evil.test, which says nothing about the From address at bank.test.
      expectError(await send(app, paid.key, box.id, { to: ['ceo@bank.test'], subject: 'x', text: 'y' }), 403, 'EMAIL_RECIPIENT_UNAUTHENTICATED');
      expectError(await send(app, paid.key, box.id, { in_reply_to: forged, text: 'y' }), 422, 'EMAIL_RECIPIENT_REQUIRED');

      const free = await app.user({ plan: 'free' });
      const freeBox = await mailboxWithAddress(app, free);
      const fromAlice = await received(freeBox, 'alice@partner.test');
      expectError(await send(app, free.key, freeBox.id, { to: ['alice@partner.test'], subject: 'x', text: 'y' }), 403, 'EMAIL_RECIPIENT_PLAN_REQUIRED');
      expectError(await send(app, free.key, freeBox.id, { in_reply_to: fromAlice, text: 'y' }), 403, 'EMAIL_RECIPIENT_PLAN_REQUIRED');
    });

    it('validates the message: recipients, subject, bodies, reply target, attachments, permission', async () => {
      const user = await app.user();
      const a = await mailboxWithAddress(app, user);
      const b = await mailboxWithAddress(app, user);
      const eleven = Array.from({ length: 11 }, (_, i) => `x${i}@partner.test`);
      expect(expectError(await send(app, user.key, a.id, { to: eleven.slice(0, 6), cc: eleven.slice(6), subject: 's', text: 't' }), 422, 'EMAIL_TOO_MANY_RECIPIENTS').details).toMatchObject({ count: 11, max: 10 });
      expectError(await send(app, user.key, a.id, { subject: 's', text: 't' }), 422, 'EMAIL_RECIPIENT_REQUIRED');
      expect(expectError(await send(app, user.key, a.id, { to: [b.address], text: 't' }), 422, 'INVALID_ARGUMENT').details.field).toBe('subject');
      expectError(await send(app, user.key, a.id, { to: [b.address], subject: 's' }), 422, 'INVALID_ARGUMENT');
      expectError(await send(app, user.key, a.id, { to: ['not an address'], subject: 's', text: 't' }), 422, 'INVALID_ARGUMENT');
      expectError(await send(app, user.key, a.id, { to: [b.address], bcc: [b.address], subject: 's', text: 't' }), 422, 'INVALID_ARGUMENT');
      const big = 'x'.repeat(1024 * 1024 + 1);
      expect(expectError(await send(app, user.key, a.id, { to: [b.address], subject: 's', text: big }), 422, 'EMAIL_BODY_TOO_LARGE').details.field).toBe('text');
      expect(expectError(await send(app, user.key, a.id, { to: [b.address], subject: 's', text: 't', html: big }), 422, 'EMAIL_BODY_TOO_LARGE').details.field).toBe('html');
      // Exactly 1 MiB is fine (multi-byte characters count as bytes).
      await sent(app, user.key, a.id, { to: [b.address], subject: 'big', text: 'é'.repeat(512 * 1024) });

      expectError(await send(app, user.key, a.id, { in_reply_to: 'eml_doesnotexist', text: 't' }), 404, 'EMAIL_NOT_FOUND');
      const mine = (await listEmails(app, user.key, a.id, { direction: 'sent' }))[0];
      expectError(await send(app, user.key, a.id, { in_reply_to: mine.id, text: 't' }), 422, 'EMAIL_REPLY_TARGET_INVALID');
      expectError(await send(app, user.key, b.id, { in_reply_to: mine.id, text: 't' }), 404, 'EMAIL_NOT_FOUND');

      expect(expectError(await send(app, user.key, a.id, { to: [b.address], subject: 's', text: 't', attachment_ids: ['df_missing'] }), 404, 'EMAIL_ATTACHMENT_NOT_FOUND').details.attachment_id).toBe('df_missing');

      const reader = await app.key(user, { scope: 'mailbox_read' });
      expectError(await send(app, reader, a.id, { to: [b.address], subject: 's', text: 't' }), 403, 'PERMISSION_DENIED');
      const other = await app.user();
      expectError(await send(app, other.key, a.id, { to: [b.address], subject: 's', text: 't' }), 404, 'MAILBOX_NOT_FOUND');
    });

    it('attaches files of the mailbox and stores the sent message under _email/ like received mail', async () => {
      const user = await app.user();
      const a = await mailboxWithAddress(app, user, 'Files Desk');
      const b = await mailboxWithAddress(app, user);
      const put = await uploadFile(app, user.key, a.id, 'reports/q3.txt', 'quarter three');
      expect([200, 201], put.text).toContain(put.status);
      const fileId = put.body.data.file.id;
      const email = await sent(app, user.key, a.id, { to: [b.address], subject: 'Report', text: 'Attached.', html: '<p>Attached.</p>', attachment_ids: [fileId] });
      expect(email.attachment_count).toBe(1);
      const detail = (await app.request('GET', `/v1/mailboxes/${a.id}/emails/${email.id}`, { key: user.key, query: { include_storage: true } })).body.data.email;
      expect(detail.files.directory).toMatch(new RegExp(`^_email/\\d{4}/\\d{2}/\\d{2}/${email.id}$`));
      expect(detail.attachments.map((x: any) => [x.filename, x.size_bytes])).toEqual([['q3.txt', 13]]);
      expect(detail.body_text).toMatch(/^Attached\.\s*$/);
      await drain(app);
      const got = (await listEmails(app, user.key, b.id))[0];
      expect(got.attachment_count).toBe(1);
      expect(got.from_addresses).toEqual([{ address: a.address, name: 'Files Desk' }]);
    });

    it('the monthly recipient allowance counts each recipient once per period, shared by the billing group', async () => {
      const agency = await app.user({ plan: 'free' });
      const client = await app.user({ plan: 'free' });
      const db = app.started.deps.db;
      await db.updateTable('accounts').set({ parent_account_id: agency.accountId }).where('id', '=', client.accountId).execute();
      const a = await mailboxWithAddress(app, client);
      const b = await mailboxWithAddress(app, client);
      const c = await mailboxWithAddress(app, client);
      // 99 of the free plan's 100 recipients used this month by the group (e.g. the agency's own mail).
      const period = usagePeriod(new Date());
      await db
        .insertInto('sent_recipients_usage')
        .values(Array.from({ length: 99 }, (_, i) => ({ scope_id: agency.accountId, period, address: `earlier${i}@partner.test`, created_at: new Date().toISOString() })))
        .execute();
      const err = expectError(await send(app, client.key, a.id, { to: [b.address, c.address], subject: 's', text: 't' }), 429, 'EMAIL_SEND_LIMIT_REACHED');
      expect(err.details).toMatchObject({ limit: 'max_sent_emails_per_month', max: 100, used: 99 });
      await sent(app, client.key, a.id, { to: [b.address], subject: 'one', text: 't' });
      await sent(app, client.key, a.id, { to: [b.address], subject: 'same one again', text: 't' });
      expectError(await send(app, client.key, a.id, { to: [c.address], subject: 's', text: 't' }), 429, 'EMAIL_SEND_LIMIT_REACHED');
    });

    it('a mailbox sending too fast gets 429 EMAIL_SEND_RATE_LIMITED without Retry-After', async () => {
      const user = await app.user();
      const a = await mailboxWithAddress(app, user);
      const b = await mailboxWithAddress(app, user);
      for (let i = 0; i < 5; i++) await sent(app, user.key, a.id, { to: [b.address], subject: `n${i}`, text: 't' });
      const res = await send(app, user.key, a.id, { to: [b.address], subject: 'one too many', text: 't' });
      const err = expectError(res, 429, 'EMAIL_SEND_RATE_LIMITED');
      expect(res.headers.get('retry-after')).toBeNull();
      expect(err.details?.retry_after).toBeUndefined();
      // Another mailbox of the account has its own rate.
      await sent(app, user.key, b.id, { to: [a.address], subject: 'fine', text: 't' });
    });

    it('sending_enabled is false with a reason wherever state forbids sending, and sending is refused the same way', async () => {
      const user = await app.user();
      const a = await mailboxWithAddress(app, user);
      const b = await mailboxWithAddress(app, user);
      const state = async (id: string) => (await app.request('GET', `/v1/mailboxes/${id}`, { key: user.key })).body.data.mailbox.email;
      expect(await state(a.id)).toMatchObject({ sending_enabled: true });
      expect((await state(a.id)).sending_blocked_reason).toBeUndefined();
      const settings = (await app.request('GET', `/v1/mailboxes/${a.id}/email`, { key: user.key })).body.data;
      expect(settings.sending_enabled ?? settings.settings?.sending_enabled ?? settings.email?.sending_enabled).toBe(true);

      const db = app.started.deps.db;
      await db.updateTable('mailboxes').set({ sending_enabled: 0 }).where('id', '=', a.id).execute();
      expect(await state(a.id)).toMatchObject({ sending_enabled: false, sending_blocked_reason: 'sending_disabled' });
      expect(expectError(await send(app, user.key, a.id, { to: [b.address], subject: 's', text: 't' }), 403, 'EMAIL_SENDING_DISABLED').details.reason).toBe('sending_disabled');
      await db.updateTable('mailboxes').set({ sending_enabled: 1 }).where('id', '=', a.id).execute();

      expect((await app.request('POST', `/v1/mailboxes/${a.id}/archive`, { key: user.key, body: {} })).status).toBe(200);
      expect(await state(a.id)).toMatchObject({ sending_enabled: false, sending_blocked_reason: 'mailbox_archived' });
      expect(expectError(await send(app, user.key, a.id, { to: [b.address], subject: 's', text: 't' }), 403, 'EMAIL_SENDING_DISABLED').details.reason).toBe('mailbox_archived');

      await setAccountStatus(db, user.accountId, 'read_only', 'test', new Date());
      expect(await state(b.id)).toMatchObject({ sending_enabled: false, sending_blocked_reason: 'account_read_only' });
      expectError(await send(app, user.key, b.id, { to: [user.email], subject: 's', text: 't' }), 423, 'ACCOUNT_READ_ONLY');
      await setAccountStatus(db, user.accountId, 'active', null, new Date());
      await setAccountSuspended(db, user.accountId, true, new Date());
      expect(await state(b.id)).toMatchObject({ sending_enabled: false, sending_blocked_reason: 'account_suspended' });
      expectError(await send(app, user.key, b.id, { to: [user.email], subject: 's', text: 't' }), 403, 'ACCOUNT_SUSPENDED');
    });
  });
}

