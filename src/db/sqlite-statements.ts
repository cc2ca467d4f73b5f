import type BetterSqlite3 from 'better-sqlite3';
import type { SqliteDatabase, SqliteStatement } from 'kysely';

// Kysely's SQLite driver prepares every query anew; preparing costs about as much as running a
// small query. This keeps prepared statements by SQL text (the query builders produce a few
// hundred distinct texts), so each is compiled by SQLite once.

const MAX_STATEMENTS = 1000;

/** The database as Kysely's SqliteDialect wants it, with prepared statements reused. */
export function withStatementCache(database: BetterSqlite3.Database): SqliteDatabase {
  const cache = new Map<string, BetterSqlite3.Statement>();
  return {
    close: () => void database.close(),
    prepare(sql: string): SqliteStatement {
      const cached = cache.get(sql);
      // A statement still iterating (a streamed query) cannot run again until it finishes.
      if (cached && !cached.busy) return cached as unknown as SqliteStatement;
      const stmt = database.prepare(sql);
      if (!cached) {
        if (cache.size >= MAX_STATEMENTS) cache.delete(cache.keys().next().value!);
        cache.set(sql, stmt);
      }
      return stmt as unknown as SqliteStatement;
    },
  };
}
