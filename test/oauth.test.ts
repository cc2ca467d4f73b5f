import * as oauth from 'oauth4webapi';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DATABASES, type TestApp } from './harness.ts';
import { decide, deviceClient, discover, insecure, mcpUrl, oauthError, registerClient, signedIn, startClockApp, testClock, type Clock } from './agent-helpers.ts';
import { setMembershipRole } from '../src/agent-auth/connections.service.ts';

// The OAuth 2.0 authorization server end to end with oauth4webapi as the client: metadata,
// registration, the device grant (approval over HTTP here; in a real browser in
// oauth-browser.test.ts), authorization code with PKCE, refresh rotation and reuse,
// revocation, resource indicators, and membership changes ending connections.

for (const kind of DATABASES) {
  describe(`OAuth authorization server [${kind}]`, () => {
    const clock: Clock = testClock();
    let app: TestApp;
    let as: oauth.AuthorizationServer;
    beforeAll(async () => {
      app = await startClockApp(kind, clock);
      as = await discover(app);
    });
    afterAll(async () => app?.stop());

    it('publishes RFC 8414 and RFC 9728 metadata naming the MCP resource', async () => {
      expect(as.issuer).toBe(app.base);
      expect(as.device_authorization_endpoint).toBe(`${app.base}/oauth/device_authorization`);
      expect(as.code_challenge_methods_supported).toEqual(['S256']);
      expect(as.scopes_supported).toContain('cubby:mcp');
      const rs = await oauth.processResourceDiscoveryResponse(new URL(mcpUrl(app)), await oauth.resourceDiscoveryRequest(new URL(mcpUrl(app)), insecure));
      expect(rs.resource).toBe(mcpUrl(app));
      expect(rs.authorization_servers).toEqual([app.base]);
    });

    it('registers clients (RFC 7591) and refuses bad metadata', async () => {
      const c = await registerClient(as, { client_name: 'Confidential', redirect_uris: ['https://app.example/cb'], token_endpoint_auth_method: 'client_secret_basic' });
      expect(c.client_id).toMatch(/^mcp_client_/);
      expect(c.client_secret).toMatch(/^cubby_cs_/);
      const bad = await fetch(`${app.base}/oauth/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ redirect_uris: ['http://evil.example/cb'] }) });
      expect(bad.status).toBe(400);
      expect((await bad.json()).error).toBe('invalid_redirect_uri');
    });

    it('device grant: pending, slow_down, approval with the chosen access, API key extension, refresh', async () => {
      const user = await app.user();
      const client = await deviceClient(as);
      const da = await oauth.processDeviceAuthorizationResponse(as, client, await oauth.deviceAuthorizationRequest(as, client, oauth.None(), { scope: 'cubby:mcp', resource: mcpUrl(app) }, insecure));
      expect(da.user_code).toMatch(/^[A-Z]{4}-[A-Z]{4}$/);
      expect(da.verification_uri_complete).toBe(`${app.base}/oauth/device?user_code=${da.user_code}`);
      const poll = () => oauth.deviceCodeGrantRequest(as, client, oauth.None(), da.device_code, insecure).then((r) => oauth.processDeviceCodeResponse(as, client, r));
      expect(await oauthError(poll())).toBe('authorization_pending');
      // Polling again at once is too fast.
      expect(await oauthError(poll())).toBe('slow_down');
      clock.advance(11);
      expect(await oauthError(poll())).toBe('authorization_pending');

      const web = await signedIn(app, user);
      const page = await web.get(new URL(da.verification_uri_complete!).pathname + new URL(da.verification_uri_complete!).search);
      expect(page.status).toBe(200);
      expect(page.text).toContain(da.user_code);
      const approved = await decide(web, page, '/oauth/device', { decision: 'approve', account_id: user.accountId, scope: 'mailbox_read', mailbox_access: 'all' });
      expect(approved.status).toBe(200);
      expect(approved.text).toContain('Device connected');

      clock.advance(11);
      const tokens = await poll();
      expect(tokens.token_type).toBe('bearer');
      expect(tokens.refresh_token).toMatch(/^cubby_rt_/);
      const apiKey = tokens.cubby_api_key as string;
      expect(apiKey).toMatch(/^cubby_[A-Za-z0-9]{40}$/);
      // Exchanged once only.
      clock.advance(11);
      expect(await oauthError(poll())).toBe('invalid_grant');

      // Both credentials act with exactly what was approved.
      const viaKey = await app.request('GET', '/v1/status', { key: apiKey });
      expect(viaKey.status).toBe(200);
      expect(viaKey.body.data.connection).toMatchObject({ token_type: 'api', scope: 'mailbox_read', transport: 'api_key' });
      const viaToken = await app.request('GET', '/v1/status', { key: tokens.access_token });
      expect(viaToken.status).toBe(200);
      expect(viaToken.body.data.connection).toMatchObject({ token_type: null, scope: 'mailbox_read', transport: 'oauth', api_key_id: viaKey.body.data.connection.api_key_id });
      expect(Date.parse(viaToken.body.data.connection.expires_at)).toBeGreaterThan(clock.now().getTime());
      expect(viaToken.body.data.connection.renewal).toMatchObject({ recommended: false, next_action: 'none', browser_url: `${app.base}/settings/connections` });
      // In the token's last minutes the status read says to refresh.
      clock.advance(3400);
      expect((await app.request('GET', '/v1/status', { key: tokens.access_token })).body.data.connection.renewal).toMatchObject({ recommended: true, next_action: 'refresh_token' });
      const create = await app.request('POST', '/v1/mailboxes', { key: tokens.access_token, body: { mailbox: { title: 'nope' } } });
      expect(create.status).toBe(403);

      const refreshed = await oauth.processRefreshTokenResponse(as, client, await oauth.refreshTokenGrantRequest(as, client, oauth.None(), tokens.refresh_token!, insecure));
      expect(refreshed.access_token).not.toBe(tokens.access_token);
      expect(refreshed.cubby_api_key).toBeUndefined();
      expect((await app.request('GET', '/v1/status', { key: refreshed.access_token })).status).toBe(200);
    });

    it('device grant: access_denied and expired_token as RFC 8628 says', async () => {
      const user = await app.user();
      const client = await deviceClient(as);
      const start = async () => oauth.processDeviceAuthorizationResponse(as, client, await oauth.deviceAuthorizationRequest(as, client, oauth.None(), { scope: 'cubby:mcp' }, insecure));
      const poll = (code: string) => oauth.deviceCodeGrantRequest(as, client, oauth.None(), code, insecure).then((r) => oauth.processDeviceCodeResponse(as, client, r));
      const denied = await start();
      const web = await signedIn(app, user);
      const page = await web.get(`/oauth/device?user_code=${denied.user_code}`);
      expect((await decide(web, page, '/oauth/device', { decision: 'deny' })).text).toContain('Connection denied');
      expect(await oauthError(poll(denied.device_code))).toBe('access_denied');

      const late = await start();
      clock.advance(601);
      expect(await oauthError(poll(late.device_code))).toBe('expired_token');
      expect((await web.get(`/oauth/device?user_code=${late.user_code}`)).status).toBe(404);
    });

    it('device grant: a wrong resource does not burn an approved code; an approved code not collected in time is expired_token and its connection revoked', async () => {
      const user = await app.user();
      const client = await deviceClient(as);
      const start = async () => oauth.processDeviceAuthorizationResponse(as, client, await oauth.deviceAuthorizationRequest(as, client, oauth.None(), { scope: 'cubby:mcp', api_key: 'false' }, insecure));
      const poll = (code: string) => oauth.deviceCodeGrantRequest(as, client, oauth.None(), code, insecure).then((r) => oauth.processDeviceCodeResponse(as, client, r));
      const web = await signedIn(app, user);
      const approve = async (userCode: string) => {
        const page = await web.get(`/oauth/device?user_code=${userCode}`);
        expect((await decide(web, page, '/oauth/device', { decision: 'approve', account_id: user.accountId, scope: 'mailbox_read', mailbox_access: 'all' })).status).toBe(200);
      };

      const first = await start();
      await approve(first.user_code);
      const wrong = await fetch(`${app.base}/oauth/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ grant_type: 'urn:ietf:params:oauth:grant-type:device_code', client_id: client.client_id, device_code: first.device_code, resource: 'https://elsewhere.example/mcp' }),
      });
      expect((await wrong.json()).error).toBe('invalid_target');
      expect((await poll(first.device_code)).access_token).toMatch(/^cubby_at_/);

      const late = await start();
      await approve(late.user_code);
      const db = app.started.deps.db;
      const row = await db.selectFrom('oauth_device_codes').select('connection_id').where('user_code', '=', late.user_code.replace('-', '')).executeTakeFirstOrThrow();
      clock.advance(601);
      expect(await oauthError(poll(late.device_code))).toBe('expired_token');
      const conn = await db.selectFrom('agent_connections').select(['revoked_at', 'revoked_reason']).where('id', '=', row.connection_id!).executeTakeFirstOrThrow();
      expect(conn.revoked_reason).toBe('device_code_expired');
      expect(await oauthError(poll(late.device_code))).toBe('invalid_grant');
    });

    it('refuses other resources (RFC 8707) and unknown scopes', async () => {
      const client = await deviceClient(as);
      const wrong = await fetch(`${app.base}/oauth/device_authorization`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ client_id: client.client_id, scope: 'cubby:mcp', resource: 'https://elsewhere.example/mcp' }),
      });
      expect((await wrong.json()).error).toBe('invalid_target');
      const scope = await fetch(`${app.base}/oauth/device_authorization`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ client_id: client.client_id, scope: 'admin:everything' }) });
      expect((await scope.json()).error).toBe('invalid_scope');
    });

    async function codeFlow(opts: { offline?: boolean } = {}) {
      const user = await app.user();
      const redirect = 'http://127.0.0.1:9/callback';
      const client = await registerClient(as, { client_name: 'Remote MCP', redirect_uris: [redirect], grant_types: ['authorization_code', ...(opts.offline ? ['refresh_token'] : [])], token_endpoint_auth_method: 'none' });
      const verifier = oauth.generateRandomCodeVerifier();
      const state = oauth.generateRandomState();
      const url = new URL(as.authorization_endpoint!);
      url.search = new URLSearchParams({ response_type: 'code', client_id: client.client_id, redirect_uri: redirect, code_challenge: await oauth.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256', scope: opts.offline ? 'cubby:mcp offline_access' : 'cubby:mcp', state, resource: mcpUrl(app) }).toString();
      // Signed out: the request is kept and the person signs in first.
      const web = await signedIn(app, user);
      const first = await web.get(url.pathname + url.search);
      expect(first.status).toBe(303);
      const consent = await web.get(first.location!);
      expect(consent.status).toBe(200);
      expect(consent.text).toContain('Remote MCP');
      const back = await decide(web, consent, '/oauth/authorize', { decision: 'approve', account_id: user.accountId, scope: 'mailbox_write', mailbox_access: 'all' });
      expect(back.status).toBe(303);
      const params = oauth.validateAuthResponse(as, client, new URL(back.location!), state);
      const exchange = () => oauth.authorizationCodeGrantRequest(as, client, oauth.None(), params, redirect, verifier, { additionalParameters: { resource: mcpUrl(app) }, ...insecure });
      const tokens = await oauth.processAuthorizationCodeResponse(as, client, await exchange());
      return { user, client, tokens, exchange, web };
    }

    it('authorization code with PKCE; a replayed code revokes what it made', async () => {
      const { client, tokens, exchange } = await codeFlow();
      expect(tokens.refresh_token).toBeUndefined();
      expect(tokens.cubby_api_key).toBeUndefined();
      clock.advance(3400);
      expect((await app.request('GET', '/v1/status', { key: tokens.access_token })).body.data.connection.renewal.next_action).toBe('authorize_again');
      expect(await oauthError(oauth.processAuthorizationCodeResponse(as, client, await exchange()))).toBe('invalid_grant');
      expect((await app.request('GET', '/v1/status', { key: tokens.access_token })).status).toBe(401);
    });

    it('PKCE is required and checked', async () => {
      const user = await app.user();
      const redirect = 'http://127.0.0.1:9/cb';
      const client = await registerClient(as, { client_name: 'No PKCE', redirect_uris: [redirect], token_endpoint_auth_method: 'none' });
      const web = await signedIn(app, user);
      const r = await web.get(`/oauth/authorize?${new URLSearchParams({ response_type: 'code', client_id: client.client_id, redirect_uri: redirect, state: 's1' })}`);
      const loc = new URL(r.location!);
      expect(loc.searchParams.get('error')).toBe('invalid_request');
      expect(loc.searchParams.get('state')).toBe('s1');
      // An unregistered redirect URI is never redirected to.
      const evil = await web.get(`/oauth/authorize?${new URLSearchParams({ response_type: 'code', client_id: client.client_id, redirect_uri: 'https://evil.example/cb' })}`);
      expect(evil.status).toBe(400);
    });

    it('refresh tokens rotate; reusing one revokes the whole connection', async () => {
      const { client, tokens } = await codeFlow({ offline: true });
      const refresh = (t: string) => oauth.refreshTokenGrantRequest(as, client, oauth.None(), t, insecure).then((r) => oauth.processRefreshTokenResponse(as, client, r));
      const second = await refresh(tokens.refresh_token!);
      const third = await refresh(second.refresh_token!);
      expect(third.refresh_token).not.toBe(second.refresh_token);
      // The first refresh token again: reuse.
      expect(await oauthError(refresh(tokens.refresh_token!))).toBe('invalid_grant');
      expect(await oauthError(refresh(third.refresh_token!))).toBe('invalid_grant');
      expect((await app.request('GET', '/v1/status', { key: third.access_token })).status).toBe(401);
    });

    it('revocation (RFC 7009): an access token alone; a refresh token ends the connection', async () => {
      const { client, tokens } = await codeFlow({ offline: true });
      const revoke = async (t: string) => oauth.processRevocationResponse(await oauth.revocationRequest(as, client, oauth.None(), t, insecure));
      const again = await oauth.processRefreshTokenResponse(as, client, await oauth.refreshTokenGrantRequest(as, client, oauth.None(), tokens.refresh_token!, insecure));
      await revoke(tokens.access_token);
      expect((await app.request('GET', '/v1/status', { key: tokens.access_token })).status).toBe(401);
      expect((await app.request('GET', '/v1/status', { key: again.access_token })).status).toBe(200);
      await revoke(again.refresh_token!);
      expect((await app.request('GET', '/v1/status', { key: again.access_token })).status).toBe(401);
      // Unknown tokens are accepted silently.
      await revoke('cubby_at_doesnotexist');
    });

    it('demoting the owner to collaborator invalidates the connection and its refresh tokens', async () => {
      const { user, client, tokens, web } = await codeFlow({ offline: true });
      const listed = await web.get('/settings/connections');
      expect(listed.text).toContain('Remote MCP');
      // A second person takes over the account so the first can be demoted.
      const other = await app.user();
      const deps = app.started.deps;
      await setMembershipRole(deps.db, { accountId: user.accountId, userId: other.userId, role: 'owner' }, { userId: null, apiKeyId: null, agent: null, requestId: null }, new Date());
      const r = await setMembershipRole(deps.db, { accountId: user.accountId, userId: user.userId, role: 'collaborator' }, { userId: null, apiKeyId: null, agent: null, requestId: null }, new Date());
      expect(r.revoked).toBe(1);
      expect((await app.request('GET', '/v1/status', { key: tokens.access_token })).status).toBe(401);
      expect(await oauthError(oauth.refreshTokenGrantRequest(as, client, oauth.None(), tokens.refresh_token!, insecure).then((x) => oauth.processRefreshTokenResponse(as, client, x)))).toBe('invalid_grant');
      expect((await web.get('/settings/connections')).text).toContain('membership_demoted');
    });

    it('a membership changed behind its back still ends the connection at the next use', async () => {
      const { user, client, tokens } = await codeFlow({ offline: true });
      await app.started.deps.db.deleteFrom('memberships').where('user_id', '=', user.userId).where('account_id', '=', user.accountId).execute();
      expect((await app.request('GET', '/v1/status', { key: tokens.access_token })).status).toBe(401);
      expect(await oauthError(oauth.refreshTokenGrantRequest(as, client, oauth.None(), tokens.refresh_token!, insecure).then((x) => oauth.processRefreshTokenResponse(as, client, x)))).toBe('invalid_grant');
    });

    it('the connections page revokes a connection', async () => {
      const { tokens, web } = await codeFlow();
      const page = await web.get('/settings/connections');
      const id = page.text.match(/data-connection-id="(conn_[A-Za-z0-9]+)"/)![1]!;
      const res = await web.submit(page, `/settings/connections/${id}/revoke`, {});
      expect(res.status).toBe(303);
      expect((await app.request('GET', '/v1/status', { key: tokens.access_token })).status).toBe(401);
    });
  });
}
