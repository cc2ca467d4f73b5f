import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { sql, type Kysely } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate, openDatabase, type Database } from '../src/db/database.ts';
import type { DB } from '../src/db/schema.ts';
import { HotStatements, PLAN_EACH_TIME } from '../src/db/pg-prepared.ts';

// Frequent statements on Postgres run as named prepared statements (src/db/pg-prepared.ts).

describe('hot statement naming', () => {
  it('names a text once it has been seen `after` times, and keeps that name', () => {
    const hot = new HotStatements({ after: 3, maxStatements: 10, maxTextChars: 100, maxCounted: 100 });
    expect(hot.nameFor('select 1')).toBeUndefined();
    expect(hot.nameFor('select 1')).toBeUndefined();
    const name = hot.nameFor('select 1');
    expect(name).toMatch(/^cubby_[0-9a-f]{32}$/);
    expect(hot.nameFor('select 1')).toBe(name);
    // Another text gets another name; the same text in another process gets the same one.
    const other = new HotStatements({ after: 1, maxStatements: 10, maxTextChars: 100, maxCounted: 100 });
    expect(other.nameFor('select 1')).toBe(name);
    expect(other.nameFor('select 2')).not.toBe(name);
  });

  it('stays within its bounds: long texts and texts past the cap are never named', () => {
    const hot = new HotStatements({ after: 1, maxStatements: 2, maxTextChars: 20, maxCounted: 3 });
    expect(hot.nameFor(`select '${'x'.repeat(30)}'`)).toBeUndefined();
    expect(hot.nameFor('select 1')).toBeDefined();
    expect(hot.nameFor('select 2')).toBeDefined();
    expect(hot.nameFor('select 3')).toBeUndefined();
    expect(hot.size).toBe(2);
  });

  it('forgets counts past maxCounted instead of growing', () => {
    const hot = new HotStatements({ after: 2, maxStatements: 100, maxTextChars: 100, maxCounted: 2 });
    hot.nameFor('a');
    hot.nameFor('b');
    hot.nameFor('c'); // the counts were full: forgotten, `c` counted anew
    expect(hot.nameFor('a')).toBeUndefined(); // `a` starts again at one
    expect(hot.nameFor('c')).toBeDefined();
  });

  it('never names a text marked to be planned each time', () => {
    const hot = new HotStatements({ after: 1, maxStatements: 10, maxTextChars: 100, maxCounted: 100 });
    for (let i = 0; i < 5; i++) expect(hot.nameFor(`${PLAN_EACH_TIME}select * from t where a = $1`)).toBeUndefined();
    expect(hot.nameFor('select * from t where a = $1')).toBeDefined();
    expect(hot.size).toBe(1);
  });

  it('never names a refused text again', () => {
    const hot = new HotStatements({ after: 1, maxStatements: 10, maxTextChars: 100, maxCounted: 100 });
    expect(hot.nameFor('select * from t')).toBeDefined();
    hot.refuse('select * from t');
    expect(hot.nameFor('select * from t')).toBeUndefined();
    expect(hot.size).toBe(0);
  });
});

describe.skipIf(!process.env.CUBBY_TEST_POSTGRES_URL)('prepared statements on Postgres', () => {
  const url = process.env.CUBBY_TEST_POSTGRES_URL!;
  const schema = `t_prep_${randomBytes(4).toString('hex')}`;
  let database: Database;
  let plain: Database;

  /** Runs `work` on one pooled connection and says how many statements it has prepared. */
  async function onOneConnection(db: Kysely<DB>, work: (c: Kysely<DB>) => Promise<void>): Promise<number> {
    return db.connection().execute(async (c) => {
      await work(c);
      const r = await sql<{ n: number }>`select count(*)::int as n from pg_prepared_statements where name like 'cubby_%'`.execute(c);
      return r.rows[0]!.n;
    });
  }

  beforeAll(async () => {
    database = await openDatabase(url, schema);
    await migrate(database);
    plain = await openDatabase(url, schema, { preparedStatements: false });
    await sql`create table prep_probe (id int primary key, label text)`.execute(database.db);
    await sql`insert into prep_probe values (1, 'one'), (2, 'two')`.execute(database.db);
  });

  afterAll(async () => {
    await database?.close();
    await plain?.close();
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    await c.query(`drop schema if exists "${schema}" cascade`);
    await c.end();
  });

  it('prepares a statement run often, with the same answers as before', async () => {
    const answers: unknown[] = [];
    const prepared = await onOneConnection(database.db, async (c) => {
      for (let i = 0; i < 8; i++) {
        const r = await sql<{ id: number; label: string }>`select id, label from prep_probe where id = ${(i % 2) + 1}`.execute(c);
        answers.push(r.rows[0]);
      }
    });
    expect(prepared).toBeGreaterThanOrEqual(1);
    expect(answers).toEqual(Array.from({ length: 8 }, (_, i) => (i % 2 ? { id: 2, label: 'two' } : { id: 1, label: 'one' })));
  });

  it('leaves statements without parameters unprepared (such a text may hold several statements)', async () => {
    await database.db.connection().execute(async (c) => {
      const count = async () => (await sql<{ n: number }>`select count(*)::int as n from pg_prepared_statements where name like ${'cubby_%'}`.execute(c)).rows[0]!.n;
      const before = await count();
      for (let i = 0; i < 8; i++) await sql.raw('select 1; select 2').execute(c);
      expect(await count()).toBe(before);
    });
  });

  it('prepares nothing when turned off (CUBBY_DATABASE_PREPARED_STATEMENTS=false)', async () => {
    const prepared = await onOneConnection(plain.db, async (c) => {
      for (let i = 0; i < 8; i++) await sql`select label from prep_probe where id = ${1}`.execute(c);
    });
    expect(prepared).toBe(0);
  });

  it('after another node changes the columns, fails the stale statement once and then runs it unprepared', async () => {
    const results: (string | number)[] = [];
    await database.db.connection().execute(async (c) => {
      const run = async () => {
        try {
          const r = await sql<Record<string, unknown>>`select * from prep_probe where id = ${1}`.execute(c);
          results.push(Object.keys(r.rows[0]!).length);
        } catch (err) {
          results.push(String((err as { code?: string }).code));
        }
      };
      for (let i = 0; i < 6; i++) await run(); // prepared by now
      await sql`alter table prep_probe add column extra text`.execute(plain.db);
      await run();
      await run();
      await run();
    });
    expect(results.slice(0, 6)).toEqual([2, 2, 2, 2, 2, 2]);
    expect(results.slice(6)).toEqual(['0A000', 3, 3]);
  });
});
