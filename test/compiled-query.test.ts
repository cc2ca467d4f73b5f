import { sql } from 'kysely';
import { expect, it } from 'vitest';
import { compiledInsert, compiledListQuery, compiledQuery } from '../src/db/compiled-query.ts';
import { receivedUsage, receivedUsageUpsert } from '../src/inbound/usage.ts';
import { WriteBatch } from '../src/db/write-batch.ts';
import { describeEachDatabase } from './harness.ts';

// Hot statements built by Kysely once and run with new values (src/db/compiled-query.ts).

describeEachDatabase('compiled queries', (app) => {
  it('run with each call’s values, inside and outside transactions, and give what the builder gives', async () => {
    const { db, dialect } = app().started.deps;
    const scope = `scope-${Math.random()}`;
    const at = new Date('2026-03-15T00:00:00Z');
    expect(await receivedUsage(db, scope, at)).toEqual({ count: 0, bytes: 0 });
    type Totals = { scope_id: string; count: number | string; bytes: number | string };
    const add = (d: typeof db, added: [string, number, number][]) =>
      new WriteBatch(dialect).add(receivedUsageUpsert(d, at, new Map(added.map(([s, count, bytes]) => [s, { count, bytes }]))), { returning: true }).run<Totals>(d);
    const totals = (rows: Totals[]) => rows.map((r) => ({ scope_id: r.scope_id, count: Number(r.count), bytes: Number(r.bytes) })).sort((a, b) => a.scope_id.localeCompare(b.scope_id));
    expect(totals(await add(db, [[scope, 2, 100]]))).toEqual([{ scope_id: scope, count: 2, bytes: 100 }]);
    // The upsert answers each scope's new totals for the month.
    const second = await db.transaction().execute((trx) => add(trx, [[`${scope}-b`, 1, 50], [scope, 1, 50]]));
    expect(totals(second)).toEqual([{ scope_id: scope, count: 3, bytes: 150 }, { scope_id: `${scope}-b`, count: 1, bytes: 50 }]);
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

  it('a list query runs with lists of any length and the values of each call, as the builder does; an empty list is refused', async () => {
    const { db } = app().started.deps;
    const insert = compiledInsert('received_usage');
    const rows = Array.from({ length: 5 }, (_, i) => ({ scope_id: `cl-${Math.random()}-${i}`, period: i % 2 ? '2026-03' : '2026-04', count: i, bytes: i * 10 }));
    await insert(db, rows);
    const inPeriod = compiledListQuery((d, scopes, period: string) => d.selectFrom('received_usage').select(['scope_id', 'count']).where('scope_id', 'in', scopes).where('period', '=', period).orderBy('count'), 1);
    const ids = rows.map((r) => r.scope_id);
    const counts = async (list: string[], period: string) => (await inPeriod.execute(db, list, period)).map((r) => Number(r.count));
    expect(await counts(ids, '2026-03')).toEqual([1, 3]);
    expect(await counts(ids, '2026-04')).toEqual([0, 2, 4]);
    // Another length, then the first length again with other values: each call binds its own.
    expect(await counts(ids.slice(0, 2), '2026-03')).toEqual([1]);
    expect(await counts([ids[4]!, ids[3]!, ids[2]!, ids[1]!, 'none'], '2026-04')).toEqual([2, 4]);
    const built = await db.selectFrom('received_usage').select('count').where('scope_id', 'in', ids.slice(1, 4)).where('period', '=', '2026-03').orderBy('count').execute();
    expect(await counts(ids.slice(1, 4), '2026-03')).toEqual(built.map((r) => Number(r.count)));
    expect(() => inPeriod.compile(db, [], '2026-03')).toThrow(/empty/);
    const inlined = compiledListQuery((d, scopes) => d.selectFrom('received_usage').select('count').where('scope_id', 'in', scopes.map((x) => sql.lit(x))), 0);
    await expect(inlined.execute(db, ['a'])).rejects.toThrow(/not a bound parameter/);
  });

  // On received_usage: nothing of the app deletes its rows (the blob purge job would race a test on blobs).
  it('inserts rows of any count with the values of each call, as the builder does; ON CONFLICT counts only new rows', async () => {
    const { db } = app().started.deps;
    const insert = compiledInsert('received_usage', (qb) => qb.onConflict((oc: any) => oc.columns(['scope_id', 'period']).doNothing()));
    const row = (i: number) => ({ scope_id: `ci-${Math.random()}-${i}`, period: '2026-03', count: i, bytes: i * 10 });
    const one = [row(1)];
    const three = [row(2), row(3), row(4)];
    expect(await insert(db, one)).toBe(1n);
    expect(await insert(db, three)).toBe(3n);
    // The same shape again, with one row already there: new values bound, the old row left alone.
    const again = [row(5), { ...three[0]!, count: 999 }, row(6)];
    expect(await insert(db, again)).toBe(2n);
    expect(await insert(db, [])).toBe(0n);
    const all = [...one, ...three, again[0]!, again[2]!];
    const stored = await db.selectFrom('received_usage').select(['scope_id', 'period', 'count', 'bytes']).where('scope_id', 'in', all.map((r) => r.scope_id)).orderBy('count').execute();
    expect(stored.map((r) => ({ ...r, count: Number(r.count), bytes: Number(r.bytes) }))).toEqual(all);
  });

  it('inserts more rows than one statement may bind, in several statements, and counts them all', async () => {
    const { db } = app().started.deps;
    const insert = compiledInsert('received_usage');
    const prefix = `chunk-${Math.random()}`;
    // 4 columns: 5,000 rows per statement under the 20,000-parameter bound.
    const rows = Array.from({ length: 5_001 }, (_, i) => ({ scope_id: `${prefix}-${i}`, period: '2026-05', count: i, bytes: 0 }));
    expect(insert.compileChunks(db, rows)).toHaveLength(2);
    expect(insert.compileChunks(db, [])).toEqual([]);
    expect(await insert(db, rows)).toBe(5_001n);
    const stored = await db.selectFrom('received_usage').select((eb) => eb.fn.countAll<number>().as('n')).where('scope_id', 'like', `${prefix}-%`).executeTakeFirstOrThrow();
    expect(Number(stored.n)).toBe(5_001);
  });

  it('on Postgres sends rows as one JSON parameter, one text for any row count; values JSON would change take the values list, stored as the builder stores them', async () => {
    const { db, dialect } = app().started.deps;
    const insert = compiledInsert('blobs', (qb) => qb.onConflict((oc: any) => oc.column('sha256').doNothing()));
    const sha = (s: string) => `ci-${s}-${Math.random()}`;
    const row = (s: string, extra: Record<string, unknown> = {}) => ({ sha256: sha(s), byte_size: 3, md5: 'm', created_at: '2026-03-01T00:00:00.000Z', inline_bytes: null, ...extra });
    const one = insert.compile(db, [row('a')]);
    const three = insert.compile(db, [row('b'), row('c'), row('d')]);
    if (dialect === 'postgres') {
      expect(one.sql).toBe(three.sql);
      expect(one.sql).toContain('json_populate_recordset');
      expect(one.parameters).toHaveLength(1);
    } else {
      expect(one.sql).not.toBe(three.sql);
    }
    // Bytes, and a string with a lone surrogate, go as a values list (JSON would carry neither as is).
    const bytes = row('bytes', { inline_bytes: Buffer.from([0, 1, 255]) });
    const surrogate = row('surrogate', { md5: 'a\ud800b' });
    for (const r of [bytes, surrogate]) expect(insert.compile(db, [r]).sql).not.toContain('json_populate_recordset');
    expect(await insert(db, [bytes, surrogate, row('plain', { md5: 'ünï \u{1F600} "q" \\ \n' })])).toBe(3n);
    const builder = row('builder', { md5: 'a\ud800b' });
    await db.insertInto('blobs').values(builder).execute();
    const stored = await db.selectFrom('blobs').select(['sha256', 'md5', 'inline_bytes']).where('sha256', 'in', [bytes.sha256, surrogate.sha256, builder.sha256]).execute();
    const by = new Map(stored.map((r) => [r.sha256, r]));
    expect(Buffer.from(by.get(bytes.sha256)!.inline_bytes as Uint8Array)).toEqual(Buffer.from([0, 1, 255]));
    expect(by.get(surrogate.sha256)!.md5).toBe(by.get(builder.sha256)!.md5);
    const plain = await db.selectFrom('blobs').select('md5').where('sha256', 'like', 'ci-plain-%').execute();
    expect(plain.map((r) => r.md5)).toContain('ünï \u{1F600} "q" \\ \n');
    // A number that is not finite is refused as the builder refuses it (JSON would have made it null).
    const nan = row('nan', { byte_size: Number.NaN });
    expect(insert.compile(db, [nan]).sql).not.toContain('json_populate_recordset');
    await expect(insert(db, [nan])).rejects.toThrow();
    expect(await db.selectFrom('blobs').select('sha256').where('sha256', '=', nan.sha256).execute()).toEqual([]);
  });

  it('inserts a row that the cached text cannot take (a missing column, an expression) through the builder', async () => {
    const { db } = app().started.deps;
    const insert = compiledInsert('received_usage');
    const scope = (s: string) => `ci-${s}-${Math.random()}`;
    // Cache the four-column shape first; then a row without a column, and one with an expression.
    await insert(db, [{ scope_id: scope('a'), period: '2026-03', count: 1, bytes: 1 }]);
    const missing = { scope_id: scope('b'), period: '2026-03', count: 2 } as any;
    await expect(insert(db, [missing])).rejects.toThrow(); // bytes is required: the database says so, nothing inserted silently
    expect(await db.selectFrom('received_usage').select('count').where('scope_id', '=', missing.scope_id).execute()).toEqual([]);
    const expr = { scope_id: scope('c'), period: '2026-03', count: sql<number>`1 + 2`, bytes: 0 } as any;
    expect(await insert(db, [expr])).toBe(1n);
    const got = await db.selectFrom('received_usage').select('count').where('scope_id', '=', expr.scope_id).executeTakeFirstOrThrow();
    expect(Number(got.count)).toBe(3);
  });
});

