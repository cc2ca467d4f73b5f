import { describe, expect, it } from 'vitest';
import { describeEachDatabase } from './harness.ts';
import { agency, createClient, expectError } from './factories.ts';
import { decodeCursor, encodeCursor, toPage } from '../src/http/cursor.ts';
import { AppError } from '../src/errors.ts';

// Cursors are opaque, signed, keyset-based and bound to the list, key and filters they were
// made for.

function cursorError(fn: () => unknown): AppError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(AppError);
    return err as AppError;
  }
  throw new Error('expected the cursor to be refused');
}

describe('cursor encoding', () => {
  const secret = 'a-test-secret-that-is-long-enough-000';

  it('round-trips the key it was made with', () => {
    const c = encodeCursor(secret, 'accounts', { key: 'k1' }, ['acct_B', 3, null]);
    expect(c).toMatch(/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
    expect(decodeCursor(secret, c, 'accounts', { key: 'k1' })).toEqual(['acct_B', 3, null]);
  });

  it('binding ignores filter order and undefined filters', () => {
    const c = encodeCursor(secret, 'emails', { a: 1, b: 'x', c: undefined }, ['k']);
    expect(decodeCursor(secret, c, 'emails', { b: 'x', a: 1 })).toEqual(['k']);
  });

  it('refuses another list, other filters, another secret and any tampering', () => {
    const c = encodeCursor(secret, 'emails', { mailbox: 'bkt_1', unread: true }, ['eml_1']);
    const cases: [string, () => unknown][] = [
      ['other list', () => decodeCursor(secret, c, 'files', { mailbox: 'bkt_1', unread: true })],
      ['other filter value', () => decodeCursor(secret, c, 'emails', { mailbox: 'bkt_1', unread: false })],
      ['missing filter', () => decodeCursor(secret, c, 'emails', { mailbox: 'bkt_1' })],
      ['extra filter', () => decodeCursor(secret, c, 'emails', { mailbox: 'bkt_1', unread: true, q: 'x' })],
      ['other secret', () => decodeCursor(`${secret}x`, c, 'emails', { mailbox: 'bkt_1', unread: true })],
      ['flipped mac', () => decodeCursor(secret, `${c.slice(0, -1)}${c.endsWith('A') ? 'B' : 'A'}`, 'emails', { mailbox: 'bkt_1', unread: true })],
      ['no mac', () => decodeCursor(secret, c.split('.')[0]!, 'emails', { mailbox: 'bkt_1', unread: true })],
      ['three parts', () => decodeCursor(secret, `${c}.x`, 'emails', { mailbox: 'bkt_1', unread: true })],
      ['empty', () => decodeCursor(secret, '', 'emails', { mailbox: 'bkt_1', unread: true })],
      ['garbage', () => decodeCursor(secret, '!!!.???', 'emails', { mailbox: 'bkt_1', unread: true })],
      ['too long', () => decodeCursor(secret, `${'a'.repeat(3000)}.b`, 'emails', { mailbox: 'bkt_1', unread: true })],
    ];
    for (const [name, fn] of cases) {
      const err = cursorError(fn);
      expect(err.code, name).toBe('INVALID_ARGUMENT');
      expect(err.details.field, name).toBe('cursor');
    }
    // a re-signed body with another key is still refused without the secret
    const [body] = c.split('.');
    const forged = Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(body!, 'base64url').toString()), k: ['eml_0'] })).toString('base64url');
    expect(cursorError(() => decodeCursor(secret, `${forged}.${c.split('.')[1]}`, 'emails', { mailbox: 'bkt_1', unread: true })).details.field).toBe('cursor');
  });

  it('toPage gives a cursor only when there is more, unless asked to always give one', () => {
    const rows = [{ id: 'a' }, { id: 'b' }, { id: 'c' }];
    const opts = { secret, list: 'l', filters: {} };
    const p1 = toPage(rows, 2, (r) => [r.id], opts);
    expect(p1.items.map((r) => r.id)).toEqual(['a', 'b']);
    expect(p1.pagination.has_more).toBe(true);
    expect(decodeCursor(secret, p1.pagination.next_cursor!, 'l', {})).toEqual(['b']);
    const p2 = toPage(rows.slice(2), 2, (r) => [r.id], opts);
    expect(p2.pagination).toEqual({ limit: 2, has_more: false, next_cursor: null });
    const polled = toPage([], 2, (r: { id: string }) => [r.id], { ...opts, alwaysCursor: true, previous: ['c'] });
    expect(polled.pagination.has_more).toBe(false);
    expect(decodeCursor(secret, polled.pagination.next_cursor!, 'l', {})).toEqual(['c']);
  });
});

describeEachDatabase('paging through accounts', (app) => {
  async function pageAll(key: string, limit: number, query: Record<string, string> = {}) {
    const seen: string[] = [];
    let cursor: string | undefined;
    for (let pages = 0; pages < 50; pages++) {
      const res = await app().request('GET', '/v1/accounts', { key, query: { limit, cursor, ...query } });
      expect(res.status, res.text).toBe(200);
      const { accounts, pagination } = res.body.data;
      expect(accounts.length).toBeLessThanOrEqual(limit);
      expect(pagination.limit).toBe(limit);
      seen.push(...accounts.map((a: any) => a.id));
      if (!pagination.has_more) {
        expect(pagination.next_cursor).toBeNull();
        return seen;
      }
      expect(typeof pagination.next_cursor).toBe('string');
      cursor = pagination.next_cursor;
    }
    throw new Error('paging did not end');
  }

  it('limit=1 visits every account once, in a stable order', async () => {
    const owner = await agency(app());
    const ids = [owner.accountId];
    for (let i = 0; i < 5; i++) ids.push(await createClient(app(), owner, { name: `Client ${i}` }));
    const one = await pageAll(owner.key, 1);
    expect(one).toHaveLength(6);
    expect(new Set(one).size).toBe(6);
    expect([...one].sort()).toEqual([...ids].sort());
    expect(await pageAll(owner.key, 4)).toEqual(one);
    expect(await pageAll(owner.key, 100)).toEqual(one);
  });

  it('an account added while paging neither repeats nor shifts the pages already seen', async () => {
    const owner = await agency(app());
    for (let i = 0; i < 3; i++) await createClient(app(), owner, { name: `Client ${i}` });
    const first = await app().request('GET', '/v1/accounts', { key: owner.key, query: { limit: 2 } });
    const seen = first.body.data.accounts.map((a: any) => a.id);
    const added = await createClient(app(), owner, { name: 'Late' });
    let cursor = first.body.data.pagination.next_cursor;
    while (cursor) {
      const res = await app().request('GET', '/v1/accounts', { key: owner.key, query: { limit: 2, cursor } });
      seen.push(...res.body.data.accounts.map((a: any) => a.id));
      cursor = res.body.data.pagination.next_cursor;
    }
    expect(new Set(seen).size).toBe(seen.length);
    // ids grow with time, so the late account sorts last and is still reached
    expect(seen.at(-1)).toBe(added);
    expect(seen).toHaveLength(5);
  });

  it('a tampered cursor, another key\'s cursor or a cursor from another secret is 422 naming cursor', async () => {
    const owner = await agency(app());
    for (let i = 0; i < 2; i++) await createClient(app(), owner);
    const page = await app().request('GET', '/v1/accounts', { key: owner.key, query: { limit: 1 } });
    const cursor: string = page.body.data.pagination.next_cursor;
    expect(cursor).toBeTruthy();

    const [body, mac] = cursor.split('.');
    const payload = JSON.parse(Buffer.from(body!, 'base64url').toString());
    const tamperedBody = `${Buffer.from(JSON.stringify({ ...payload, k: ['acct_0'] })).toString('base64url')}.${mac}`;
    const tamperedMac = `${body}.${mac!.slice(0, -2)}xx`;
    for (const bad of [tamperedBody, tamperedMac, 'not-a-cursor', `${cursor}x`]) {
      const err = expectError(await app().request('GET', '/v1/accounts', { key: owner.key, query: { limit: 1, cursor: bad } }), 'R', 422, 'INVALID_ARGUMENT');
      expect(err.details.field).toBe('cursor');
    }

    // the same person's other key: the cursor is bound to the key that made it
    const otherKey = await app().key(owner);
    const err = expectError(await app().request('GET', '/v1/accounts', { key: otherKey, query: { limit: 1, cursor } }), 'R', 422, 'INVALID_ARGUMENT');
    expect(err.details.field).toBe('cursor');

    // a cursor signed with another installation's secret
    const foreign = encodeCursor('another-secret-another-secret-0000', 'accounts', { key: 'x' }, [owner.accountId]);
    expect(expectError(await app().request('GET', '/v1/accounts', { key: owner.key, query: { cursor: foreign } }), 'R', 422, 'INVALID_ARGUMENT').details.field).toBe('cursor');

    // the cursor still works for its own key
    const ok = await app().request('GET', '/v1/accounts', { key: owner.key, query: { limit: 1, cursor } });
    expect(ok.status).toBe(200);
  });

  it('a cursor made with other filters is 422 naming cursor', async () => {
    const owner = await agency(app());
    await createClient(app(), owner);
    // The accounts list has no filters besides the key, so make a cursor for this key with a
    // filter set the list does not use, signed with the app's own secret.
    const keyId = (await app().request('GET', '/v1/status', { key: owner.key })).body.data.connection.api_key_id;
    const secret = app().started.deps.secret;
    const filtered = encodeCursor(secret, 'accounts', { key: keyId, status: 'read_only' }, [owner.accountId]);
    const err = expectError(await app().request('GET', '/v1/accounts', { key: owner.key, query: { cursor: filtered } }), 'R', 422, 'INVALID_ARGUMENT');
    expect(err.details).toMatchObject({ field: 'cursor', reason: 'filter_mismatch' });
    // and the same cursor without the stray filter is accepted
    const plain = encodeCursor(secret, 'accounts', { key: keyId }, [owner.accountId]);
    expect((await app().request('GET', '/v1/accounts', { key: owner.key, query: { cursor: plain } })).status).toBe(200);
  });
});
