import http from 'node:http';
import type { Kysely } from 'kysely';
import type { DB, MembershipRole } from '../src/db/schema.ts';
import { newId } from '../src/ids.ts';
import { iso } from '../src/time.ts';
import { expect } from 'vitest';
import type { TestApp, TestResponse, TestUser } from './harness.ts';
import { CLIENT_VERSION } from '../src/version.ts';

// Factories for states the API cannot reach by itself (memberships, clocks moved on),
// written straight to the database the app under test uses.

export function dbOf(app: TestApp): Kysely<DB> {
  return app.started.deps.db;
}

/** Adds `user` to `accountId` with `role` (collaborator, administrator or owner). */
export async function addMembership(app: TestApp, user: Pick<TestUser, 'userId'>, accountId: string, role: MembershipRole): Promise<void> {
  await dbOf(app)
    .insertInto('memberships')
    .values({ id: newId('mem'), account_id: accountId, user_id: user.userId, role, created_at: iso() })
    .execute();
}

/** A person who belongs to `accountId` with `role`, and an API key of theirs that defaults to it. */
export async function member(app: TestApp, accountId: string, role: MembershipRole): Promise<TestUser> {
  const u = await app.user();
  await addMembership(app, u, accountId, role);
  const key = await app.key({ ...u, accountId });
  return { ...u, accountId, key };
}

/** An agency account, its owner and the owner's whole-account key. */
export async function agency(app: TestApp): Promise<TestUser> {
  return app.user({ plan: 'agency' });
}

/** Creates a client account through the API (surface R) and returns its id. */
export async function createClient(app: TestApp, owner: TestUser, body: Record<string, unknown> = {}): Promise<string> {
  const res = await app.request('POST', '/v1/accounts', { key: owner.key, body: { name: 'Client', ...body } });
  if (res.status !== 201) throw new Error(`creating a client failed: ${res.status} ${res.text}`);
  return res.body.data.account.id as string;
}

/** Sets a key's expiry directly (creation refuses a past expiry), as if time had passed. */
export async function setKeyExpiry(app: TestApp, token: string, expiresAt: string | null): Promise<void> {
  const { sha256Hex } = await import('../src/ids.ts');
  const res = await dbOf(app).updateTable('api_keys').set({ expires_at: expiresAt }).where('token_hash', '=', sha256Hex(token)).executeTakeFirst();
  if (Number(res.numUpdatedRows) !== 1) throw new Error('no such key');
}

export async function keyRow(app: TestApp, token: string) {
  const { sha256Hex } = await import('../src/ids.ts');
  return dbOf(app).selectFrom('api_keys').selectAll().where('token_hash', '=', sha256Hex(token)).executeTakeFirstOrThrow();
}

/**
 * A request through node:http, for what fetch refuses to send: a body on GET or DELETE,
 * or a body larger than the declared limits.
 */
export function rawRequest(
  app: TestApp,
  method: string,
  path: string,
  opts: { key?: string; body?: string | Buffer; headers?: Record<string, string> } = {},
): Promise<TestResponse> {
  const url = new URL(path, app.base);
  const headers: Record<string, string | number> = { accept: 'application/json', ...opts.headers };
  if (opts.key) headers.authorization = `Bearer ${opts.key}`;
  if (opts.body !== undefined) headers['content-length'] = Buffer.byteLength(opts.body);
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let body: any;
        try {
          body = text ? JSON.parse(text) : undefined;
        } catch {
          body = undefined;
        }
        const h = new Headers();
        for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) h.set(k, Array.isArray(v) ? v.join(', ') : v);
        resolve({ status: res.statusCode ?? 0, headers: h, text, body });
      });
      res.on('error', reject);
    });
    // The server may answer (413) before it has read the whole body; that is fine.
    req.on('error', (err: NodeJS.ErrnoException) => (err.code === 'EPIPE' || err.code === 'ECONNRESET' ? undefined : reject(err)));
    if (opts.body !== undefined) req.write(opts.body);
    req.end();
  });
}

export const REQ_ID = /^req_[A-Za-z0-9]+$/;

export type Surface = 'R' | 'A';

/** Asserts the error envelope of a surface and returns the error object. */
export function expectError(res: TestResponse, surface: Surface, status: number, code: string) {
  expect(res.status, res.text).toBe(status);
  expect(res.headers.get('content-type')).toMatch(/^application\/json/);
  const requestId = res.headers.get('x-request-id');
  expect(requestId).toMatch(REQ_ID);
  if (surface === 'R') {
    expect(res.body.success).toBe(false);
    expect(Object.keys(res.body).sort()).toEqual(['error', 'success']);
    expect(res.body.error).toMatchObject({ code, request_id: requestId });
    expect(typeof res.body.error.message).toBe('string');
    expect(res.body.error.details).toBeTypeOf('object');
  } else {
    expect(res.body.success).toBeUndefined();
    expect(Object.keys(res.body)).toEqual(['error']);
    expect(res.body.error).toMatchObject({ code, request_id: requestId });
    expect(typeof res.body.error.message).toBe('string');
    expect(res.body.error.docs_url).toMatch(new RegExp(`^https?://.+#${code}$`));
    expect(res.headers.get('x-service-client-version')).toBe(CLIENT_VERSION);
  }
  return res.body.error;
}

