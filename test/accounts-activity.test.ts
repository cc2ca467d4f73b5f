import { expect, it } from 'vitest';
import { describeEachDatabase } from './harness.ts';
import { WebClient } from './web-client.ts';
import { sweepActivity } from '../src/activity/activity.service.ts';

// Activity history: GET /v1/account/activity (cursor-paged, owners and administrators only),
// the /account/activity page with filters and CSV export, and the retention purge.

describeEachDatabase('activity history', (app) => {
  it('the API lists entries with who, what and the reason, pages by cursor, filters, and refuses collaborators', async () => {
    const owner = await app().user();
    const a = await app().request('POST', '/v1/mailboxes', { key: owner.key, body: { mailbox: { title: 'Reports' }, reason: 'quarterly report drafts' } });
    expect(a.status).toBe(201);
    const b = await app().request('POST', '/v1/mailboxes', { key: owner.key, body: { mailbox: { title: 'Invoices' } } });
    expect(b.status).toBe(201);

    const all = await app().request('GET', '/v1/account/activity', { key: owner.key });
    expect(all.status).toBe(200);
    const creates = all.body.data.activity.filter((e: any) => e.action === 'mailbox.create');
    expect(creates).toHaveLength(2);
    expect(creates[1]).toMatchObject({ target_type: 'mailbox', target_id: a.body.data.mailbox.id, reason: 'quarterly report drafts', user: { id: owner.userId, email: owner.email }, api_key: { id: expect.stringMatching(/^key_/) } });

    const first = await app().request('GET', '/v1/account/activity', { key: owner.key, query: { limit: 1, action: 'mailbox.create' } });
    expect(first.body.data.activity).toHaveLength(1);
    expect(first.body.data.pagination.has_more).toBe(true);
    const second = await app().request('GET', '/v1/account/activity', { key: owner.key, query: { limit: 1, action: 'mailbox.create', cursor: first.body.data.pagination.next_cursor } });
    expect(second.body.data.activity[0].target_id).toBe(a.body.data.mailbox.id);
    expect(second.body.data.pagination).toMatchObject({ has_more: false, next_cursor: null });
    // A cursor is bound to its filters.
    const mixed = await app().request('GET', '/v1/account/activity', { key: owner.key, query: { limit: 1, cursor: first.body.data.pagination.next_cursor } });
    expect(mixed.status).toBe(422);

    const byBox = await app().request('GET', '/v1/account/activity', { key: owner.key, query: { mailbox_id: b.body.data.mailbox.id } });
    expect(byBox.body.data.activity.map((e: any) => e.target_id)).toEqual([b.body.data.mailbox.id]);
    const bad = await app().request('GET', '/v1/account/activity', { key: owner.key, query: { user_id: 'robert; drop table' } });
    expect(bad.status).toBe(422);
    expect(bad.body.error.code).toBe('INVALID_ARGUMENT');

    const collab = await app().user();
    const db = app().started.deps.db;
    await db.insertInto('memberships').values({ id: `mem_${collab.userId.slice(4)}c`, account_id: owner.accountId, user_id: collab.userId, role: 'collaborator', created_at: new Date().toISOString() }).execute();
    const collabKey = await app().key({ ...collab, accountId: owner.accountId });
    const refused = await app().request('GET', '/v1/account/activity', { key: collabKey });
    expect(refused.status).toBe(403);
    expect(refused.body.error.code).toBe('PERMISSION_DENIED');

    // The page: filters, CSV, and a collaborator refused.
    const web = new WebClient(app().base);
    expect((await web.signIn(owner.email, 'a long test password')).status).toBe(303);
    const page = await web.get(`/account/activity?account=${owner.accountId}&action=mailbox.create`);
    expect(page.status).toBe(200);
    expect(page.text).toContain('quarterly report drafts');
    expect(page.text).not.toContain('account.create</code>');
    const csv = await web.get(`/account/activity.csv?account=${owner.accountId}&mailbox_id=${a.body.data.mailbox.id}`);
    expect(csv.status).toBe(200);
    expect(csv.headers.get('content-type')).toContain('text/csv');
    const lines = csv.text.trim().split('\r\n');
    expect(lines[0]).toBe('time,action,target_type,target_id,user_email,api_key_id,api_key_label,agent,reason,request_id');
    expect(lines).toHaveLength(2);
    expect(lines[1]).toContain('quarterly report drafts');
    const cweb = new WebClient(app().base);
    expect((await cweb.signIn(collab.email, 'a long test password')).status).toBe(303);
    expect((await cweb.get(`/account/activity?account=${owner.accountId}`)).status).toBe(403);
    expect((await cweb.get(`/account/activity.csv?account=${owner.accountId}`)).status).toBe(403);
  });

  it('purges entries older than the plan’s audit_retention_days', async () => {
    const owner = await app().user();
    const db = app().started.deps.db;
    const old = new Date(Date.now() - 31 * 86_400_000).toISOString();
    const recent = new Date(Date.now() - 29 * 86_400_000).toISOString();
    for (const [id, at] of [[`act_old${owner.userId.slice(-8)}`, old], [`act_new${owner.userId.slice(-8)}`, recent]] as const) {
      await db.insertInto('activity').values({ id, account_id: owner.accountId, user_id: owner.userId, api_key_id: null, agent: null, action: 'mailbox.create', target_type: 'mailbox', target_id: null, reason: null, request_id: null, created_at: at }).execute();
    }
    await sweepActivity(db, new Date());
    const left = await db.selectFrom('activity').select('id').where('account_id', '=', owner.accountId).where('created_at', '<', new Date(Date.now() - 86_400_000).toISOString()).execute();
    expect(left.map((r) => r.id)).toEqual([`act_new${owner.userId.slice(-8)}`]);
  });
});
