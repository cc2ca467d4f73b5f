import * as oauth from 'oauth4webapi';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DATABASES, startTestApp, type TestApp } from './harness.ts';
import { decide, deviceClient, discover, insecure, mcpUrl, oauthError, signedIn, startClockApp, testClock, type Clock } from './agent-helpers.ts';

// A compatibility brand (CUBBY_COMPAT_BRANDS=revdoku): a CLI of the original service logs in
// with the device flow asking for `revdoku:mcp`, reads the key from `revdoku_api_key`, sends
// X-Revdoku-Agent* headers and reads X-Revdoku-Client-Version (docs/compat.md).

for (const kind of DATABASES) {
  describe(`compat: a brand for OAuth and agent headers [${kind}]`, () => {
    const clock: Clock = testClock();
    let app: TestApp;
    let as: oauth.AuthorizationServer;
    beforeAll(async () => {
      app = await startClockApp(kind, clock, { CUBBY_COMPAT_BRANDS: 'Revdoku' });
      as = await discover(app);
    });
    afterAll(async () => app?.stop());

    it('device login with scope revdoku:mcp: pending, approval, then the key under revdoku_api_key and cubby_api_key', async () => {
      expect(as.scopes_supported).toEqual(expect.arrayContaining(['cubby:mcp', 'revdoku:mcp']));
      const user = await app.user();
      const client = await deviceClient(as, 'Bucket CLI');
      const da = await oauth.processDeviceAuthorizationResponse(as, client, await oauth.deviceAuthorizationRequest(as, client, oauth.None(), { scope: 'revdoku:mcp', resource: mcpUrl(app) }, insecure));
      const poll = () => oauth.deviceCodeGrantRequest(as, client, oauth.None(), da.device_code, insecure).then((r) => oauth.processDeviceCodeResponse(as, client, r));
      expect(await oauthError(poll())).toBe('authorization_pending');
      const web = await signedIn(app, user);
      const page = await web.get(`/oauth/device?user_code=${da.user_code}`);
      expect(page.status).toBe(200);
      expect((await decide(web, page, '/oauth/device', { decision: 'approve', account_id: user.accountId, scope: 'mailbox_write', mailbox_access: 'all' })).text).toContain('Device connected');
      clock.advance(11);
      const tokens = await poll();
      expect(tokens.scope!.split(' ')).toEqual(expect.arrayContaining(['cubby:mcp', 'revdoku:mcp']));
      const key = tokens.revdoku_api_key as string;
      expect(key).toMatch(/^cubby_[A-Za-z0-9]{40}$/);
      expect(tokens.cubby_api_key).toBe(key);

      // The key works on surface A, and the brand's agent headers are read like X-Service-Agent*.
      const status = await app.request('GET', '/api/v1/status', {
        key,
        headers: {
          'x-revdoku-agent': 'bucket-cli',
          'x-revdoku-agent-client': 'bash',
          'x-revdoku-agent-version': '1.4.0',
          'x-revdoku-agent-run-id': 'run-7',
          'x-revdoku-agent-project': 'docs',
          'x-revdoku-agent-task': 'publish docs',
        },
      });
      expect(status.status, status.text).toBe(200);
      expect(status.body.data.connection.agent).toMatchObject({ agent: 'bucket-cli', client: 'bash', version: '1.4.0', run_id: 'run-7', project: 'docs', task: 'publish docs' });
      // X-Service-* wins when both are sent.
      const both = await app.request('GET', '/v1/status', { key, headers: { 'x-service-agent': 'service-name', 'x-revdoku-agent': 'brand-name' } });
      expect(both.body.data.connection.agent.agent).toBe('service-name');
      // The client-version header under the brand's name beside X-Service-Client-Version, on errors too.
      expect(status.headers.get('x-revdoku-client-version')).toBe(status.headers.get('x-service-client-version'));
      expect(status.headers.get('x-service-client-version')).toBeTruthy();
      const missing = await app.request('GET', '/api/v1/buckets/bkt_missing', { key });
      expect(missing.status).toBe(404);
      expect(missing.headers.get('x-revdoku-client-version')).toBeTruthy();
      // The access token works for MCP as before.
      const mcp = await fetch(mcpUrl(app), { method: 'POST', headers: { authorization: `Bearer ${tokens.access_token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } } }) });
      expect(mcp.status).toBe(200);
    });

    it('an unknown brand scope is still invalid_scope', async () => {
      const client = await deviceClient(as);
      const res = await oauth.deviceAuthorizationRequest(as, client, oauth.None(), { scope: 'other:mcp' }, insecure);
      expect(await oauthError(oauth.processDeviceAuthorizationResponse(as, client, res))).toBe('invalid_scope');
    });
  });
}

describe('compat: without CUBBY_COMPAT_BRANDS', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp('sqlite');
  });
  afterAll(async () => app?.stop());

  it('brand scopes, fields and headers do not exist', async () => {
    const as = await discover(app);
    const client = await deviceClient(as);
    const res = await oauth.deviceAuthorizationRequest(as, client, oauth.None(), { scope: 'revdoku:mcp' }, insecure);
    expect(await oauthError(oauth.processDeviceAuthorizationResponse(as, client, res))).toBe('invalid_scope');
    const u = await app.user();
    const status = await app.request('GET', '/api/v1/status', { key: u.key, headers: { 'x-revdoku-agent': 'x' } });
    expect(status.body.data.connection.agent?.agent ?? null).toBeNull();
    expect(status.headers.get('x-revdoku-client-version')).toBeNull();
  });
});
