import { expect, it } from 'vitest';
import { describeAccounts, linkIn, mailTo, webSignIn } from './account-helpers.ts';
import { WebClient } from './web-client.ts';

// Agency owners invite people into a client account from that client account's members page:
// the same signed, single-use, expiring links as any invitation; the person joins the client
// account only; the agency and its clients hold at most 15 unique people (pending invitations
// count; someone already in the group is not counted twice). An administrator of the agency has
// no say in its client accounts.

describeAccounts('agency owners and client account members', (env) => {
  it('invites into a client account from its members page, within the agency’s 15 people', async () => {
    const { app, sink } = env();
    const owner = await app.user({ plan: 'agency', name: 'Agency Owner' });
    const web = await webSignIn(app, owner.email);
    const created = await web.submit(`/account?account=${owner.accountId}`, '/account/clients', { account_id: owner.accountId, client_account_name: 'Acme Corp' });
    const clientId = new URL(created.location!, app.base).searchParams.get('account')!;
    const tag = owner.userId.slice(-6).toLowerCase();

    const members = await web.get(`/account/members?account=${clientId}`);
    expect(members.status).toBe(200);
    expect(members.text).toContain('<h1>Members of Acme Corp</h1>');
    expect(members.text).toContain('you manage its members as the agency’s owner');
    expect(members.text).toContain('Send invitation');
    const sent = await web.submit(members, '/account/members/invite', { account_id: clientId, email: `ada-${tag}@example.com`, role: 'administrator' });
    expect(sent.status, sent.text).toBe(303);
    const link = linkIn((await mailTo(sink, `ada-${tag}@example.com`, /invited you to Acme Corp/)).text, app, '/invitations/');
    const token = link.split('/').pop()!;
    const ada = new WebClient(app.base);
    expect((await ada.submit(`/users/sign_up?invitation=${token}`, '/users/sign_up', { invitation: token, email: `ada-${tag}@example.com`, name: 'Ada', password: 'a long test password' })).status).toBe(303);
    const db = app.started.deps.db;
    const adaRows = await db.selectFrom('memberships').innerJoin('users', 'users.id', 'memberships.user_id').select(['memberships.account_id', 'memberships.role']).where('users.email', '=', `ada-${tag}@example.com`).execute();
    expect(adaRows).toEqual([{ account_id: clientId, role: 'administrator' }]);
    // Single use.
    expect((await new WebClient(app.base).get(link)).status).toBe(410);
    // The agency owner manages the client's people but is not one of them: no ownership transfer.
    const now = await web.get(`/account/members?account=${clientId}`);
    expect(now.text).toContain(`ada-${tag}@example.com`);
    expect(now.text).not.toContain('Make owner instead of me');

    // An administrator of the agency has no say in its client accounts (answered like a stranger).
    const agencyAdmin = await app.user({ email: `admin-${tag}@example.com` });
    await db.insertInto('memberships').values({ id: `mem_${agencyAdmin.userId.slice(4)}a`, account_id: owner.accountId, user_id: agencyAdmin.userId, role: 'administrator', created_at: new Date().toISOString() }).execute();
    const aweb = await webSignIn(app, agencyAdmin.email);
    const refused = await aweb.submit(`/account/members?account=${owner.accountId}`, '/account/members/invite', { account_id: clientId, email: `nope-${tag}@example.com`, role: 'collaborator' });
    expect(refused.status).toBe(404);
    expect(await db.selectFrom('invitations').select('id').where('email', '=', `nope-${tag}@example.com`).executeTakeFirst()).toBeUndefined();

    // Fill the group to 15 unique people: owner, Ada, the agency admin, and 12 more in the agency.
    for (let i = 0; i < 12; i++) {
      const p = await app.user();
      await db.insertInto('memberships').values({ id: `mem_${p.userId.slice(4)}f`, account_id: owner.accountId, user_id: p.userId, role: 'collaborator', created_at: new Date().toISOString() }).execute();
    }
    const full = await web.submit(`/account/members?account=${clientId}`, '/account/members/invite', { account_id: clientId, email: `sixteenth-${tag}@example.com`, role: 'collaborator' });
    expect(full.status).toBe(403);
    expect(full.text).toContain('at most 15 people');
    expect(await db.selectFrom('invitations').select('id').where('email', '=', `sixteenth-${tag}@example.com`).executeTakeFirst()).toBeUndefined();
    // Someone already in the agency is not a new person: they may join the client too.
    const again = await web.submit(`/account/members?account=${clientId}`, '/account/members/invite', { account_id: clientId, email: agencyAdmin.email, role: 'collaborator' });
    expect(again.status, again.text).toBe(303);
    const adminLink = linkIn((await mailTo(sink, agencyAdmin.email, /invited you to Acme Corp/)).text, app, '/invitations/');
    expect((await aweb.submit(adminLink, adminLink, {})).status).toBe(303);
    expect((await db.selectFrom('memberships').select('role').where('account_id', '=', clientId).where('user_id', '=', agencyAdmin.userId).executeTakeFirstOrThrow()).role).toBe('collaborator');

    // Removing someone frees a place; the pending invitation then holds it.
    const someone = await db.selectFrom('memberships').select('user_id').where('account_id', '=', owner.accountId).where('role', '=', 'collaborator').executeTakeFirstOrThrow();
    expect((await web.submit(`/account/members?account=${owner.accountId}`, '/account/members/remove', { account_id: owner.accountId, user_id: someone.user_id })).status).toBe(303);
    expect((await web.submit(`/account/members?account=${clientId}`, '/account/members/invite', { account_id: clientId, email: `fifteenth-${tag}@example.com`, role: 'collaborator' })).status).toBe(303);
    const over = await web.submit(`/account/members?account=${clientId}`, '/account/members/invite', { account_id: clientId, email: `sixteenth-${tag}@example.com`, role: 'collaborator' });
    expect(over.status).toBe(403);
  });
});
