import { sql } from 'kysely';
import { expect, it } from 'vitest';
import { compiledInsert, compiledQuery } from '../src/db/compiled-query.ts';
import { receivedUsage, addReceivedUsage } from '../src/inbound/usage.ts';
import { describeEachDatabase } from './harness.ts';

// Hot statements built by Kysely once and run with new values (src/db/compiled-query.ts).

describeEachDatabase('compiled queries', (app) => {
  it('run with each call’s values, inside and outside transactions, and give what the builder gives', async () => {
    const { db, dialect } = app().started.deps;
    const scope = `scope-${Math.random()}`;
    const at = new Date('2026-03-15T00:00:00Z');
    expect(await receivedUsage(db, scope, at)).toEqual({ count: 0, bytes: 0 });
    await addReceivedUsage(db, dialect, [scope], at, 100, 2);
    await db.transaction().execute((trx) => addReceivedUsage(trx, dialect, [scope, `${scope}-b`], at, 50));
    expect(await receivedUsage(db, scope, at)).toEqual({ count: 3, bytes: 150 });
    expect(await receivedUsage(db, `${scope}-b`, at)).toEqual({ count: 1, bytes: 50 });
    expect(await receivedUsage(db, scope, new Date('2026-04-01T00:00:00Z'))).toEqual({ count: 0, bytes: 0 });
    const built = await db.selectFrom('received_usage').select(['count', 'bytes']).where('scope_id', '=', scope).execute();
    expect(built.map((r) => ({ count: Number(r.count), bytes: Number(r.bytes) }))).toEqual([{ count: 3, bytes: 150 }]);
  });

  it('refuses, on first use, an argument that does not come out as a bound parameter (unused, or inlined as a literal)', async () => {
    const { db } = app().started.deps;
    const unused = compiledQuery((d, _scope: string) => d.selectFrom('received_usage').select('count'), 1);
    await expect(unused.execute(db, 'a')).rejects.toThrow(/not a bound parameter/);
    const inlined = compiledQuery((d, scope: string) => d.selectFrom('received_usage').select('count').where('scope_id', '=', sql.lit(scope)), 1);
    await expect(inlined.execute(db, 'a')).rejects.toThrow(/not a bound parameter/);
  });

  it('inserts rows of any count with the values of each call, as the builder does; ON CONFLICT counts only new rows', async () => {
    const { db } = app().started.deps;
    const insert = compiledInsert('blobs', (qb) => qb.onConflict((oc: any) => oc.column('sha256').doNothing()));
    const row = (i: number) => ({ sha256: `ci-${process.pid}-${Math.random()}-${i}`.padEnd(64, '0'), byte_size: i, md5: `m${i}`, created_at: '2026-03-15T00:00:00.000Z' });
    const one = [row(1)];
    const three = [row(2), row(3), row(4)];
    expect(await insert(db, one)).toBe(1n);
    expect(await insert(db, three)).toBe(3n);
    // The same shape again, with one row already there: new values bound, the old row left alone.
    const again = [row(5), { ...three[0]!, byte_size: 999 }, row(6)];
    expect(await insert(db, again)).toBe(2n);
    expect(await insert(db, [])).toBe(0n);
    const all = [...one, ...three, again[0]!, again[2]!];
    const stored = await db.selectFrom('blobs').select(['sha256', 'byte_size', 'md5']).where('sha256', 'in', all.map((r) => r.sha256)).orderBy('byte_size').execute();
    expect(stored.map((r) => ({ ...r, byte_size: Number(r.byte_size) }))).toEqual(all.map(({ sha256, byte_size, md5 }) => ({ sha256, byte_size, md5 })).sort((a, b) => a.byte_size - b.byte_size));
  });

  it('inserts a row that the cached text cannot take (a missing column, an expression) through the builder', async () => {
    const { db } = app().started.deps;
    const insert = compiledInsert('blobs');
    const sha = (s: string) => `ci-${s}-${Math.random()}`.padEnd(64, '0');
    // Cache the two-column-short shape first; then a row with another column set, and one with an expression.
    await insert(db, [{ sha256: sha('a'), byte_size: 1, md5: 'x', created_at: '2026-03-15T00:00:00.000Z' }]);
    const missing = { sha256: sha('b'), byte_size: 2, md5: 'y' } as any;
    await expect(insert(db, [missing])).rejects.toThrow(); // created_at is required: the database says so, nothing inserted silently
    const expr = { sha256: sha('c'), byte_size: sql<number>`1 + 2`, md5: 'z', created_at: '2026-03-15T00:00:00.000Z' } as any;
    expect(await insert(db, [expr])).toBe(1n);
    const got = await db.selectFrom('blobs').select('byte_size').where('sha256', '=', expr.sha256).executeTakeFirstOrThrow();
    expect(Number(got.byte_size)).toBe(3);
  });
});

