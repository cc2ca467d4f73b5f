import { CompiledQuery, type Kysely } from 'kysely';
import type { Dialect } from './database.ts';
import type { DB } from './schema.ts';

/**
 * Writes of one transaction that need none of one another's results, sent together.
 *
 * On Postgres each statement is a round trip, and a group commit holds its locks across all of
 * them: a dozen inserts meant a dozen waits for the network and for the event loop to read each
 * answer, while the next group queued behind the locks. Here they go as one statement of
 * data-modifying CTEs (`with w0 as (insert …), w1 as (update …) select …`). Postgres runs every
 * one of them in the same snapshot, so none may read what another writes, and no two may change
 * the same row (one change would be lost); row triggers and
 * foreign keys are checked when the statement ends, as they would be at the end of the last of the
 * separate statements. On SQLite a statement is a function call, not a round trip: they run one
 * after another, in the order added.
 *
 * At most one statement may return rows (its `returning` clause); `run` resolves to them. A
 * `call` is a SELECT run for what it does, not for its rows (`select pg_notify(…)`): Postgres runs a
 * plain SELECT part only when the statement reads it, so the final select reads each call once,
 * in a condition that holds whatever the call returns and is checked before any row is read.
 *
 * Postgres does not promise the order in which the parts of one statement run (in practice the one
 * the final select reads runs first), and a batch past the parameter limit becomes several
 * statements: rows that other transactions may lock too must not depend on the order here.
 */
export class WriteBatch {
  private readonly queries: Part[] = [];

  constructor(private readonly dialect: Dialect) {}

  add(query: CompiledQuery | null | undefined, opts: { returning?: boolean; call?: boolean } = {}): this {
    if (!query) return this;
    if (opts.returning && opts.call) throw new Error('WriteBatch: a call returns no rows');
    if (opts.returning && this.queries.some((q) => q.returning)) throw new Error('WriteBatch: only one statement may return rows');
    this.queries.push({ query, returning: opts.returning === true, call: opts.call === true });
    return this;
  }

  /** Runs the writes; resolves to the rows of the statement added with `returning`, if any. */
  async run<Row = Record<string, unknown>>(db: Kysely<DB>): Promise<Row[]> {
    let returned: Row[] = [];
    if (this.dialect !== 'postgres') {
      for (const q of this.queries) {
        const { rows } = await db.executeQuery<Row>(q.query);
        if (q.returning) returned = rows;
      }
      return returned;
    }
    for (const chunk of chunks(this.queries)) {
      const { rows } = await db.executeQuery<Row>(combined(chunk));
      if (chunk.some((q) => q.returning)) returned = rows;
    }
    return returned;
  }
}

/** Postgres takes at most 65,535 bound parameters per statement; stay well under. */
const MAX_PARAMETERS = 30_000;

function chunks<T extends { query: CompiledQuery }>(queries: T[]): T[][] {
  const out: T[][] = [];
  let current: T[] = [];
  let count = 0;
  for (const q of queries) {
    const n = q.query.parameters.length;
    if (current.length && count + n > MAX_PARAMETERS) {
      out.push(current);
      current = [];
      count = 0;
    }
    current.push(q);
    count += n;
  }
  if (current.length) out.push(current);
  return out;
}

interface Part {
  query: CompiledQuery;
  returning: boolean;
  call: boolean;
}

function combined(queries: Part[]): CompiledQuery {
  if (queries.length === 1 && !queries[0]!.returning) return queries[0]!.query;
  const parameters: unknown[] = [];
  const parts = queries.map((q, i) => {
    const sql = renumbered(q.query.sql, parameters.length);
    parameters.push(...q.query.parameters);
    return `w${i} as (${sql})`;
  });
  const returning = queries.findIndex((q) => q.returning);
  // Conditions without columns are checked once, before the first row (a one-time filter), so
  // each call runs even when the returning part has no rows.
  const calls = queries.flatMap((q, i) => (q.call ? [`(select count(*) from w${i}) >= 0`] : []));
  const where = calls.length ? ` where ${calls.join(' and ')}` : '';
  return CompiledQuery.raw(`with ${parts.join(', ')} select ${returning >= 0 ? `* from w${returning}` : '1'}${where}`, parameters);
}

/**
 * `$n` placeholders moved up by `offset`, outside quoted identifiers and string literals (the
 * statements are our own, built by Kysely or our `sql` templates; a dollar-quoted string would be
 * a mistake here and is refused).
 */
export function renumbered(sql: string, offset: number): string {
  if (sql.includes('$$')) throw new Error('WriteBatch: dollar-quoted strings are not supported');
  if (offset === 0) return sql;
  return sql.replace(/("(?:[^"]|"")*")|('(?:[^']|'')*')|\$(\d+)/g, (whole, ident: string | undefined, literal: string | undefined, n: string | undefined) =>
    ident !== undefined || literal !== undefined ? whole : `$${Number(n) + offset}`,
  );
}
