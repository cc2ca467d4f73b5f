import { createHash } from 'node:crypto';
import type pg from 'pg';

/**
 * Named prepared statements for the statements Cubby runs again and again on Postgres.
 *
 * Why: node-postgres sends every query unnamed, so Postgres parses and plans it each time. Under
 * a stream of mail the same few dozen texts run thousands of times (the RCPT lookup, the usage
 * read, the group commit's inserts), and for small statements parsing and planning cost Postgres
 * more than running them, on the same cores as Cubby. A text seen `after` times gets a name derived
 * from it; each pooled connection then prepares it once and afterwards only binds and executes it.
 *
 * Bounded: at most `maxStatements` names per process (texts past that stay unnamed; so do texts
 * longer than `maxTextChars`, such as multi-row inserts of many rows), and the count of texts not
 * yet hot is forgotten when it grows past `maxCounted`. A text whose prepared plan Postgres refuses
 * after a schema change by another node ("cached plan must not change result type") is never named
 * again in this process; the statement that met the error fails once, as any statement may.
 * Postgres's default plan_cache_mode (auto) keeps planning with the values (custom plans) where a
 * generic plan would cost more, e.g. a `like` prefix that needs the value to use an index.
 *
 * Off with CUBBY_DATABASE_PREPARED_STATEMENTS=false, e.g. behind a pooler in transaction mode that
 * does not keep a connection's prepared statements (PgBouncer before 1.21, or later ones with
 * max_prepared_statements = 0).
 */
/**
 * A statement whose text starts with this comment is never named: Postgres plans it with its values
 * each time. For lookups whose best plan changes as a table grows. A named statement's generic plan
 * is made once, in its first uses, and Postgres makes a new one only after the table's statistics
 * change: made while `emails` was small, a lookup by Message-ID stayed a sequential scan as the
 * mailbox grew (autovacuum off, or between its runs). An unnamed statement is planned with the
 * table's current size. Harmless on SQLite (a comment).
 */
export const PLAN_EACH_TIME = '/* plan each time */ ';

export interface PreparedStatementLimits {
  after: number;
  maxStatements: number;
  maxTextChars: number;
  maxCounted: number;
}

// Counted texts are kept whole (up to 16,000 characters each): 1,000 of them stay under 16 MB. The
// group commit's write of received mail on Postgres is one text of about 7,000 characters (its
// rows go as JSON: src/db/compiled-query.ts), and must stay under the bound to be prepared.
export const DEFAULT_PREPARED_LIMITS: Readonly<PreparedStatementLimits> = Object.freeze({ after: 5, maxStatements: 500, maxTextChars: 16_000, maxCounted: 1_000 });

export class HotStatements {
  private readonly counts = new Map<string, number>();
  private readonly names = new Map<string, string>();
  private readonly refused = new Set<string>();

  constructor(private readonly limits: PreparedStatementLimits = DEFAULT_PREPARED_LIMITS) {}

  /** The name to run `text` under, or undefined to run it unnamed. */
  nameFor(text: string): string | undefined {
    const name = this.names.get(text);
    if (name !== undefined) return name;
    if (text.length > this.limits.maxTextChars || this.names.size >= this.limits.maxStatements || this.refused.has(text) || text.startsWith(PLAN_EACH_TIME)) return undefined;
    const n = (this.counts.get(text) ?? 0) + 1;
    if (n < this.limits.after) {
      if (this.counts.size >= this.limits.maxCounted) this.counts.clear();
      this.counts.set(text, n);
      return undefined;
    }
    this.counts.delete(text);
    const named = `cubby_${createHash('sha256').update(text).digest('hex').slice(0, 32)}`;
    this.names.set(text, named);
    return named;
  }

  /** Never names `text` again (its prepared plan was refused). */
  refuse(text: string): void {
    this.names.delete(text);
    this.refused.add(text);
  }

  get size(): number {
    return this.names.size;
  }
}

/**
 * Postgres's answers that a connection's prepared statement cannot be used: its result columns
 * changed under it (0A000 from RevalidateCachedQuery; the routine is checked, not the message, which
 * is translated under another lc_messages), or it is missing on the server (26000: node-postgres
 * counts a name as prepared once it sent it, even when the first use failed before running).
 */
function isUnusablePrepared(err: unknown): boolean {
  const e = err as { code?: string; routine?: string; message?: string };
  if (e?.code === '26000') return true;
  return e?.code === '0A000' && (e.routine === 'RevalidateCachedQuery' || /cached plan must not change result type/i.test(String(e.message)));
}

/**
 * Makes each new pooled connection run hot texts as named statements. Kysely calls
 * `client.query(text, values)`; other shapes (cursors, config objects, callbacks) pass unchanged.
 */
export function usePreparedStatements(pool: pg.Pool, hot: HotStatements): void {
  pool.on('connect', (client) => {
    const query = client.query as (...a: unknown[]) => unknown;
    client.query = function (this: pg.PoolClient, ...args: unknown[]) {
      const [text, values] = args;
      // Only statements with parameters: node-postgres sends those through the extended protocol
      // anyway, while a text without any may hold several statements, which a prepared statement
      // cannot.
      if (args.length === 2 && typeof text === 'string' && Array.isArray(values) && values.length > 0) {
        const name = hot.nameFor(text);
        if (name !== undefined) {
          return (query.call(this, { name, text, values }) as Promise<unknown>).catch((err: unknown) => {
            if (isUnusablePrepared(err)) hot.refuse(text);
            throw err;
          });
        }
      }
      return query.apply(this, args);
    } as typeof client.query;
  });
}
