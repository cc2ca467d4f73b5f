import { expect, it } from 'vitest';
import { describeEachDatabase } from './harness.ts';
import { webSignIn } from './account-helpers.ts';

// Agency owners on /account: create client accounts, open them from the account pages and
// rename them (the {{account_name}} of their published file listings); others are refused.

describeEachDatabase('agency client accounts in the browser', (app) => {
  it('creates, opens and renames a client account; an administrator of the agency cannot create one', async () => {
    const owner = await app().user({ plan: 'agency', name: 'Agency Owner' });
    const web = await webSignIn(app(), owner.email);
    const overview = await web.get(`/account?account=${owner.accountId}`);
    expect(overview.text).toContain('Client accounts');
    const created = await web.submit(overview, '/account/clients', { account_id: owner.accountId, client_account_name: 'Acme Corp', client_name: 'Acme' });
    expect(created.status).toBe(303);
    const clientId = new URL(created.location!, app().base).searchParams.get('account')!;
    expect(clientId).toMatch(/^acct_/);
    const client = await web.get(created.location!);
    expect(client.text).toContain('<h1>Acme Corp</h1>');
    expect(client.text).toContain('Client account of');
    // Listed in the agency and in the account switcher.
    expect((await web.get(`/account?account=${owner.accountId}`)).text).toContain(`href="/account?account=${clientId}"`);
    expect((await web.get('/account/members')).text).toContain(`<option value="${clientId}"`);

    const renamed = await web.submit(client, '/account/rename', { account_id: clientId, name: 'Acme Corporation' });
    expect(renamed.status).toBe(303);
    const db = app().started.deps.db;
    expect((await db.selectFrom('accounts').select('name').where('id', '=', clientId).executeTakeFirstOrThrow()).name).toBe('Acme Corporation');
    const blank = await web.submit(client, '/account/rename', { account_id: clientId, name: '  ' });
    expect(blank.status).toBe(422);

    const admin = await app().user();
    await db.insertInto('memberships').values({ id: `mem_${admin.userId.slice(4)}a`, account_id: owner.accountId, user_id: admin.userId, role: 'administrator', created_at: new Date().toISOString() }).execute();
    const aweb = await webSignIn(app(), admin.email);
    const refused = await aweb.submit(`/account?account=${owner.accountId}`, '/account/clients', { account_id: owner.accountId, client_account_name: 'Not allowed' });
    expect(refused.status).toBe(403);
    expect(refused.text).toContain('Only an agency owner');
    // Nor rename an account they are not in: it answers like a missing one.
    const other = await aweb.submit(`/account?account=${owner.accountId}`, '/account/rename', { account_id: clientId, name: 'Hijacked' });
    expect(other.status).toBe(404);
    expect((await db.selectFrom('accounts').select('name').where('id', '=', clientId).executeTakeFirstOrThrow()).name).toBe('Acme Corporation');
  });
});
