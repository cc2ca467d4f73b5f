import { sql } from 'kysely';
import { expect, it } from 'vitest';
import { compiledQuery } from '../src/db/compiled-query.ts';
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
});
