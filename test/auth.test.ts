import { expect, it } from 'vitest';
import { describeEachDatabase, type TestApp } from './harness.ts';
import { expectError, keyRow, REQ_ID, setKeyExpiry } from './factories.ts';
import { createApiKey, revokeApiKey } from '../src/auth/keys.service.ts';
import { CLIENT_VERSION } from '../src/version.ts';

// API keys on both surfaces: every way a key can be wrong is a 401 with its own code,
// in the surface's own envelope, with the request id in the header and the body.

async function revoke(app: TestApp, token: string) {
  const row = await keyRow(app, token);
  const done = await revokeApiKey(app.started.deps.db, row.user_id, row.id, { userId: row.user_id, apiKeyId: null, agent: null, requestId: null }, new Date());
  expect(done).toBe(true);
}

const STATUS_PATH = { R: '/v1/status', A: '/api/v1/status' } as const;

describeEachDatabase('API keys', (app) => {
  for (const surface of ['R', 'A'] as const) {
    const path = STATUS_PATH[surface];

    it(`surface ${surface}: a request without a key is 401 UNAUTHENTICATED`, async () => {
      const res = await app().request('GET', path);
      expectError(res, surface, 401, 'UNAUTHENTICATED');
    });

    it(`surface ${surface}: a malformed key or a non-Bearer scheme is 401 UNAUTHENTICATED`, async () => {
      const u = await app().user();
      for (const authorization of ['Bearer not-a-key', `Basic ${Buffer.from(`x:${u.key}`).toString('base64')}`, `Bearer ${u.key}x`, `Bearer ${u.key.slice(0, -1)}`, 'Bearer', `${u.key}`]) {
        const res = await app().request('GET', path, { headers: { authorization } });
        expectError(res, surface, 401, 'UNAUTHENTICATED');
      }
    });

    it(`surface ${surface}: a well-formed key that was never issued is 401 UNAUTHENTICATED`, async () => {
      const res = await app().request('GET', path, { key: `cubby_${'A1b2C3d4E5'.repeat(4)}` });
      expectError(res, surface, 401, 'UNAUTHENTICATED');
    });

    it(`surface ${surface}: an expired key is 401 API_KEY_EXPIRED, a live one works`, async () => {
      const u = await app().user();
      const ok = await app().request('GET', path, { key: u.key });
      expect(ok.status).toBe(200);
      await setKeyExpiry(app(), u.key, new Date(Date.now() - 1000).toISOString());
      const res = await app().request('GET', path, { key: u.key });
      expectError(res, surface, 401, 'API_KEY_EXPIRED');
    });

    it(`surface ${surface}: a revoked key is 401 API_KEY_REVOKED`, async () => {
      const u = await app().user();
      await revoke(app(), u.key);
      const res = await app().request('GET', path, { key: u.key });
      expectError(res, surface, 401, 'API_KEY_REVOKED');
    });

    it(`surface ${surface}: a key that is revoked and expired says revoked`, async () => {
      const u = await app().user();
      await setKeyExpiry(app(), u.key, new Date(Date.now() - 1000).toISOString());
      await revoke(app(), u.key);
      expectError(await app().request('GET', path, { key: u.key }), surface, 401, 'API_KEY_REVOKED');
    });
  }

  it('accepts the scheme in any case and surrounding spaces', async () => {
    const u = await app().user();
    for (const authorization of [`bearer ${u.key}`, `BEARER   ${u.key}`, `Bearer ${u.key}  `]) {
      const res = await app().request('GET', '/v1/status', { headers: { authorization } });
      expect(res.status, authorization).toBe(200);
    }
  });

  it('never puts the key into an error', async () => {
    const u = await app().user();
    await revoke(app(), u.key);
    const res = await app().request('GET', '/v1/status', { key: u.key });
    expect(res.status).toBe(401);
    expect(res.text).not.toContain(u.key);
  });

  it('refuses to issue a key that is already expired or has an unreadable expiry', async () => {
    const u = await app().user();
    const actor = { userId: u.userId, apiKeyId: null, agent: null, requestId: null };
    const db = app().started.deps.db;
    for (const expiresAt of [new Date(Date.now() - 60_000).toISOString(), 'not a date', '2999-13-45T00:00:00Z']) {
      await expect(createApiKey(db, { userId: u.userId, accountId: u.accountId, expiresAt }, actor, new Date())).rejects.toMatchObject({
        code: 'INVALID_ARGUMENT',
        details: { field: 'expires_at' },
      });
    }
  });

  it('stores only a hash of the key', async () => {
    const u = await app().user();
    const row = await keyRow(app(), u.key);
    expect(JSON.stringify(row)).not.toContain(u.key);
    expect(row.token_hash).toMatch(/^[0-9a-f]{64}$/);
  });

  it('a key stops working for an account once its person leaves it', async () => {
    const u = await app().user();
    expect((await app().request('GET', '/v1/status', { key: u.key })).status).toBe(200);
    await app().started.deps.db.deleteFrom('memberships').where('user_id', '=', u.userId).where('account_id', '=', u.accountId).execute();
    expectError(await app().request('GET', '/v1/status', { key: u.key }), 'R', 403, 'ACCOUNT_ACCESS_DENIED');
  });
});

describeEachDatabase('request ids and the client version header', (app) => {
  it('every response carries a fresh req_ id that the client cannot choose', async () => {
    const u = await app().user();
    const ids = new Set<string>();
    for (const [method, path, key] of [
      ['GET', '/v1/status', u.key],
      ['GET', '/api/v1/status', u.key],
      ['GET', '/v1/nope', undefined],
      ['GET', '/api/v1/agent_auth/capabilities', undefined],
      ['GET', '/', undefined],
    ] as const) {
      const res = await app().request(method, path, { key, headers: { 'x-request-id': 'req_chosenByClient' } });
      const id = res.headers.get('x-request-id');
      expect(id, path).toMatch(REQ_ID);
      expect(id).not.toBe('req_chosenByClient');
      ids.add(id!);
    }
    expect(ids.size).toBe(5);
  });

  it('X-Service-Client-Version is on every surface A response (success, error, 404) and not on surface R', async () => {
    const u = await app().user();
    const cases: [string, string, string | undefined, number][] = [
      ['GET', '/api/v1/status', u.key, 200],
      ['GET', '/api/v1/status', undefined, 401],
      ['GET', '/api/v1/no-such-route', u.key, 404],
      ['GET', '/api/v1/agent_auth/capabilities', undefined, 200],
      ['GET', '/api/v1/openapi.json', undefined, 200],
      ['POST', '/api/v1/accounts', u.key, 403],
    ];
    for (const [method, path, key, status] of cases) {
      const res = await app().request(method, path, { key, body: method === 'POST' ? { name: 'x' } : undefined });
      expect(res.status, `${method} ${path}`).toBe(status);
      expect(res.headers.get('x-service-client-version'), `${method} ${path}`).toBe(CLIENT_VERSION);
    }
    const r = await app().request('GET', '/v1/status', { key: u.key });
    expect(r.headers.get('x-service-client-version')).toBeNull();
  });
});
