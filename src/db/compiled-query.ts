import { CompiledQuery, type Compilable, type Kysely } from 'kysely';
import type { DB } from './schema.ts';

/**
 * A hot statement built and compiled by Kysely once per dialect, then run with new values: building
 * the operation tree (parsers, node visitors, `freeze`) and compiling it cost more main-thread time
 * than SQLite takes to run a lookup by key, on every RCPT and every received message. The same
 * builder code serves both databases: Kysely compiles it for the dialect of the first `db` it
 * meets (one cache entry per dialect), and the SQL text is the same one Kysely would produce each
 * time, so SQLite's prepared-statement cache still finds it.
 *
 * `build` receives one placeholder per argument and must use each only where Kysely binds a plain
 * value (a comparison, an inserted value, arithmetic), never as a list, an identifier or raw SQL:
 * one that does not come out as a bound parameter is an error on first use (one given as a list
 * compiles to `in ?`, which the database refuses on first use).
 */
export function compiledQuery<Args extends unknown[], Row>(build: (db: Kysely<DB>, ...args: { [K in keyof Args]: Args[K] }) => Compilable<Row>, arity: Args['length']) {
  const byDialect = new WeakMap<object, { sql: string; slots: (number | { value: unknown })[] }>();
  const compile = (db: Kysely<DB>) => {
    const key = db.getExecutor().adapter.constructor;
    let entry = byDialect.get(key);
    if (!entry) {
      const marks = Array.from({ length: arity }, (_, i) => `\u0000compiled-query-arg-${i}\u0000`);
      const compiled = build(db, ...(marks as Args)).compile();
      const slots = compiled.parameters.map((p) => {
        const i = typeof p === 'string' ? marks.indexOf(p) : -1;
        return i >= 0 ? i : { value: p };
      });
      for (let i = 0; i < arity; i++) if (!slots.includes(i)) throw new Error(`compiledQuery: argument ${i} is not a bound parameter in ${compiled.sql}`);
      if (marks.some((m) => compiled.sql.includes(m))) throw new Error(`compiledQuery: an argument was inlined into ${compiled.sql}`);
      byDialect.set(key, (entry = { sql: compiled.sql, slots }));
    }
    return entry;
  };
  return {
    /** All rows. */
    async execute(db: Kysely<DB>, ...args: Args): Promise<Row[]> {
      const { sql, slots } = compile(db);
      const parameters = slots.map((s) => (typeof s === 'number' ? args[s] : s.value));
      return (await db.executeQuery<Row>(CompiledQuery.raw(sql, parameters))).rows;
    },
    /** The first row, if any. */
    async executeTakeFirst(db: Kysely<DB>, ...args: Args): Promise<Row | undefined> {
      return (await this.execute(db, ...args))[0];
    },
  };
}
