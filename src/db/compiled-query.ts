import { CompiledQuery, PostgresAdapter, sql, type Compilable, type Kysely } from 'kysely';
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
 * value (a comparison, an inserted value, arithmetic), never as a list (compiledListQuery takes
 * one), an identifier or raw SQL:
 * one that does not come out as a bound parameter is an error on first use (one given as a list
 * compiles to `in ?`, which the database refuses on first use).
 */
export function compiledQuery<Args extends unknown[], Row>(build: (db: Kysely<DB>, ...args: { [K in keyof Args]: Args[K] }) => Compilable<Row>, arity: Args['length']) {
  const byDialect = new WeakMap<object, Marked>();
  const compile = (db: Kysely<DB>): Marked => {
    const key = db.getExecutor().adapter.constructor;
    let entry = byDialect.get(key);
    if (!entry) byDialect.set(key, (entry = compileMarked(arity, (marks) => build(db, ...(marks as Args)))));
    return entry;
  };
  return {
    /** The statement with these values, to run later (src/db/write-batch.ts). */
    compile(db: Kysely<DB>, ...args: Args): CompiledQuery<Row> {
      return bindMarked<Row>(compile(db), args);
    },
    /** All rows. */
    async execute(db: Kysely<DB>, ...args: Args): Promise<Row[]> {
      return (await db.executeQuery<Row>(this.compile(db, ...args))).rows;
    },
    /** The first row, if any. */
    async executeTakeFirst(db: Kysely<DB>, ...args: Args): Promise<Row | undefined> {
      return (await this.execute(db, ...args))[0];
    },
  };
}

/** List lengths kept per dialect: lists come from batches (mailboxes of a group commit, tasks), rarely past a few dozen. */
const MAX_LIST_SHAPES = 128;

/**
 * compiledQuery for a statement with one list of values (`where id in (…)`): built once per dialect
 * and list length, then run with new values. `build` receives the list as one placeholder per value
 * (use it where Kysely binds a list: `in`), then the other arguments as in compiledQuery. The list
 * must not be empty (`in ()` is not SQL): the caller answers an empty list itself.
 */
export function compiledListQuery<Args extends unknown[], Row>(build: (db: Kysely<DB>, list: string[], ...args: { [K in keyof Args]: Args[K] }) => Compilable<Row>, arity: Args['length']) {
  const byDialect = new WeakMap<object, Map<number, Marked>>();
  const compile = (db: Kysely<DB>, length: number): Marked => {
    if (length < 1) throw new Error('compiledListQuery: the list is empty');
    const key = db.getExecutor().adapter.constructor;
    let shapes = byDialect.get(key);
    if (!shapes) byDialect.set(key, (shapes = new Map()));
    let entry = shapes.get(length);
    if (!entry) {
      entry = compileMarked(length + arity, (marks) => build(db, marks.slice(0, length), ...(marks.slice(length) as Args)));
      if (shapes.size >= MAX_LIST_SHAPES) shapes.delete(shapes.keys().next().value!);
      shapes.set(length, entry);
    }
    return entry;
  };
  return {
    /** The statement with these values, to run later (src/db/write-batch.ts). */
    compile(db: Kysely<DB>, list: readonly unknown[], ...args: Args): CompiledQuery<Row> {
      return bindMarked<Row>(compile(db, list.length), [...list, ...args]);
    },
    /** All rows. */
    async execute(db: Kysely<DB>, list: readonly unknown[], ...args: Args): Promise<Row[]> {
      return (await db.executeQuery<Row>(this.compile(db, list, ...args))).rows;
    },
  };
}

/** A statement's SQL text and, per bound parameter, the argument it takes (its index) or a constant of the text. */
interface Marked {
  sql: string;
  slots: (number | { value: unknown })[];
}

/** Builds a statement with one unique mark per argument, and checks that each mark came out as a bound parameter. */
function compileMarked(count: number, build: (marks: string[]) => Compilable<unknown>): Marked {
  const marks = Array.from({ length: count }, (_, i) => `\u0000compiled-query-arg-${i}\u0000`);
  const compiled = build(marks).compile();
  const slots = compiled.parameters.map((p) => {
    const i = typeof p === 'string' ? marks.indexOf(p) : -1;
    return i >= 0 ? i : { value: p };
  });
  for (let i = 0; i < count; i++) if (!slots.includes(i)) throw new Error(`compiledQuery: argument ${i} is not a bound parameter in ${compiled.sql}`);
  if (marks.some((m) => compiled.sql.includes(m))) throw new Error(`compiledQuery: an argument was inlined into ${compiled.sql}`);
  return { sql: compiled.sql, slots };
}

function bindMarked<Row>(marked: Marked, values: readonly unknown[]): CompiledQuery<Row> {
  return CompiledQuery.raw(marked.sql, marked.slots.map((s) => (typeof s === 'number' ? values[s] : s.value))) as CompiledQuery<Row>;
}

type InsertTable = keyof DB & string;

/** Bound parameters per multi-row insert: under both databases' limits (SQLite 32,766, Postgres 65,535). */
const MAX_INSERT_PARAMETERS = 20_000;

/**
 * Multi-row inserts built once per dialect, column list and row count, then run with new values:
 * the group commit writes five to nine tables per transaction, and building each insert (parsing
 * every row's values, visiting the tree) cost more main-thread time than SQLite takes to insert
 * the rows. The SQL is what `db.insertInto(table).values(rows)` (with `modify`, e.g. an ON CONFLICT
 * clause) produces; every value must be a plain value (no expressions) and every row must have the
 * first row's columns. A row that does not is inserted by Kysely's own path, uncached.
 *
 * On Postgres the rows go as one JSON parameter instead (`insert … select … from
 * json_populate_recordset(null::table, $1::json)`, each value read with its column's type): the
 * text then depends on the columns only, not on the number of rows, so it is the same for every
 * group and src/db/pg-prepared.ts prepares it once. With a `values` list of as many rows as the
 * group had, Postgres parsed and planned every group's statement anew: about a third of its time
 * in the group commit's write. Rows holding a value that JSON would not carry exactly (bytes,
 * dates, big integers, numbers that are not finite, strings with lone surrogates) take the `values`
 * text. A string with a NUL character is refused either way (Postgres's text cannot hold one), with
 * SQLSTATE 22P05 here instead of 22021.
 */
export function compiledInsert<T extends InsertTable>(table: T, modify?: (qb: any) => Compilable<unknown>) {
  const byDialect = new WeakMap<object, Map<string, string>>();
  const textFor = (db: Kysely<DB>, shape: string, build: () => string): string => {
    const key = db.getExecutor().adapter.constructor;
    let texts = byDialect.get(key);
    if (!texts) byDialect.set(key, (texts = new Map()));
    let text = texts.get(shape);
    if (!text) {
      text = build();
      if (texts.size >= 256) texts.delete(texts.keys().next().value!);
      texts.set(shape, text);
    }
    return text;
  };
  /** The insert of these rows, to run now or later (src/db/write-batch.ts). */
  const compile = (db: Kysely<DB>, rows: readonly DB[T][]): CompiledQuery => {
    if (!rows.length) throw new Error(`compiledInsert: no rows to insert into ${table}`);
    const columns = Object.keys(rows[0]!);
    const parameters: unknown[] = [];
    let json = db.getExecutor().adapter instanceof PostgresAdapter;
    for (const row of rows) {
      const r = row as unknown as Record<string, unknown>;
      if (Object.keys(r).length !== columns.length) return uncached(db, table, rows, modify);
      for (const c of columns) {
        const v = r[c];
        if (v === undefined || (v !== null && typeof v === 'object' && !(v instanceof Date) && !Buffer.isBuffer(v))) return uncached(db, table, rows, modify);
        if (json && !carriedByJson(v)) json = false;
        parameters.push(v);
      }
    }
    if (json) {
      return CompiledQuery.raw(textFor(db, `json:${columns.join(',')}`, () => jsonInsertText(db, table, columns, modify)), [JSON.stringify(rows)]);
    }
    const text = textFor(db, `${rows.length}:${columns.join(',')}`, () => {
      // Built with marks for values: each must come out as the bound parameter at its position.
      const marks = rows.map((_, i) => Object.fromEntries(columns.map((c, j) => [c, `\u0000compiled-insert-${i}-${j}\u0000`])));
      let qb: any = db.insertInto(table).values(marks as any);
      if (modify) qb = modify(qb);
      const compiled = (qb as Compilable<unknown>).compile();
      const expected = marks.flatMap((m) => Object.values(m));
      if (compiled.parameters.length !== expected.length || compiled.parameters.some((p, i) => p !== expected[i])) throw new Error(`compiledInsert: values of ${table} are not bound in row order`);
      return compiled.sql;
    });
    return CompiledQuery.raw(text, parameters);
  };
  /** The inserts of any number of rows (none for none), in statements that stay under the databases' bound-parameter limits. */
  const compileChunks = (db: Kysely<DB>, rows: readonly DB[T][]): CompiledQuery[] => {
    if (!rows.length) return [];
    const perChunk = Math.max(1, Math.floor(MAX_INSERT_PARAMETERS / Object.keys(rows[0]!).length));
    const out: CompiledQuery[] = [];
    for (let i = 0; i < rows.length; i += perChunk) out.push(compile(db, rows.slice(i, i + perChunk)));
    return out;
  };
  /** Resolves to the rows inserted (or updated by an ON CONFLICT clause) as the database counts them; undefined if it did not say. */
  const insert = async (db: Kysely<DB>, rows: readonly DB[T][]): Promise<bigint | undefined> => {
    let total: bigint | undefined = 0n;
    for (const q of compileChunks(db, rows)) {
      const n = (await db.executeQuery(q)).numAffectedRows;
      total = total === undefined || n === undefined ? undefined : total + n;
    }
    return total;
  };
  return Object.assign(insert, { compile, compileChunks });
}

/** Whether JSON carries `v` to Postgres exactly as the parameter list would (see compiledInsert). */
function carriedByJson(v: unknown): boolean {
  switch (typeof v) {
    case 'string':
      // ES2024 (Node 20 has it; the project's TypeScript lib is ES2022). A lone surrogate: JSON
      // would send a `\ud800` escape that Postgres refuses, the parameter list U+FFFD.
      return (v as unknown as { isWellFormed(): boolean }).isWellFormed();
    case 'number':
      return Number.isFinite(v);
    case 'boolean':
      return true;
    default:
      return v === null;
  }
}

const JSON_ROWS_MARK = '\u0000compiled-insert-json\u0000';

/** `insert into table (columns) select columns from json_populate_recordset(null::table, $1::json)`, with `modify`'s clauses. */
function jsonInsertText(db: Kysely<DB>, table: InsertTable, columns: string[], modify?: (qb: any) => Compilable<unknown>): string {
  const refs = sql.join(columns.map((c) => sql.ref(c)));
  let qb: any = db
    .insertInto(table)
    .columns(columns as any)
    .expression(sql`select ${refs} from json_populate_recordset(null::${sql.table(table)}, ${JSON_ROWS_MARK}::json)`);
  if (modify) qb = modify(qb);
  const compiled = (qb as Compilable<unknown>).compile();
  if (compiled.parameters.length !== 1 || compiled.parameters[0] !== JSON_ROWS_MARK) throw new Error(`compiledInsert: the rows of ${table} are not the statement's one parameter`);
  return compiled.sql;
}

/** Kysely's own build of an insert whose rows hold expressions or differ in columns (not cached). */
function uncached(db: Kysely<DB>, table: InsertTable, rows: readonly unknown[], modify?: (qb: any) => Compilable<unknown>): CompiledQuery {
  let qb: any = db.insertInto(table).values(rows as any);
  if (modify) qb = modify(qb);
  return (qb as Compilable<unknown>).compile();
}
