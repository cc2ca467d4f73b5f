import { Kysely, Migrator, PostgresDialect, SqliteDialect, sql, type Migration } from 'kysely';
import BetterSqlite3 from 'better-sqlite3';
import pg from 'pg';
import fs from 'node:fs';
import path from 'node:path';
import type { DB } from './schema.ts';
import { withStatementCache } from './sqlite-statements.ts';
import * as m0001 from './migrations/0001_identity.ts';
import * as m0002 from './migrations/0002_mailboxes.ts';
import * as m0003 from './migrations/0003_files.ts';
import * as m0004 from './migrations/0004_upload_sessions.ts';
import * as m0005 from './migrations/0005_jobs.ts';
import * as m0006 from './migrations/0006_emails.ts';
import * as m0007 from './migrations/0007_webhooks_live.ts';
import * as m0008 from './migrations/0008_sending.ts';
import * as m0009 from './migrations/0009_addresses_domains.ts';
import * as m0010 from './migrations/0010_publishing.ts';
import * as m0011 from './migrations/0011_agent_access.ts';
import * as m0014 from './migrations/0014_search.ts';

export type Dialect = 'sqlite' | 'postgres';
export interface Database {
  readonly db: Kysely<DB>;
  readonly dialect: Dialect;
  /** Postgres schema holding our tables (and the migration bookkeeping). */
  readonly schema?: string;
  close(): Promise<void>;
}

// Ordered; a new migration is appended, never edited once released.
const MIGRATIONS: Record<string, Migration> = {
  '0001_identity': m0001,
  '0002_mailboxes': m0002,
  '0003_files': m0003,
  '0004_upload_sessions': m0004,
  '0005_jobs': m0005,
  '0006_emails': m0006,
  '0007_webhooks_live': m0007,
  '0008_sending': m0008,
  '0009_addresses_domains': m0009,
  '0010_publishing': m0010,
  '0011_agent_access': m0011,
  '0014_search': m0014,
};

// Postgres int8 (counts, sums, byte sizes) as numbers: our values stay far below 2^53.
pg.types.setTypeParser(20, (v) => Number(v));

export async function openDatabase(url: string, schema?: string): Promise<Database> {
  if (/^postgres(ql)?:/.test(url)) return openPostgres(url, schema);
  return openSqlite(url.replace(/^(sqlite|file):(\/\/)?/, ''));
}

function openSqlite(file: string): Database {
  if (file !== ':memory:') fs.mkdirSync(path.dirname(path.resolve(file)), { recursive: true });
  const database = new BetterSqlite3(file);
  database.pragma('journal_mode = WAL');
  // FULL: a commit is on disk before we answer (SMTP 250, upload saved).
  database.pragma('synchronous = FULL');
  database.pragma('foreign_keys = ON');
  database.pragma('busy_timeout = 5000');
  const db = new Kysely<DB>({ dialect: new SqliteDialect({ database: withStatementCache(database) }) });
  return { db, dialect: 'sqlite', close: () => db.destroy() };
}

async function openPostgres(url: string, schema?: string): Promise<Database> {
  if (schema) {
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    try {
      await admin.query(`CREATE SCHEMA IF NOT EXISTS "${schema}"`);
    } finally {
      await admin.end();
    }
  }
  const pool = new pg.Pool({
    connectionString: url,
    max: 10,
    ...(schema ? { options: `-c search_path="${schema}"` } : {}),
  });
  const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool }) });
  return { db, dialect: 'postgres', schema: schema ?? 'public', close: () => db.destroy() };
}

export async function migrate(database: Database): Promise<void> {
  const migrator = new Migrator({
    db: database.db,
    provider: { getMigrations: async () => MIGRATIONS },
    // Named explicitly: without it Kysely looks for its bookkeeping tables in any schema and
    // can mistake another schema's for ours.
    ...(database.schema ? { migrationTableSchema: database.schema } : {}),
  });
  const { error, results } = await migrator.migrateToLatest();
  if (error) {
    const failed = results?.find((r) => r.status === 'Error');
    throw new Error(`migration ${failed?.migrationName ?? '?'} failed: ${String(error)}`);
  }
}

/** True when the error is a unique-constraint violation on either dialect. */
export function isUniqueViolation(err: unknown): boolean {
  const e = err as { code?: string; message?: string };
  return e?.code === '23505' || e?.code === 'SQLITE_CONSTRAINT_UNIQUE' || e?.code === 'SQLITE_CONSTRAINT_PRIMARYKEY';
}

export { sql };
