import { expect, it } from 'vitest';
import { describeEachDatabase } from './harness.ts';
import { mailboxWithAddress, sendMail } from './smtp-helpers.ts';
import { drain, expectError, inboundEmail, rcpt, received, rotate, rotateA, settings } from './address-helpers.ts';
import { smtpSession } from './smtp-helpers.ts';

// Email settings on the platform domain: the settings read, rotation on both surfaces (with its
// monthly allowance and idempotent replays), aliases, and the sender allowlist, each checked
// over real SMTP where it changes what is received.

const PLATFORM = /^[a-z0-9.-]+-[a-z0-9]{4}@mail\.localhost$/;

describeEachDatabase('email settings: read, rotation, aliases, allowlist', (app) => {
  it('reads every settings field; the allowlist only for administrators with mailbox-admin; write permission needed', async () => {
    const u = await app().user({ plan: 'paid' });
    const box = await mailboxWithAddress(app(), u, 'Receipts');
    const s = await settings(app(), u.key, box.id);
    expect(s).toMatchObject({
      address: box.address,
      username: box.address.split('@')[0],
      message_count: 0,
      unread_count: 0,
      last_received_at: null,
      receiving_enabled: true,
      sending_enabled: true,
      aliases: [],
      available_domains: [{ hostname: 'mail.localhost', kind: 'platform' }],
      assignment: null,
      customization: { allowed: true, blocked_reason: null, settings_url: `${app().base}/settings` },
      sender_allowlist: { enabled: false, entries: [], version: '0', max_entries: 100, editable: true },
      rotations: { monthly_limit: 10, used: 0, remaining: 10 },
    });
    expect(s.address).toMatch(/^receipts-[a-z0-9]{4}@mail\.localhost$/);
    expect(s).not.toHaveProperty('blocked_reason');

    const writer = await app().key(u, { scope: 'mailbox_write' });
    const w = await settings(app(), writer, box.id);
    expect(w).not.toHaveProperty('sender_allowlist');
    expect(w.customization).toMatchObject({ allowed: false, blocked_reason: 'admin_required' });
    const reader = await app().key(u, { scope: 'mailbox_read' });
    expectError(await app().request('GET', `/v1/mailboxes/${box.id}/email`, { key: reader }), 403, 'PERMISSION_DENIED');
    const other = await app().user();
    expectError(await app().request('GET', `/v1/mailboxes/${box.id}/email`, { key: other.key }), 404, 'MAILBOX_NOT_FOUND');

    const free = await app().user();
    const freeBox = await mailboxWithAddress(app(), free);
    expect((await settings(app(), free.key, freeBox.id)).customization).toMatchObject({ allowed: false, blocked_reason: 'paid_plan_required' });
  });

  it('rotates on surface R: a given username gets a new suffix; the old address stays as an alias by default and keeps receiving', async () => {
    const u = await app().user({ plan: 'paid' });
    const box = await mailboxWithAddress(app(), u, 'Orders');
    expectError(await rotate(app(), u.key, box.id, { confirm: undefined, expected_address: box.address }), 422, 'INVALID_ARGUMENT');
    expectError(await rotate(app(), u.key, box.id, { confirm: false, expected_address: box.address }), 422, 'INVALID_ARGUMENT');
    expectError(await rotate(app(), u.key, box.id, {}), 422, 'INVALID_ARGUMENT');
    const stale = await rotate(app(), u.key, box.id, { expected_address: 'orders-zzzz@mail.localhost' });
    expectError(stale, 409, 'EMAIL_ADDRESS_CHANGED');
    expectError(await rotate(app(), u.key, box.id, { expected_address: box.address, username: 'postmaster' }), 422, 'EMAIL_USERNAME_RESERVED');

    const res = await rotate(app(), u.key, box.id, { expected_address: box.address, username: 'Sales.Team' });
    expect(res.status, res.text).toBe(200);
    const s = res.body.data;
    expect(s.address).toMatch(/^sales\.team-[a-z0-9]{4}@mail\.localhost$/);
    expect(s.username).toBe(s.address.split('@')[0]);
    expect(s.aliases).toEqual([{ id: expect.stringMatching(/^adr_/), address: box.address, active: true }]);
    expect(s.rotations).toMatchObject({ used: 1, remaining: 9 });
    // The mailbox read shows the new address too.
    expect((await app().request('GET', `/v1/mailboxes/${box.id}`, { key: u.key })).body.data.mailbox.email.address).toBe(s.address);

    await sendMail(app(), { to: box.address, subject: 'to the old one' });
    await sendMail(app(), { to: s.address, subject: 'to the new one' });
    await drain(app());
    const mail = await received(app(), u, box.id);
    expect(mail.map((m) => m.delivered_to).sort()).toEqual([box.address, s.address].sort());

    // The same expected address again is stale now.
    expectError(await rotate(app(), u.key, box.id, { expected_address: box.address }), 409, 'EMAIL_ADDRESS_CHANGED');
    // keep_old_as_alias=false retires the old address: 550 from then on, and it is never handed out again.
    const again = await rotate(app(), u.key, box.id, { expected_address: s.address, keep_old_as_alias: false });
    expect(again.status, again.text).toBe(200);
    expect(again.body.data.address).toMatch(/^orders-[a-z0-9]{4}@mail\.localhost$/); // generated from the title
    expect(again.body.data.aliases.map((a: any) => a.address)).toEqual([box.address]);
    expect(await rcpt(app(), s.address)).toMatch(/^550 5\.1\.1 /);
    expect(await rcpt(app(), box.address)).toMatch(/^250 /);
  });

  it('refuses surface R rotation on the free plan and for write-only keys', async () => {
    const free = await app().user();
    const box = await mailboxWithAddress(app(), free);
    expectError(await rotate(app(), free.key, box.id, { expected_address: box.address }), 403, 'EMAIL_CUSTOMIZATION_UNAVAILABLE');
    const paid = await app().user({ plan: 'paid' });
    const pbox = await mailboxWithAddress(app(), paid);
    const writer = await app().key(paid, { scope: 'mailbox_write' });
    expectError(await rotate(app(), writer, pbox.id, { expected_address: pbox.address }), 403, 'PERMISSION_DENIED');
    expectError(await rotate(app(), paid.key, pbox.id, { expected_address: pbox.address, domain: 'example.org' }), 422, 'EMAIL_DOMAIN_NOT_AVAILABLE');
  });

  it('needs a free alias slot to keep the old address: EMAIL_ALIAS_LIMIT, unless keep_old_as_alias is false', async () => {
    const u = await app().user({ plan: 'paid' }); // five aliases per mailbox
    const box = await mailboxWithAddress(app(), u);
    for (let i = 0; i < 5; i++) {
      const add = await app().request('POST', `/v1/mailboxes/${box.id}/email/aliases`, { key: u.key, body: { username: `extra${i}` } });
      expect(add.status, add.text).toBe(202);
    }
    // Pending adds hold their slots too.
    expectError(await app().request('POST', `/v1/mailboxes/${box.id}/email/aliases`, { key: u.key, body: { username: 'sixth' } }), 409, 'EMAIL_ALIAS_LIMIT');
    await drain(app());
    expect((await settings(app(), u.key, box.id)).aliases).toHaveLength(5);
    expectError(await rotate(app(), u.key, box.id, { expected_address: box.address }), 409, 'EMAIL_ALIAS_LIMIT');
    expectError(await rotate(app(), u.key, box.id, { expected_address: box.address, keep_old_as_alias: true }), 409, 'EMAIL_ALIAS_LIMIT');
    const res = await rotate(app(), u.key, box.id, { expected_address: box.address, keep_old_as_alias: false });
    expect(res.status, res.text).toBe(200);
    expect(await rcpt(app(), box.address)).toMatch(/^550 5\.1\.1 /);
  });

  it('adds an alias (202, pending until activated, then receiving) and deletes it (550 after; saved emails stay)', async () => {
    const u = await app().user({ plan: 'paid' });
    const box = await mailboxWithAddress(app(), u);
    const add = await app().request('POST', `/v1/mailboxes/${box.id}/email/aliases`, { key: u.key, body: { username: 'Accounts.Payable' } });
    expect(add.status, add.text).toBe(202);
    expect(add.body.data.address).toBe(box.address); // the primary is unchanged
    expect(add.body.data.assignment).toMatchObject({ kind: 'alias', hostname: 'mail.localhost', error: null });
    // Never disclosed while pending (the activation job may already have run by now).
    if (add.body.data.assignment.status === 'pending') expect(add.text).not.toMatch(/accounts\.payable-[a-z0-9]{4}@/);
    await drain(app());
    const s = await settings(app(), u.key, box.id);
    expect(s.assignment).toMatchObject({ id: add.body.data.assignment.id, status: 'active' });
    expect(s.aliases).toEqual([{ id: expect.stringMatching(/^adr_/), address: expect.stringMatching(/^accounts\.payable-[a-z0-9]{4}@mail\.localhost$/), active: true }]);
    const alias = s.aliases[0];

    const sent = await sendMail(app(), { to: alias.address, subject: 'to the alias' });
    expect(sent.emailIds).toHaveLength(1);
    await drain(app());
    expect((await received(app(), u, box.id))[0]).toMatchObject({ id: sent.emailIds[0], delivered_to: alias.address });

    expectError(await app().request('DELETE', `/v1/mailboxes/${box.id}/email/aliases/adr_nope`, { key: u.key }), 404, 'EMAIL_ALIAS_NOT_FOUND');
    const del = await app().request('DELETE', `/v1/mailboxes/${box.id}/email/aliases/${alias.id}`, { key: u.key });
    expect(del.status, del.text).toBe(200);
    expect(del.body.data).toEqual({ deleted: true, id: alias.id });
    expect(await rcpt(app(), alias.address)).toMatch(/^550 5\.1\.1 /);
    expect((await settings(app(), u.key, box.id)).aliases).toEqual([]);
    expect((await received(app(), u, box.id)).map((m) => m.id)).toEqual(sent.emailIds);
    // Deleting it again: it is no alias any more.
    expectError(await app().request('DELETE', `/v1/mailboxes/${box.id}/email/aliases/${alias.id}`, { key: u.key }), 404, 'EMAIL_ALIAS_NOT_FOUND');

    const free = await app().user();
    const freeBox = await mailboxWithAddress(app(), free);
    expectError(await app().request('POST', `/v1/mailboxes/${freeBox.id}/email/aliases`, { key: free.key, body: { username: 'x' } }), 403, 'EMAIL_CUSTOMIZATION_UNAVAILABLE');
    const writer = await app().key(u, { scope: 'mailbox_write' });
    expectError(await app().request('POST', `/v1/mailboxes/${box.id}/email/aliases`, { key: writer, body: { username: 'x' } }), 403, 'PERMISSION_DENIED');
  });

  it('a delivery accepted at RCPT stops when its alias is deleted before the data ends; aliases beyond the plan allowance stop receiving', async () => {
    const u = await app().user({ plan: 'paid' });
    const box = await mailboxWithAddress(app(), u);
    for (const name of ['first', 'second']) expect((await app().request('POST', `/v1/mailboxes/${box.id}/email/aliases`, { key: u.key, body: { username: name } })).status).toBe(202);
    await drain(app());
    const [first, second] = (await settings(app(), u.key, box.id)).aliases;

    const smtp = await smtpSession(app());
    expect(await smtp.send('EHLO client.example')).toMatch(/^250/);
    expect(await smtp.send('MAIL FROM:<sender@example.com>')).toMatch(/^250/);
    expect(await smtp.send(`RCPT TO:<${first.address}>`)).toMatch(/^250/);
    expect(await smtp.send('DATA')).toMatch(/^354/);
    expect((await app().request('DELETE', `/v1/mailboxes/${box.id}/email/aliases/${first.id}`, { key: u.key })).status).toBe(200);
    expect(await smtp.send('Subject: late\r\n\r\nhello\r\n.')).toMatch(/^550 5\.1\.1 /);
    smtp.close();
    expect(await received(app(), u, box.id)).toEqual([]);

    // A downgrade to a plan without aliases: the alias stays reserved but is inactive and refused.
    await app().started.deps.db.updateTable('accounts').set({ plan: 'free' }).where('id', '=', u.accountId).execute();
    expect((await settings(app(), u.key, box.id)).aliases).toEqual([{ id: second.id, address: second.address, active: false }]);
    expect(await rcpt(app(), second.address)).toMatch(/^550 5\.2\.1 .*alias/);
    expect(await rcpt(app(), box.address)).toMatch(/^250 /);
  });

  it('replaces the sender allowlist with expected_version (a new version on every update) and enforces it over SMTP', async () => {
    const u = await app().user({ plan: 'paid' });
    const box = await mailboxWithAddress(app(), u);
    const patch = (body: unknown) => app().request('PATCH', `/v1/mailboxes/${box.id}/email/allowlist`, { key: u.key, body });
    const first = await patch({ sender_allowlist: { enabled: true, entries: ['Boss@Example.com', 'trusted.org', '@partner.net', 'boss@example.com'] }, expected_version: '0' });
    expect(first.status, first.text).toBe(200);
    const list = first.body.data.sender_allowlist;
    expect(list).toMatchObject({ enabled: true, entries: ['boss@example.com', '@trusted.org', '@partner.net'], max_entries: 100, editable: true });
    expect(list.version).not.toBe('0');

    expect(await rcpt(app(), box.address, 'boss@example.com')).toMatch(/^250 /);
    expect(await rcpt(app(), box.address, 'anyone@trusted.org')).toMatch(/^250 /);
    expect(await rcpt(app(), box.address, 'stranger@example.com')).toMatch(/^550 5\.7\.1 .*allowlist/);

    expectError(await patch({ sender_allowlist: { enabled: false, entries: [] }, expected_version: '0' }), 409, 'SENDER_ALLOWLIST_CONFLICT');
    const same = await patch({ sender_allowlist: { enabled: true, entries: list.entries }, expected_version: list.version });
    expect(same.status).toBe(200);
    expect(same.body.data.sender_allowlist.version).not.toBe(list.version);
    expect(same.body.data.sender_allowlist.entries).toEqual(list.entries);

    const tooMany = await patch({ sender_allowlist: { enabled: true, entries: Array.from({ length: 101 }, (_, i) => `s${i}@example.com`) }, expected_version: same.body.data.sender_allowlist.version });
    expectError(tooMany, 422, 'INVALID_ARGUMENT');
    expect(tooMany.body.error.details.max_entries).toBe(100);
    expectError(await patch({ sender_allowlist: { enabled: true, entries: ['not an address'] }, expected_version: same.body.data.sender_allowlist.version }), 422, 'INVALID_ARGUMENT');

    const off = await patch({ sender_allowlist: { enabled: false, entries: [] }, expected_version: same.body.data.sender_allowlist.version });
    expect(off.status).toBe(200);
    expect(await rcpt(app(), box.address, 'stranger@example.com')).toMatch(/^250 /);
    expect((await settings(app(), u.key, box.id)).sender_allowlist).toEqual(off.body.data.sender_allowlist);

    const writer = await app().key(u, { scope: 'mailbox_write' });
    expectError(await app().request('PATCH', `/v1/mailboxes/${box.id}/email/allowlist`, { key: writer, body: { sender_allowlist: { enabled: false, entries: [] }, expected_version: '0' } }), 403, 'PERMISSION_DENIED');
  });

  it('rotates on surface A: confirm and current_address required, INBOUND_EMAIL_ADDRESS_CHANGED, idempotent replay, the free allowance of one a month', async () => {
    const u = await app().user(); // free: one rotation a month
    const created = await app().request('POST', '/api/v1/buckets', { key: u.key, body: { bucket: { title: 'Invoices' } } });
    const bucket = created.body.data.bucket;
    const address = bucket.inbound_email.address;
    expectError(await rotateA(app(), u.key, bucket.id, { confirm: undefined, current_address: address }), 422, 'INVALID_ARGUMENT');
    expectError(await rotateA(app(), u.key, bucket.id, {}), 422, 'INVALID_ARGUMENT');
    expectError(await rotateA(app(), u.key, bucket.id, { current_address: 'invoices-zzzz@mail.localhost' }), 409, 'INBOUND_EMAIL_ADDRESS_CHANGED');
    expectError(await rotateA(app(), u.key, bucket.id, { current_address: address, domain: 'example.org' }), 409, 'INBOUND_EMAIL_ROTATION_UNAVAILABLE');
    const reader = await app().key(u, { scope: 'mailbox_read' });
    expectError(await rotateA(app(), reader, bucket.id, { current_address: address }), 403, 'PERMISSION_DENIED');
    expectError(await rotateA(app(), u.key, 'bkt_missing', { current_address: address }), 404, 'BUCKET_NOT_FOUND');

    const body = { current_address: address, idempotency_key: 'rotate-invoices-1' };
    const res = await rotateA(app(), u.key, bucket.id, body);
    expect(res.status, res.text).toBe(200);
    const data = res.body.data;
    expect(data.address).toMatch(/^invoices-[a-z0-9]{4}@mail\.localhost$/);
    expect(data.address).not.toBe(address);
    expect(data).toMatchObject({ configured: true, receiving_enabled: true, aliases: [], assignment: null, rotations: { monthly_limit: 1, used: 1, remaining: 0 } });
    // Surface A keeps no alias: the old address is retired.
    expect(await rcpt(app(), address)).toMatch(/^550 5\.1\.1 /);
    expect(await rcpt(app(), data.address)).toMatch(/^250 /);

    // The retry with the same key answers with the state, charging nothing more.
    const replay = await rotateA(app(), u.key, bucket.id, body);
    expect(replay.status, replay.text).toBe(200);
    expect(replay.body.data.address).toBe(data.address);
    expect(replay.body.data.rotations.used).toBe(1);
    expectError(await rotateA(app(), u.key, bucket.id, { ...body, domain: 'platform' }), 409, 'IDEMPOTENCY_KEY_CONFLICT');

    const limited = await rotateA(app(), u.key, bucket.id, { current_address: data.address });
    expectError(limited, 429, 'INBOUND_EMAIL_ROTATION_LIMIT');
    expect(limited.body.error.details).toMatchObject({ limit: 'max_email_address_rotations_per_month', max: 1 });
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
    expect((await inboundEmail(app(), u.key, bucket.id)).address).toBe(data.address);
  });

  it('shares the rotation allowance across the billing group and refuses rotation on archived or read-only mailboxes', async () => {
    const u = await app().user();
    const a = await mailboxWithAddress(app(), u);
    const b = await mailboxWithAddress(app(), u);
    expect((await rotateA(app(), u.key, a.id, { current_address: a.address })).status).toBe(200);
    expectError(await rotateA(app(), u.key, b.id, { current_address: b.address }), 429, 'INBOUND_EMAIL_ROTATION_LIMIT');

    const p = await app().user({ plan: 'paid' });
    const box = await mailboxWithAddress(app(), p);
    expect((await app().request('POST', `/v1/mailboxes/${box.id}/archive`, { key: p.key, body: {} })).status).toBe(200);
    expectError(await rotate(app(), p.key, box.id, { expected_address: box.address }), 409, 'MAILBOX_ARCHIVED');
    expectError(await rotateA(app(), p.key, box.id, { current_address: box.address }), 409, 'INBOUND_EMAIL_ROTATION_UNAVAILABLE');
    const ro = await app().user({ plan: 'paid' });
    const roBox = await mailboxWithAddress(app(), ro);
    await app().started.deps.db.updateTable('accounts').set({ status: 'read_only' }).where('id', '=', ro.accountId).execute();
    const refused = await rotateA(app(), ro.key, roBox.id, { current_address: roBox.address });
    expectError(refused, 423, 'ACCOUNT_READ_ONLY');
    expect(refused.body.error.read_only).toBe(true);
  });

  it('two concurrent rotations of one address: one wins, the other is told the address changed (or the allowance is used); charged once', async () => {
    const u = await app().user();
    const box = await mailboxWithAddress(app(), u);
    const results = await Promise.all([rotateA(app(), u.key, box.id, { current_address: box.address }), rotateA(app(), u.key, box.id, { current_address: box.address })]);
    const codes = results.map((r) => (r.status === 200 ? 'ok' : r.body.error.code)).sort();
    expect(codes[1]).toBe('ok');
    expect(['INBOUND_EMAIL_ADDRESS_CHANGED', 'INBOUND_EMAIL_ROTATION_LIMIT']).toContain(codes[0]);
    const state = await inboundEmail(app(), u.key, box.id);
    expect(state.rotations.used).toBe(1);
    expect(state.address).toBe(results.find((r) => r.status === 200)!.body.data.address);
  });

  it('platform addresses keep their shape after rotation', async () => {
    const u = await app().user({ plan: 'paid' });
    const box = await mailboxWithAddress(app(), u, '!!!');
    const res = await rotate(app(), u.key, box.id, { expected_address: box.address });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.address).toMatch(PLATFORM);
  });
});
