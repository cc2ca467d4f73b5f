import * as oauth from 'oauth4webapi';
import { expect, it } from 'vitest';
import { describeAccounts, linkIn, mailTo, webSignIn } from './account-helpers.ts';
import { decide, deviceClient, discover, insecure, mcpUrl, oauthError } from './agent-helpers.ts';
import { WebClient, type PageResponse } from './web-client.ts';

// /account/members over HTTP: invitations by email (single use, expiring, for one address),
// roles, the last owner, collaborators refused on admin forms, CSRF, and demotion or removal
// revoking the person's AI connections and refresh tokens at once.

/** Posts a members form with the CSRF token of the members page. */
async function post(web: WebClient, accountId: string, action: string, fields: Record<string, string>): Promise<PageResponse> {
  return web.submit(`/account/members?account=${accountId}`, action, { account_id: accountId, ...fields });
}

async function invite(web: WebClient, accountId: string, email: string, role: string): Promise<PageResponse> {
  return post(web, accountId, '/account/members/invite', { email, role });
}

describeAccounts('members and invitations', (env) => {
  it('invites by email; the link signs the person up once, for that address only, and expires', async () => {
    const { app, sink, clock } = env();
    const owner = await app.user({ name: 'Olivia Owner' });
    const web = await webSignIn(app, owner.email);
    const sent = await invite(web, owner.accountId, 'Ada@Example.com', 'administrator');
    expect(sent.status).toBe(303);
    expect((await web.get(sent.location!)).text).toContain('Invitation sent');
    const mail = await mailTo(sink, 'ada@example.com', /invited you/);
    expect(mail.subject).toContain('Olivia Owner');
    const link = linkIn(mail.text, app, '/invitations/');

    // Opened signed out: sign in or create a login.
    const ada = new WebClient(app.base);
    const landing = await ada.get(link);
    expect(landing.status).toBe(200);
    expect(landing.text).toContain('administrator');
    const token = link.split('/').pop()!;
    const form = `/users/sign_up?invitation=${token}`;
    // Another address is refused and nothing is created.
    const wrong = await ada.submit(form, '/users/sign_up', { invitation: token, email: 'mallory@example.com', name: 'Mallory', password: 'a long test password' });
    expect(wrong.status).toBe(403);
    expect(wrong.text).toContain('This invitation was sent to ada@example.com');
    const db = app.started.deps.db;
    expect(await db.selectFrom('users').select('id').where('email', '=', 'mallory@example.com').executeTakeFirst()).toBeUndefined();

    const joined = await ada.submit(form, '/users/sign_up', { invitation: token, email: 'ada@example.com', name: 'Ada', password: 'a long test password' });
    expect(joined.status).toBe(303);
    const members = await ada.get(`/account/members?account=${owner.accountId}`);
    expect(members.text).toContain('Ada');
    const row = await db.selectFrom('memberships').innerJoin('users', 'users.id', 'memberships.user_id').select(['role', 'email_verified_at']).where('email', '=', 'ada@example.com').executeTakeFirstOrThrow();
    expect(row.role).toBe('administrator');
    expect(row.email_verified_at).not.toBeNull();

    // Used once.
    const reused = await new WebClient(app.base).get(link);
    expect(reused.status).toBe(410);
    expect(reused.text).toContain('already used');
    const invalid = await new WebClient(app.base).get('/invitations/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA');
    expect(invalid.status).toBe(404);

    // Expired after 7 days.
    await invite(web, owner.accountId, 'late@example.com', 'collaborator');
    const late = linkIn((await mailTo(sink, 'late@example.com', /invited you/)).text, app, '/invitations/');
    clock.advance(7 * 86400 + 60);
    const expired = await new WebClient(app.base).get(late);
    expect(expired.status).toBe(410);
    expect(expired.text).toContain('expired');
  });

  it('a signed-in person accepts with the right address only; a collaborator cannot use admin forms; the last owner stays', async () => {
    const { app, sink } = env();
    const owner = await app.user();
    const bob = await app.user({ email: `bob-${owner.userId.slice(-6).toLowerCase()}@example.com` });
    const eve = await app.user();
    const web = await webSignIn(app, owner.email);
    await invite(web, owner.accountId, bob.email, 'collaborator');
    const link = linkIn((await mailTo(sink, bob.email, /invited you/)).text, app, '/invitations/');

    const eveWeb = await webSignIn(app, eve.email);
    const wrong = await eveWeb.submit(link, link, {});
    expect(wrong.status).toBe(403);
    expect(wrong.text).toContain('another email address');

    const bobWeb = await webSignIn(app, bob.email);
    const accepted = await bobWeb.submit(link, link, {});
    expect(accepted.status).toBe(303);
    expect(accepted.location).toBe(`/account/members?account=${owner.accountId}`);

    // A collaborator sees the members but posting an admin form is refused and changes nothing.
    const asBob = await post(bobWeb, owner.accountId, '/account/members/invite', { email: 'friend@example.com', role: 'administrator' });
    expect(asBob.status).toBe(403);
    expect(asBob.text).toContain('Only an owner or administrator');
    const promote = await post(bobWeb, owner.accountId, '/account/members/role', { user_id: bob.userId, role: 'owner' });
    expect(promote.status).toBe(403);
    const db = app.started.deps.db;
    expect((await db.selectFrom('memberships').select('role').where('account_id', '=', owner.accountId).where('user_id', '=', bob.userId).executeTakeFirstOrThrow()).role).toBe('collaborator');

    // Without the CSRF token nothing happens.
    const noCsrf = await web.request('POST', '/account/members/remove', { account_id: owner.accountId, user_id: bob.userId });
    expect(noCsrf.status).toBe(403);
    expect(noCsrf.text).toContain('This form has expired');
    expect(await db.selectFrom('memberships').select('id').where('account_id', '=', owner.accountId).where('user_id', '=', bob.userId).executeTakeFirst()).toBeDefined();

    // The only owner cannot be demoted (not even by themselves) or removed.
    const selfDemote = await post(web, owner.accountId, '/account/members/role', { user_id: owner.userId, role: 'administrator' });
    expect(selfDemote.status).toBe(409);
    expect(selfDemote.text).toContain('at least one owner');
    const selfRemove = await post(web, owner.accountId, '/account/members/remove', { user_id: owner.userId });
    expect(selfRemove.status).toBe(409);
    expect(selfRemove.text).toContain('at least one owner');
    expect((await db.selectFrom('memberships').select('role').where('account_id', '=', owner.accountId).where('user_id', '=', owner.userId).executeTakeFirstOrThrow()).role).toBe('owner');

    // Transfer: Bob becomes owner, the former owner an administrator.
    expect((await post(web, owner.accountId, '/account/members/transfer', { user_id: bob.userId })).status).toBe(303);
    const roles = await db.selectFrom('memberships').select(['user_id', 'role']).where('account_id', '=', owner.accountId).execute();
    expect(Object.fromEntries(roles.map((r) => [r.user_id, r.role]))).toEqual({ [owner.userId]: 'administrator', [bob.userId]: 'owner' });
  });

  it('demotion revokes the person’s AI connections and refresh tokens at once; removal revokes their keys', async () => {
    const { app, clock } = env();
    const owner = await app.user();
    const member = await app.user();
    const db = app.started.deps.db;
    await db.insertInto('memberships').values({ id: `mem_${member.userId.slice(4)}x`, account_id: owner.accountId, user_id: member.userId, role: 'administrator', created_at: new Date().toISOString() }).execute();
    const memberKey = await app.key({ ...member, accountId: owner.accountId });

    // The administrator connects an AI client to the owner's account (device grant).
    const as = await discover(app);
    const client = await deviceClient(as);
    const da = await oauth.processDeviceAuthorizationResponse(as, client, await oauth.deviceAuthorizationRequest(as, client, oauth.None(), { scope: 'cubby:mcp', resource: mcpUrl(app) }, insecure));
    const memberWeb = await webSignIn(app, member.email);
    const u = new URL(da.verification_uri_complete!);
    const page = await memberWeb.get(u.pathname + u.search);
    expect((await decide(memberWeb, page, '/oauth/device', { decision: 'approve', account_id: owner.accountId, scope: 'mailbox_read', mailbox_access: 'all' })).status).toBe(200);
    clock.advance(11);
    const tokens = await oauth.processDeviceCodeResponse(as, client, await oauth.deviceCodeGrantRequest(as, client, oauth.None(), da.device_code, insecure));
    expect(tokens.refresh_token).toBeTruthy();
    expect((await app.request('GET', '/v1/status', { key: tokens.access_token })).status).toBe(200);

    const web = await webSignIn(app, owner.email);
    expect((await post(web, owner.accountId, '/account/members/role', { user_id: member.userId, role: 'collaborator' })).status).toBe(303);
    // Revoked in the same transaction as the role change, before any use.
    const conns = await db.selectFrom('agent_connections').select(['revoked_at', 'revoked_reason']).where('user_id', '=', member.userId).execute();
    expect(conns.map((c) => c.revoked_reason)).toEqual(['membership_demoted']);
    const live = await db.selectFrom('oauth_tokens').innerJoin('agent_connections', 'agent_connections.id', 'oauth_tokens.connection_id').select('oauth_tokens.id').where('agent_connections.user_id', '=', member.userId).where('oauth_tokens.revoked_at', 'is', null).execute();
    expect(live).toEqual([]);
    expect(await oauthError(oauth.refreshTokenGrantRequest(as, client, oauth.None(), tokens.refresh_token!, insecure).then((r) => oauth.processRefreshTokenResponse(as, client, r)))).toBe('invalid_grant');
    expect((await app.request('GET', '/v1/status', { key: tokens.access_token })).status).toBe(401);
    expect((await app.request('GET', '/v1/status', { key: tokens.cubby_api_key as string })).status).toBe(401);

    // A demoted collaborator's own key still works, with the collaborator's reach.
    expect((await app.request('GET', '/v1/status', { key: memberKey, query: { account_id: owner.accountId } })).status).toBe(200);
    // Removal revokes it.
    expect((await post(web, owner.accountId, '/account/members/remove', { user_id: member.userId })).status).toBe(303);
    expect((await app.request('GET', '/v1/status', { key: memberKey })).status).toBe(401);
  });

  it('a collaborator invited for chosen mailboxes reaches only those, through keys and pages', async () => {
    const { app, sink } = env();
    const owner = await app.user();
    const boxes = [];
    for (const title of ['Shared', 'Private']) {
      const r = await app.request('POST', '/v1/mailboxes', { key: owner.key, body: { mailbox: { title } } });
      expect(r.status).toBe(201);
      boxes.push(r.body.data.mailbox.id as string);
    }
    const web = await webSignIn(app, owner.email);
    const email = `limited-${owner.userId.slice(-6).toLowerCase()}@example.com`;
    const page = await web.get(`/account/members?account=${owner.accountId}`);
    // Posted as the form sends it: role plus the ticked mailbox.
    const sent = await web.request('POST', '/account/members/invite', { _csrf: page.text.match(/name="_csrf" value="([^"]+)"/)![1]!, account_id: owner.accountId, email, role: 'collaborator', mailbox_ids: boxes[0]! });
    expect(sent.status).toBe(303);
    const link = linkIn((await mailTo(sink, email, /invited you/)).text, app, '/invitations/');
    const token = link.split('/').pop()!;
    const person = new WebClient(app.base);
    expect((await person.submit(`/users/sign_up?invitation=${token}`, '/users/sign_up', { invitation: token, email, name: 'Limited', password: 'a long test password' })).status).toBe(303);
    expect((await person.get(`/account/members?account=${owner.accountId}`)).text).toContain('Shared');

    const db = app.started.deps.db;
    const user = await db.selectFrom('users').select('id').where('email', '=', email).executeTakeFirstOrThrow();
    const key = await app.key({ userId: user.id, accountId: owner.accountId, email, key: '' });
    const list = await app.request('GET', '/v1/mailboxes', { key });
    expect(list.body.data.mailboxes.map((b: any) => b.id)).toEqual([boxes[0]]);
    expect((await app.request('GET', `/v1/mailboxes/${boxes[0]}`, { key })).status).toBe(200);
    expect((await app.request('GET', `/v1/mailboxes/${boxes[1]}`, { key })).status).toBe(404);
    const create = await app.request('POST', '/v1/mailboxes', { key, body: { mailbox: { title: 'Mine' } } });
    expect(create.body.error.code).toBe('MAILBOX_CREATION_NOT_ALLOWED');
    expect((await person.get(`/mailboxes/${boxes[1]}`)).status).toBe(404);
    expect((await person.get(`/mailboxes/${boxes[0]}`)).status).toBe(200);

    // The owner widens the access to every mailbox (none ticked); a foreign id is refused.
    const foreign = await post(web, owner.accountId, '/account/members/access', { user_id: user.id, mailbox_ids: 'bkt_0000000000000000000000000' });
    expect(foreign.status).toBe(422);
    expect((await app.request('GET', `/v1/mailboxes/${boxes[1]}`, { key })).status).toBe(404);
    expect((await post(web, owner.accountId, '/account/members/access', { user_id: user.id })).status).toBe(303);
    expect((await app.request('GET', `/v1/mailboxes/${boxes[1]}`, { key })).status).toBe(200);
    // Only collaborators have such a limit.
    expect((await post(web, owner.accountId, '/account/members/access', { user_id: owner.userId })).status).toBe(422);
  });
});
