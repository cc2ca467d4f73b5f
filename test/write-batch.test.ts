import { sql, type Kysely } from 'kysely';
import { describe, expect, it } from 'vitest';
import type { DB } from '../src/db/schema.ts';
import { compiledInsert } from '../src/db/compiled-query.ts';
import { renumbered, WriteBatch } from '../src/db/write-batch.ts';
import { describeEachDatabase } from './harness.ts';

// Writes of one transaction sent together: one statement of data-modifying CTEs on Postgres, one
// after another on SQLite (src/db/write-batch.ts). On received_usage: nothing of the app deletes
// its rows.

const insertUsage = compiledInsert('received_usage');
const upsertUsage = compiledInsert('received_usage', (qb) =>
  qb.onConflict((oc: any) => oc.columns(['scope_id', 'period']).doUpdateSet((eb: any) => ({ count: eb('received_usage.count', '+', eb.ref('excluded.count')) }))).returning(['scope_id', 'count']),
);
const scope = (name: string) => `wb-${name}-${Math.random().toString(36).slice(2)}`;

describeEachDatabase('write batches', (app) => {
  it('runs inserts, an update and an upsert together, and answers the upsert’s rows', async () => {
    const { db, dialect } = app().started.deps;
    const [a, b, c, d] = [scope('a'), scope('b'), scope('c'), scope('d')];
    await insertUsage(db, [{ scope_id: c, period: '2026-03', count: 5, bytes: 0 }, { scope_id: d, period: '2026-03', count: 7, bytes: 0 }]);
    const rows = await db.transaction().execute((trx) =>
      new WriteBatch(dialect)
        .add(insertUsage.compile(trx, [{ scope_id: a, period: '2026-03', count: 1, bytes: 10 }]))
        .add(insertUsage.compile(trx, [{ scope_id: b, period: '2026-03', count: 2, bytes: 20 }, { scope_id: b, period: '2026-04', count: 3, bytes: 30 }]))
        .add(db.updateTable('received_usage').set({ bytes: 99 }).where('scope_id', '=', d).compile())
        .add(upsertUsage.compile(trx, [{ scope_id: c, period: '2026-03', count: 1, bytes: 0 }]), { returning: true })
        .add(null)
        .run<{ scope_id: string; count: number | string }>(trx),
    );
    expect(rows.map((r) => ({ scope_id: r.scope_id, count: Number(r.count) }))).toEqual([{ scope_id: c, count: 6 }]);
    const stored = await db.selectFrom('received_usage').select(['scope_id', 'period', 'count', 'bytes']).where('scope_id', 'in', [a, b, c, d]).orderBy('scope_id').orderBy('period').execute();
    expect(stored.map((r) => [r.scope_id, r.period, Number(r.count), Number(r.bytes)])).toEqual([
      [a, '2026-03', 1, 10],
      [b, '2026-03', 2, 20],
      [b, '2026-04', 3, 30],
      [c, '2026-03', 6, 0],
      [d, '2026-03', 7, 99],
    ]);
  });

  it('runs each call (a SELECT for its effect) once, also when the returning statement has no rows or there is none', async () => {
    const { db, dialect } = app().started.deps;
    // set_config(…, true) lasts until the transaction ends; SQLite has no such function, and a call
    // there is an ordinary statement run in order, so a plain SELECT stands in.
    const call = (name: string) => (dialect === 'postgres' ? sql`select set_config(${`cubby.wb_${name}`}, 'ran', true)` : sql`select ${name} as ran`).compile(db);
    const setting = async (trx: Kysely<DB>, name: string) =>
      dialect === 'postgres' ? (await sql<{ v: string | null }>`select current_setting(${`cubby.wb_${name}`}, true) as v`.execute(trx)).rows[0]!.v : 'ran';
    const [a, none] = [scope('a'), scope('none')];
    const seen = await db.transaction().execute(async (trx) => {
      const rows = await new WriteBatch(dialect)
        .add(insertUsage.compile(trx, [{ scope_id: a, period: '2026-03', count: 1, bytes: 1 }]))
        .add(call('one'), { call: true })
        .add(db.updateTable('received_usage').set({ bytes: 2 }).where('scope_id', '=', none).returning(['scope_id']).compile(), { returning: true })
        .add(call('two'), { call: true })
        .run(trx);
      const alone = await new WriteBatch(dialect).add(call('three'), { call: true }).add(insertUsage.compile(trx, [{ scope_id: none, period: '2026-03', count: 1, bytes: 1 }])).run(trx);
      return { rows, alone, one: await setting(trx, 'one'), two: await setting(trx, 'two'), three: await setting(trx, 'three') };
    });
    expect(seen).toEqual({ rows: [], alone: [], one: 'ran', two: 'ran', three: 'ran' });
    expect((await db.selectFrom('received_usage').select('scope_id').where('scope_id', 'in', [a, none]).orderBy('scope_id').execute()).length).toBe(2);
    expect(() => new WriteBatch(dialect).add(call('x'), { call: true, returning: true })).toThrow(/call returns no rows/);
  });

  it('writes nothing of the batch when one of its statements fails in the transaction', async () => {
    const { db, dialect } = app().started.deps;
    const [a, taken] = [scope('a'), scope('taken')];
    await insertUsage(db, [{ scope_id: taken, period: '2026-03', count: 1, bytes: 1 }]);
    await expect(
      db.transaction().execute((trx) =>
        new WriteBatch(dialect)
          .add(insertUsage.compile(trx, [{ scope_id: a, period: '2026-03', count: 1, bytes: 1 }]))
          .add(insertUsage.compile(trx, [{ scope_id: taken, period: '2026-03', count: 1, bytes: 1 }]))
          .run(trx),
      ),
    ).rejects.toThrow(/unique|duplicate/i);
    expect(await db.selectFrom('received_usage').select('scope_id').where('scope_id', '=', a).execute()).toEqual([]);
  });

  it('keeps each statement’s values apart past the parameter limit of one statement, and still answers the returning rows', async () => {
    const { db, dialect } = app().started.deps;
    const prefix = scope('many');
    // 4 × 4,500 rows × 4 values = 72,000 parameters: more than one Postgres statement can bind
    // (65,535), so this passes only if the batch is split.
    const chunk = (k: number) => Array.from({ length: 4500 }, (_, i) => ({ scope_id: `${prefix}-${k}-${i}`, period: '2026-03', count: k, bytes: i }));
    const batch = new WriteBatch(dialect);
    for (let k = 1; k <= 3; k++) batch.add(insertUsage.compile(db, chunk(k)));
    batch.add(upsertUsage.compile(db, chunk(4)), { returning: true });
    const returned = await db.transaction().execute((trx) => batch.run<{ scope_id: string; count: number | string }>(trx));
    expect(returned).toHaveLength(4500);
    expect(returned.every((r) => Number(r.count) === 4)).toBe(true);
    const sums = await db
      .selectFrom('received_usage')
      .select((eb) => [eb.fn.countAll<number>().as('n'), eb.fn.sum<number>('count').as('counts'), eb.fn.sum<number>('bytes').as('bytes')])
      .where('scope_id', 'like', `${prefix}-%`)
      .executeTakeFirstOrThrow();
    expect([Number(sums.n), Number(sums.counts), Number(sums.bytes)]).toEqual([18000, 4500 * (1 + 2 + 3 + 4), (4 * (4499 * 4500)) / 2]);
  });

  it('refuses a second statement that returns rows', () => {
    const { db, dialect } = app().started.deps;
    const batch = new WriteBatch(dialect).add(upsertUsage.compile(db, [{ scope_id: 'x', period: '2026-03', count: 1, bytes: 0 }]), { returning: true });
    expect(() => batch.add(upsertUsage.compile(db, [{ scope_id: 'y', period: '2026-03', count: 1, bytes: 0 }]), { returning: true })).toThrow(/only one statement may return rows/);
  });
});

describe('renumbered placeholders', () => {
  it('moves $n up, but not inside quoted identifiers or string literals', () => {
    expect(renumbered(`select $1, "a$1""$2", 'it''s $3', $10 from t where x = $2`, 5)).toBe(`select $6, "a$1""$2", 'it''s $3', $15 from t where x = $7`);
    expect(renumbered('select $1', 0)).toBe('select $1');
  });

  it('refuses dollar-quoted strings', () => {
    expect(() => renumbered('select $$ $1 $$', 1)).toThrow(/dollar-quoted/);
  });

  it('leaves casts and literals of a search-style insert intact', () => {
    expect(renumbered(`insert into t (a, b) values ($1, setweight(to_tsvector($2::regconfig, $3), 'A'))`, 3)).toBe(`insert into t (a, b) values ($4, setweight(to_tsvector($5::regconfig, $6), 'A'))`);
  });
});
