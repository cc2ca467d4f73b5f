import { expect, it } from 'vitest';
import { describeEachDatabase } from './harness.ts';
import { agency, dbOf, expectError, rawRequest } from './factories.ts';

// Request bodies, query values and unknown routes: every bad input gets a clear error in
// the surface's envelope and changes nothing.

const JSON_HEADERS = { 'content-type': 'application/json' };

describeEachDatabase('HTTP input and envelopes', (app) => {
  const clientCount = async (agencyId: string) =>
    (await dbOf(app()).selectFrom('accounts').select('id').where('parent_account_id', '=', agencyId).execute()).length;

  it('invalid JSON is 400 MALFORMED_JSON on both surfaces', async () => {
    const owner = await agency(app());
    for (const rawBody of ['{bad', '{"name": "x",}', "{'name': 'x'}", '{"name": "x"} trailing']) {
      expectError(await app().request('POST', '/v1/accounts', { key: owner.key, rawBody }), 'R', 400, 'MALFORMED_JSON');
      expectError(await app().request('POST', '/api/v1/accounts', { key: owner.key, rawBody }), 'A', 400, 'MALFORMED_JSON');
    }
    expect(await clientCount(owner.accountId)).toBe(0);
  });

  it('wrong types and unknown fields are 422 INVALID_ARGUMENT naming the field', async () => {
    const owner = await agency(app());
    const cases: [unknown, string][] = [
      [{ name: 5 }, 'name'],
      [{ name: ['x'] }, 'name'],
      [{ name: 'x', bogus: 1 }, 'bogus'],
      [{ name: 'x', account_id: 7 }, 'account_id'],
      [{ name: 'x', reason: 12 }, 'reason'],
    ];
    for (const [body, field] of cases) {
      for (const path of ['/v1/accounts', '/api/v1/accounts']) {
        const res = await app().request('POST', path, { key: owner.key, body });
        const err = expectError(res, path.startsWith('/api') ? 'A' : 'R', 422, 'INVALID_ARGUMENT');
        expect(err.details.field, `${path} ${JSON.stringify(body)}`).toBe(field);
        expect(err.message).toContain(field);
      }
    }
    for (const body of [[], null, 'name', 3]) {
      const err = expectError(await app().request('POST', '/v1/accounts', { key: owner.key, body }), 'R', 422, 'INVALID_ARGUMENT');
      expect(err.details.field).toBe('body');
    }
    expect(await clientCount(owner.accountId)).toBe(0);
  });

  it('a body over 1 MiB is 413 PAYLOAD_TOO_LARGE and creates nothing', async () => {
    const owner = await agency(app());
    const body = JSON.stringify({ name: 'x', reason: 'r'.repeat(1024 * 1024) });
    for (const path of ['/v1/accounts', '/api/v1/accounts']) {
      const res = await rawRequest(app(), 'POST', path, { key: owner.key, body, headers: JSON_HEADERS });
      expectError(res, path.startsWith('/api') ? 'A' : 'R', 413, 'PAYLOAD_TOO_LARGE');
    }
    expect(await clientCount(owner.accountId)).toBe(0);
    // just under the limit is read (and then refused for what it says, not its size)
    const near = JSON.stringify({ name: 'x', reason: 'r'.repeat(1024 * 1024 - 100) });
    const res = await rawRequest(app(), 'POST', '/v1/accounts', { key: owner.key, body: near, headers: JSON_HEADERS });
    expect(expectError(res, 'R', 422, 'INVALID_ARGUMENT').details.field).toBe('reason');
  });

  it('a form-encoded body is 415 on both surfaces', async () => {
    const owner = await agency(app());
    const headers = { 'content-type': 'application/x-www-form-urlencoded' };
    expectError(await app().request('POST', '/v1/accounts', { key: owner.key, rawBody: 'name=x', headers }), 'R', 415, 'UNSUPPORTED_MEDIA_TYPE');
    expectError(await app().request('POST', '/api/v1/accounts', { key: owner.key, rawBody: 'name=x', headers }), 'A', 415, 'UNSUPPORTED_MEDIA_TYPE');
    expect(await clientCount(owner.accountId)).toBe(0);
  });

  // Known bug, fix pending in src/http/server.ts (owned by another change): Fastify keeps its
  // default text/plain parser, so a text body reaches validation and answers 422 instead of 415.
  it('a text/plain body is 415 UNSUPPORTED_MEDIA_TYPE', async () => {
    const owner = await agency(app());
    const headers = { 'content-type': 'text/plain' };
    expectError(await app().request('POST', '/v1/accounts', { key: owner.key, rawBody: '{"name":"x"}', headers }), 'R', 415, 'UNSUPPORTED_MEDIA_TYPE');
  });

  // Known bug, fix pending in src/http/server.ts: the JSON parser's RegExp is anchored with `$`
  // and Fastify tests it against the content type with its parameters, so the very common
  // `application/json; charset=utf-8` is refused with 415.
  it('application/json with a charset parameter is accepted', async () => {
    const owner = await agency(app());
    const res = await app().request('POST', '/v1/accounts', {
      key: owner.key,
      rawBody: JSON.stringify({ name: 'Charset' }),
      headers: { 'content-type': 'application/json; charset=utf-8' },
    });
    expect(res.status, res.text).toBe(201);
  });

  it('vendor JSON content types are parsed as JSON', async () => {
    const owner = await agency(app());
    const res = await app().request('POST', '/v1/accounts', { key: owner.key, rawBody: JSON.stringify({ name: 'Vendor' }), headers: { 'content-type': 'application/vnd.api+json' } });
    expect(res.status, res.text).toBe(201);
  });

  it('a {} JSON body on GET and DELETE is accepted and ignored', async () => {
    const u = await app().user();
    for (const path of ['/v1/status', '/api/v1/status', '/v1/accounts', '/v1/account/limits']) {
      const res = await rawRequest(app(), 'GET', path, { key: u.key, body: '{}', headers: JSON_HEADERS });
      expect(res.status, `${path} ${res.text}`).toBe(200);
    }
    const withAccount = await rawRequest(app(), 'GET', `/v1/accounts/${u.accountId}`, { key: u.key, body: '{}', headers: JSON_HEADERS });
    expect(withAccount.status).toBe(200);
    // DELETE reaches the route (a missing mailbox, not a body or route error)
    const del = await rawRequest(app(), 'DELETE', '/v1/mailboxes/bkt_01ARZ3NDEKTSV4RRFFQ69G5FAV?confirmation=x', { key: u.key, body: '{}', headers: JSON_HEADERS });
    expect(del.status, del.text).toBe(404);
    expect(del.body.error.code).not.toBe('NOT_FOUND');
    expect(del.body.error.code).not.toMatch(/MALFORMED_JSON|UNSUPPORTED_MEDIA_TYPE|INVALID_ARGUMENT/);
    // an empty body with a JSON content type is no body at all
    const empty = await rawRequest(app(), 'GET', '/v1/status', { key: u.key, body: '', headers: JSON_HEADERS });
    expect(empty.status).toBe(200);
  });

  it('unknown routes are a JSON 404 in each surface\'s envelope, with or without a key', async () => {
    const u = await app().user();
    for (const key of [u.key, undefined]) {
      for (const [method, path] of [
        ['GET', '/v1/no-such-thing'],
        ['POST', '/v1/no/such/thing'],
        ['DELETE', '/v1/status'],
        ['GET', '/v1'],
      ] as const) {
        const err = expectError(await app().request(method, path, { key }), 'R', 404, 'NOT_FOUND');
        expect(err.message).toContain(path);
      }
      for (const [method, path] of [
        ['GET', '/api/v1/no-such-thing'],
        ['PUT', '/api/v1/status'],
        ['GET', '/api/v2/status'],
      ] as const) {
        expectError(await app().request(method, path, { key }), 'A', 404, 'NOT_FOUND');
      }
    }
    // a query string is not echoed into the message
    const q = await app().request('GET', '/v1/nope', { query: { token: 'secret-value' } });
    expect(q.text).not.toContain('secret-value');
  });

  it('limit must be an integer from 1 to 100', async () => {
    const u = await app().user();
    for (const limit of ['0', '101', 'abc', '-1', '1.5', '', '1e9']) {
      const res = await app().request('GET', `/v1/accounts?limit=${encodeURIComponent(limit)}`, { key: u.key });
      const err = expectError(res, 'R', 422, 'INVALID_ARGUMENT');
      expect(err.details.field, limit).toBe('limit');
    }
    for (const limit of [1, 100]) {
      const res = await app().request('GET', '/v1/accounts', { key: u.key, query: { limit } });
      expect(res.status).toBe(200);
      expect(res.body.data.pagination.limit).toBe(limit);
    }
  });

  it('reason: at most 500 characters, no credentials, and nothing changes when it is refused', async () => {
    const owner = await agency(app());
    const apiKeyLike = `cubby_${'Ab3'.repeat(13)}x`;
    expect(apiKeyLike).toMatch(/^cubby_[A-Za-z0-9]{40}$/);
    const long = 'r'.repeat(501);

    for (const path of ['/v1/accounts', '/api/v1/accounts']) {
      const surface = path.startsWith('/api') ? 'A' : 'R';
      const tooLong = expectError(await app().request('POST', path, { key: owner.key, body: { name: 'x', reason: long } }), surface, 422, 'INVALID_ARGUMENT');
      expect(tooLong.details.field).toBe('reason');
      for (const reason of [`cleanup, key was ${apiKeyLike}`, `Authorization: Bearer ${owner.key}`, 'whsec_abcdefghijklmnop']) {
        const err = expectError(await app().request('POST', path, { key: owner.key, body: { name: 'x', reason } }), surface, 422, 'REASON_CONTAINS_SECRET');
        expect(err.details.field).toBe('reason');
        // the secret is not echoed back
        expect(JSON.stringify(err)).not.toContain(apiKeyLike);
        expect(JSON.stringify(err)).not.toContain(owner.key);
      }
    }
    expect(await clientCount(owner.accountId)).toBe(0);
    const activity = await dbOf(app()).selectFrom('activity').select('reason').where('account_id', '=', owner.accountId).execute();
    expect(activity.map((a) => a.reason).filter(Boolean)).toEqual([]);

    // on reads too
    expectError(await app().request('GET', '/v1/status', { key: owner.key, query: { reason: long } }), 'R', 422, 'INVALID_ARGUMENT');
    expectError(await app().request('GET', '/v1/status', { key: owner.key, query: { reason: apiKeyLike } }), 'R', 422, 'REASON_CONTAINS_SECRET');
    expectError(await app().request('GET', '/api/v1/status', { key: owner.key, query: { reason: apiKeyLike } }), 'A', 422, 'REASON_CONTAINS_SECRET');
    expectError(await app().request('GET', '/v1/accounts', { key: owner.key, query: { reason: apiKeyLike } }), 'R', 422, 'REASON_CONTAINS_SECRET');

    // exactly 500 characters and null are fine
    expect((await app().request('POST', '/v1/accounts', { key: owner.key, body: { name: 'ok', reason: 'r'.repeat(500) } })).status).toBe(201);
    expect((await app().request('POST', '/v1/accounts', { key: owner.key, body: { name: 'ok2', reason: null } })).status).toBe(201);
  });

  // Known bug, fix pending in src/http/server.ts: a path with broken percent-encoding is
  // answered by Fastify's router with its own body ({"error":"Bad Request","code":"FST_ERR_BAD_URL"})
  // and no x-request-id. Fix: Fastify({ frameworkErrors: (err, req, reply) => sendError(req, reply, err, docsBase()) });
  // render-error.ts already maps FST_ERR_BAD_URL to 404 NOT_FOUND and sets the headers.
  it('a path with broken percent-encoding is a JSON 404 in the envelope', async () => {
    expectError(await app().request('GET', '/v1/accounts/%E0%A4%A'), 'R', 404, 'NOT_FOUND');
    expectError(await app().request('GET', '/api/v1/buckets/%zz'), 'A', 404, 'NOT_FOUND');
  });
});
