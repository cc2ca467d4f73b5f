import { expect, it } from 'vitest';
import { describeEachDatabase, type TestApp, type TestUser } from './harness.ts';
import { addMembership, dbOf } from './factories.ts';
import { setAccountStatus } from '../src/accounts/accounts.service.ts';

const ID = /^bkt_[A-Za-z0-9]+$/;

async function create(app: TestApp, key: string, mailbox?: Record<string, unknown>, extra: Record<string, unknown> = {}) {
  return app.request('POST', '/v1/mailboxes', { key, body: { ...(mailbox ? { mailbox } : {}), ...extra } });
}

async function createOk(app: TestApp, key: string, mailbox?: Record<string, unknown>) {
  const res = await create(app, key, mailbox);
  expect(res.status, res.text).toBe(201);
  return res.body.data.mailbox;
}

describeEachDatabase('mailboxes (surface R)', (app) => {
  it('creates a mailbox with a platform address: username prefix plus a permanent 4-character suffix', async () => {
    const u = await app().user();
    const m = await createOk(app(), u.key, { email: { username: 'Invoices' }, description: 'bills', metadata: { a: 1 } });
    expect(m.id).toMatch(ID);
    expect(m.account_id).toBe(u.accountId);
    expect(m.title).toBe('Invoices');
    expect(m.email.address).toMatch(/^invoices-[a-z0-9]{4}@mail\.localhost$/);
    expect(m.email).toMatchObject({ message_count: 0, unread_count: 0, last_received_at: null, receiving_enabled: true, sending_enabled: true });
    expect(m.email).not.toHaveProperty('blocked_reason');
    expect(m).toMatchObject({ description: 'bills', metadata: { a: 1 }, archived: false, archived_at: null, storage_bytes: 0, files_count: 0, version_id: null, version_number: 0 });
    expect(m.lock).toEqual({ locked: false, locked_until: null, kind: null, message: null, progress: null, locked_by: null, locked_by_api_key: null });
    expect(m.dashboard_url).toBe(`${app().base}/mailboxes/${m.id}`);
    expect(m.archive).toMatchObject({ allowed: true });
    expect(m.unarchive).toMatchObject({ allowed: false, blocked_reason: 'not_archived' });
    expect(m.delete).toMatchObject({ allowed: false, blocked_reason: 'not_archived', required_action: 'archive_first', confirmation: `DELETE ${m.id}` });
    expect(typeof m.metadata_version).toBe('string');
  });

  it('defaults the title to a generated name without its suffix, and an empty body works', async () => {
    const u = await app().user();
    const res = await app().request('POST', '/v1/mailboxes', { key: u.key });
    expect(res.status, res.text).toBe(201);
    const m = res.body.data.mailbox;
    const local = m.email.address.split('@')[0];
    expect(local).toBe(`${m.title}-${local.slice(-4)}`);
  });

  it('refuses a title already used by an active mailbox, case-insensitively; exactly one of two concurrent creates wins', async () => {
    const u = await app().user();
    await createOk(app(), u.key, { title: 'Receipts' });
    const dup = await create(app(), u.key, { title: 'receipts' });
    expect(dup.status).toBe(409);
    expect(dup.body.error.code).toBe('MAILBOX_TITLE_TAKEN');
    const results = await Promise.all([create(app(), u.key, { title: 'Race' }), create(app(), u.key, { title: 'Race' })]);
    expect(results.map((r) => r.status).sort()).toEqual([201, 409]);
    const list = await app().request('GET', '/v1/mailboxes', { key: u.key, query: { q: 'race' } });
    expect(list.body.data.mailboxes).toHaveLength(1);
  });

  it.each([
    ['too long', 'a'.repeat(41), 'EMAIL_USERNAME_INVALID'],
    ['bad characters', 'hello world', 'EMAIL_USERNAME_INVALID'],
    ['leading dot', '.hello', 'EMAIL_USERNAME_INVALID'],
    ['double dot', 'a..b', 'EMAIL_USERNAME_INVALID'],
    ['unicode homoglyph', 'раураl', 'EMAIL_USERNAME_INVALID'],
    ['at sign', 'a@b', 'EMAIL_USERNAME_INVALID'],
    ['reserved postmaster', 'postmaster', 'EMAIL_USERNAME_RESERVED'],
    ['reserved abuse', 'Abuse', 'EMAIL_USERNAME_RESERVED'],
    ['reserved mailer-daemon', 'mailer-daemon', 'EMAIL_USERNAME_RESERVED'],
  ])('refuses an invalid username (%s) and creates nothing', async (_name, username, code) => {
    const u = await app().user();
    const res = await create(app(), u.key, { email: { username } });
    expect(res.status, res.text).toBe(422);
    expect(res.body.error.code).toBe(code);
    expect(res.body.error.details.field).toBe('mailbox.email.username');
    const list = await app().request('GET', '/v1/mailboxes', { key: u.key, query: { status: 'all' } });
    expect(list.body.data.counts.total).toBe(0);
  });

  it('refuses metadata that is not an object or too large, and a domain that is not available', async () => {
    const u = await app().user();
    for (const metadata of [[1, 2], 'text', 5]) {
      const res = await create(app(), u.key, { metadata });
      expect(res.status).toBe(422);
      expect(res.body.error.details.field).toBe('mailbox.metadata');
    }
    const big = await create(app(), u.key, { metadata: { blob: 'x'.repeat(17 * 1024) } });
    expect(big.status).toBe(422);
    expect(big.body.error.details.field).toBe('mailbox.metadata');
    const dom = await create(app(), u.key, { email: { username: 'ok', domain: 'example.com' } });
    expect(dom.status).toBe(422);
    expect(dom.body.error.code).toBe('EMAIL_DOMAIN_NOT_AVAILABLE');
    const unknown = await create(app(), u.key, { colour: 'red' });
    expect(unknown.status).toBe(422);
    expect(unknown.body.error.details.field).toBe('mailbox.colour');
  });

  it('reads without changing the mailbox; foreign and malformed ids answer like missing ones', async () => {
    const u = await app().user();
    const other = await app().user();
    const m = await createOk(app(), u.key, { title: 'Mine' });
    const a = await app().request('GET', `/v1/mailboxes/${m.id}`, { key: u.key });
    const b = await app().request('GET', `/v1/mailboxes/${m.id}`, { key: u.key });
    expect(a.body.data.mailbox).toEqual(b.body.data.mailbox);
    expect(a.body.data.mailbox.updated_at).toBe(m.updated_at);
    for (const id of [m.id, 'bkt_00000000000000000000000000', '../etc/passwd', 'bkt_%00']) {
      const res = await app().request('GET', `/v1/mailboxes/${encodeURIComponent(id)}`, { key: other.key });
      expect(res.status).toBe(404);
      expect(res.body.error.code).toBe('MAILBOX_NOT_FOUND');
    }
    for (const [method, path, body] of [
      ['PATCH', `/v1/mailboxes/${m.id}`, { mailbox: { title: 'x' } }],
      ['POST', `/v1/mailboxes/${m.id}/archive`, {}],
      ['POST', `/v1/mailboxes/${m.id}/unarchive`, {}],
      ['DELETE', `/v1/mailboxes/${m.id}`, { confirmation: `DELETE ${m.id}` }],
    ] as const) {
      const res = await app().request(method, path, { key: other.key, body });
      expect(res.status, `${method} ${path}`).toBe(404);
      expect(res.body.error.code).toBe('MAILBOX_NOT_FOUND');
    }
    const still = await app().request('GET', `/v1/mailboxes/${m.id}`, { key: u.key });
    expect(still.body.data.mailbox).toEqual(a.body.data.mailbox);
  });

  it('PATCH: title clears with null or "", metadata replaces, versions move only on description/metadata, stale version conflicts', async () => {
    const u = await app().user();
    const m = await createOk(app(), u.key, { title: 'Before', metadata: { a: 1, b: 2 } });
    const t = await app().request('PATCH', `/v1/mailboxes/${m.id}`, { key: u.key, body: { mailbox: { title: 'After' } } });
    expect(t.status, t.text).toBe(200);
    expect(t.body.data.mailbox.title).toBe('After');
    expect(t.body.data.mailbox.metadata_version).toBe(m.metadata_version);
    const md = await app().request('PATCH', `/v1/mailboxes/${m.id}`, { key: u.key, body: { mailbox: { metadata: { c: 3 } }, expected_metadata_version: m.metadata_version } });
    expect(md.status).toBe(200);
    expect(md.body.data.mailbox.metadata).toEqual({ c: 3 });
    expect(md.body.data.mailbox.metadata_version).not.toBe(m.metadata_version);
    const stale = await app().request('PATCH', `/v1/mailboxes/${m.id}`, { key: u.key, body: { mailbox: { metadata: {}, title: 'Nope' }, expected_metadata_version: m.metadata_version } });
    expect(stale.status).toBe(409);
    expect(stale.body.error.code).toBe('MAILBOX_METADATA_CONFLICT');
    const after = await app().request('GET', `/v1/mailboxes/${m.id}`, { key: u.key });
    expect(after.body.data.mailbox).toMatchObject({ title: 'After', metadata: { c: 3 } });
    const cleared = await app().request('PATCH', `/v1/mailboxes/${m.id}`, { key: u.key, body: { mailbox: { metadata: {}, title: '' } } });
    expect(cleared.body.data.mailbox).toMatchObject({ title: null, metadata: {} });
    const nulled = await app().request('PATCH', `/v1/mailboxes/${m.id}`, { key: u.key, body: { mailbox: { title: null, description: 'd' } } });
    expect(nulled.body.data.mailbox).toMatchObject({ title: null, description: 'd' });
    const other = await createOk(app(), u.key, { title: 'Taken' });
    const clash = await app().request('PATCH', `/v1/mailboxes/${m.id}`, { key: u.key, body: { mailbox: { title: 'TAKEN' } } });
    expect(clash.status).toBe(409);
    expect(clash.body.error.code).toBe('MAILBOX_TITLE_TAKEN');
    expect(other.title).toBe('Taken');
  });

  it('archive → read-only; unarchive needs admin and suffixes a clashing title; delete needs archive and the confirmation', async () => {
    const u = await app().user();
    const m = await createOk(app(), u.key, { title: 'Project' });
    const early = await app().request('DELETE', `/v1/mailboxes/${m.id}`, { key: u.key, body: { confirmation: m.delete.confirmation } });
    expect(early.status).toBe(409);
    expect(early.body.error.details).toMatchObject({ blocked_reason: 'not_archived', required_action: 'archive_first' });
    const notArchived = await app().request('POST', `/v1/mailboxes/${m.id}/unarchive`, { key: u.key, body: {} });
    expect(notArchived.body.error.code).toBe('MAILBOX_NOT_ARCHIVED');

    const arch = await app().request('POST', `/v1/mailboxes/${m.id}/archive`, { key: u.key, body: {} });
    expect(arch.status).toBe(200);
    expect(arch.body.data.mailbox).toMatchObject({ archived: true, email: { receiving_enabled: false, blocked_reason: 'mailbox_archived' } });
    expect(arch.body.data.mailbox.delete).toMatchObject({ allowed: true, confirmation: `DELETE ${m.id}` });
    const write = await app().request('PATCH', `/v1/mailboxes/${m.id}`, { key: u.key, body: { mailbox: { title: 'x' } } });
    expect(write.status).toBe(409);
    expect(write.body.error.code).toBe('MAILBOX_ARCHIVED');

    // The title is free again while archived; unarchiving then gets a numeric suffix.
    await createOk(app(), u.key, { title: 'Project' });
    const writer = await app().key(u, { scope: 'mailbox_write' });
    const denied = await app().request('POST', `/v1/mailboxes/${m.id}/unarchive`, { key: writer, body: {} });
    expect(denied.status).toBe(403);
    const un = await app().request('POST', `/v1/mailboxes/${m.id}/unarchive`, { key: u.key, body: {} });
    expect(un.status, un.text).toBe(200);
    expect(un.body.data.mailbox).toMatchObject({ archived: false, title: 'Project 2' });

    await app().request('POST', `/v1/mailboxes/${m.id}/archive`, { key: u.key, body: {} });
    const wrong = await app().request('DELETE', `/v1/mailboxes/${m.id}`, { key: u.key, body: { confirmation: 'yes' } });
    expect(wrong.status).toBe(422);
    const missing = await app().request('DELETE', `/v1/mailboxes/${m.id}`, { key: u.key });
    expect(missing.status).toBe(422);
    const del = await app().request('DELETE', `/v1/mailboxes/${m.id}`, { key: u.key, body: { confirmation: `DELETE ${m.id}` } });
    expect(del.status).toBe(200);
    expect(del.body).toEqual({ success: true, data: { deleted: true, id: m.id } });
    const gone = await app().request('GET', `/v1/mailboxes/${m.id}`, { key: u.key });
    expect(gone.status).toBe(404);
  });

  it('lists newest first with exact counts after q and before status, paging without repeats', async () => {
    const u = await app().user();
    const made = [];
    for (const title of ['Alpha one', 'Alpha two', 'Alpha three', 'Beta']) made.push(await createOk(app(), u.key, { title }));
    await app().request('POST', `/v1/mailboxes/${made[0].id}/archive`, { key: u.key, body: {} });
    const seen: string[] = [];
    let cursor: string | undefined;
    for (;;) {
      const page = await app().request('GET', '/v1/mailboxes', { key: u.key, query: { q: 'ALPHA', limit: 1, cursor } });
      expect(page.status, page.text).toBe(200);
      expect(page.body.data.counts).toEqual({ active: 2, archived: 1, total: 3 });
      seen.push(...page.body.data.mailboxes.map((m: any) => m.id));
      cursor = page.body.data.pagination.next_cursor ?? undefined;
      if (!page.body.data.pagination.has_more) break;
    }
    expect(seen).toEqual([made[2].id, made[1].id]);
    const all = await app().request('GET', '/v1/mailboxes', { key: u.key, query: { status: 'all' } });
    expect(all.body.data.mailboxes.map((m: any) => m.id)).toEqual(made.map((m) => m.id).reverse());
    const archived = await app().request('GET', '/v1/mailboxes', { key: u.key, query: { status: 'archived' } });
    expect(archived.body.data.mailboxes.map((m: any) => m.id)).toEqual([made[0].id]);
    const byAddress = await app().request('GET', '/v1/mailboxes', { key: u.key, query: { q: made[3].email.address.slice(0, 9) } });
    expect(byAddress.body.data.mailboxes.map((m: any) => m.id)).toContain(made[3].id);
    const wildcard = await app().request('GET', '/v1/mailboxes', { key: u.key, query: { q: '%' } });
    expect(wildcard.body.data.counts.total).toBe(0);
    const mismatch = await app().request('GET', '/v1/mailboxes', { key: u.key, query: { q: 'beta', cursor: (await app().request('GET', '/v1/mailboxes', { key: u.key, query: { q: 'ALPHA', limit: 1 } })).body.data.pagination.next_cursor } });
    expect(mismatch.status).toBe(422);
  });

  it('selected-mailbox keys see and touch only their mailboxes; read-only callers see no address or title', async () => {
    const u = await app().user();
    const a = await createOk(app(), u.key, { title: 'A' });
    const b = await createOk(app(), u.key, { title: 'B' });
    const reader = await app().key(u, { scope: 'mailbox_admin', mailboxAccess: 'selected', mailboxPermissions: { [a.id]: 'read' } });
    const list = await app().request('GET', '/v1/mailboxes', { key: reader });
    expect(list.body.data.mailboxes.map((m: any) => m.id)).toEqual([a.id]);
    expect(list.body.data.counts.total).toBe(1);
    expect(list.body.data.mailboxes[0].title).toBeNull();
    expect(list.body.data.mailboxes[0].email).not.toHaveProperty('address');
    const qTitle = await app().request('GET', '/v1/mailboxes', { key: reader, query: { q: 'A' } });
    expect(qTitle.body.data.counts.total).toBe(0 + (a.id.toLowerCase().includes('a') ? 1 : 0));
    expect((await app().request('GET', `/v1/mailboxes/${b.id}`, { key: reader })).status).toBe(404);
    const patch = await app().request('PATCH', `/v1/mailboxes/${a.id}`, { key: reader, body: { mailbox: { title: 'x' } } });
    expect(patch.status).toBe(403);
    const createSel = await create(app(), reader, { title: 'C' });
    expect(createSel.status).toBe(403);
    expect(createSel.body.error.code).toBe('MAILBOX_CREATION_NOT_ALLOWED');
    const readKey = await app().key(u, { scope: 'mailbox_read' });
    const r = await app().request('GET', `/v1/mailboxes/${b.id}`, { key: readKey });
    expect(r.body.data.mailbox.title).toBeNull();
    expect(r.body.data.mailbox.email).not.toHaveProperty('address');
  });

  it('a collaborator can work with mailboxes but not unarchive or delete them', async () => {
    const owner = await app().user();
    const m = await createOk(app(), owner.key, { title: 'Shared' });
    const collab = await app().user();
    await addMembership(app(), collab, owner.accountId, 'collaborator');
    const key = await app().key({ ...collab, accountId: owner.accountId });
    const read = await app().request('GET', `/v1/mailboxes/${m.id}`, { key });
    expect(read.body.data.mailbox.title).toBe('Shared');
    await app().request('POST', `/v1/mailboxes/${m.id}/archive`, { key, body: {} });
    const un = await app().request('POST', `/v1/mailboxes/${m.id}/unarchive`, { key, body: {} });
    expect(un.status).toBe(403);
    expect(un.body.error.code).toBe('PERMISSION_DENIED');
  });

  it('read-only accounts refuse changes with 423 and nothing changes', async () => {
    const u = await app().user();
    const m = await createOk(app(), u.key, { title: 'Frozen' });
    await setAccountStatus(dbOf(app()), u.accountId, 'read_only', 'entitlement ended', new Date());
    const res = await app().request('PATCH', `/v1/mailboxes/${m.id}`, { key: u.key, body: { mailbox: { title: 'x' } } });
    expect(res.status).toBe(423);
    expect(res.body.error.read_only).toBe(true);
    expect((await create(app(), u.key, { title: 'New' })).status).toBe(423);
    const read = await app().request('GET', `/v1/mailboxes/${m.id}`, { key: u.key });
    expect(read.body.data.mailbox).toMatchObject({ title: 'Frozen', archive: { allowed: false, blocked_reason: 'account_read_only' } });
  });

  it('counts creations against the plan: max_mailboxes and the monthly allowance shared by the billing group', async () => {
    const u = await app().user({ plan: 'free' });
    const limits = (await app().request('GET', '/v1/account/limits', { key: u.key })).body.data;
    const max = limits.limits.max_mailboxes as number;
    for (let i = 0; i < max; i++) await createOk(app(), u.key, { title: `M${i}` });
    const over = await create(app(), u.key, { title: 'one too many' });
    expect(over.status).toBe(403);
    expect(over.body.error.code).toBe('MAILBOX_LIMIT_REACHED');
    const usage = (await app().request('GET', '/v1/account/limits', { key: u.key })).body.data.usage.mailbox_creations;
    expect(usage.used).toBe(max);
    expect(usage.remaining).toBe(usage.monthly_limit - max);

    // Deleting frees a mailbox slot but not the monthly allowance.
    const monthly = usage.monthly_limit as number;
    const list = (await app().request('GET', '/v1/mailboxes', { key: u.key })).body.data.mailboxes;
    let created = max;
    while (created < monthly) {
      const victim = list.pop() ?? (await app().request('GET', '/v1/mailboxes', { key: u.key })).body.data.mailboxes[0];
      await app().request('POST', `/v1/mailboxes/${victim.id}/archive`, { key: u.key, body: {} });
      const del = await app().request('DELETE', `/v1/mailboxes/${victim.id}`, { key: u.key, body: { confirmation: `DELETE ${victim.id}` } });
      expect(del.status).toBe(200);
      await createOk(app(), u.key, { title: `N${created}` });
      created++;
    }
    const last = (await app().request('GET', '/v1/mailboxes', { key: u.key })).body.data.mailboxes[0];
    await app().request('POST', `/v1/mailboxes/${last.id}/archive`, { key: u.key, body: {} });
    await app().request('DELETE', `/v1/mailboxes/${last.id}`, { key: u.key, body: { confirmation: `DELETE ${last.id}` } });
    const monthlyOver = await create(app(), u.key, { title: 'monthly' });
    expect(monthlyOver.status).toBe(429);
    expect(monthlyOver.body.error.code).toBe('MAILBOX_CREATION_LIMIT_REACHED');
    expect(Number(monthlyOver.headers.get('retry-after'))).toBe(monthlyOver.body.error.details.retry_after);
  });
});

export type { TestUser };
