import { Kysely, Migrator, PostgresDialect, sql, type Migration } from 'kysely';
import BetterSqlite3 from 'better-sqlite3';
import pg from 'pg';
import fs from 'node:fs';
import path from 'node:path';
import type { DB } from './schema.ts';
import { withStatementCache } from './sqlite-statements.ts';
import { ImmediateSqliteDialect } from './sqlite-dialect.ts';
import type { WriteGate } from './write-gate.ts';
import { HotStatements, usePreparedStatements } from './pg-prepared.ts';
import { createRequire } from 'node:module';
import { startCheckpointer, type CheckpointerOptions } from './checkpointer.ts';
import type { Logger } from '../logger.ts';
import { checkpointErrorLog } from './checkpoint-log.ts';
import { postgresCommits, sqliteCommits, type DurableCommits, type DurableOptions } from './durable-commit.ts';
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
import * as m0013 from './migrations/0013_accounts_security.ts';
import * as m0014 from './migrations/0014_search.ts';
import * as m0019 from './migrations/0019_site_slug_redirects.ts';
import * as m0020 from './migrations/0020_git_sync.ts';
import * as m0021 from './migrations/0021_site_analytics.ts';
import * as m0022 from './migrations/0022_site_domains.ts';
import * as m0023 from './migrations/0023_account_logos.ts';
import * as m0025 from './migrations/0025_file_search_docs.ts';
import * as m0026 from './migrations/0026_file_search_docs_postgres.ts';
import * as m0027 from './migrations/0027_file_search_docs_upsert.ts';
import * as m0028 from './migrations/0028_search_tsvector_from_words.ts';
import * as m0029 from './migrations/0029_inline_blobs.ts';
import * as m0030 from './migrations/0030_file_search_docs_once.ts';
import * as m0031 from './migrations/0031_toast_target.ts';

export type Dialect = 'sqlite' | 'postgres';
export interface Database {
  readonly db: Kysely<DB>;
  readonly dialect: Dialect;
  /** Postgres schema holding our tables (and the migration bookkeeping). */
  readonly schema?: string;
  /** Postgres pool connections (metrics); absent on SQLite, which has one connection. */
  poolStats?(): { total: number; idle: number; waiting: number };
  /** Transactions whose commit and durability are awaited apart (src/db/durable-commit.ts). */
  readonly commits: DurableCommits;
  /** SQLite: closed while the checkpoint thread starts the WAL over (src/db/write-gate.ts). */
  readonly writeGate?: WriteGate;
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
  '0013_accounts_security': m0013,
  '0014_search': m0014,
  '0019_site_slug_redirects': m0019,
  '0020_git_sync': m0020,
  '0021_site_analytics': m0021,
  '0022_site_domains': m0022,
  '0023_account_logos': m0023,
  '0025_file_search_docs': m0025,
  '0026_file_search_docs_postgres': m0026,
  '0027_file_search_docs_upsert': m0027,
  '0028_search_tsvector_from_words': m0028,
  '0029_inline_blobs': m0029,
  '0030_file_search_docs_once': m0030,
  '0031_toast_target': m0031,
};

// Postgres int8 (counts, sums, byte sizes) as numbers: our values stay far below 2^53.
pg.types.setTypeParser(20, (v) => Number(v));

export interface OpenOptions extends DurableOptions {
  /** Postgres: frequent statements as named prepared statements (src/db/pg-prepared.ts); default on. */
  preparedStatements?: boolean;
  /** SQLite: where the checkpoint thread's failures are reported (a full disk, say: the WAL then grows). */
  log?: Pick<Logger, 'error'>;
  /** Tests (SQLite): a checkpoint thread that runs more often and starts the WAL over sooner. */
  checkpoints?: Pick<CheckpointerOptions, 'intervalMs' | 'restartAboveBytes' | 'restartWaitMs' | 'onRestart'>;
}

export async function openDatabase(url: string, schema?: string, opts: OpenOptions = {}): Promise<Database> {
  if (isPostgresUrl(url)) return openPostgres(url, schema, opts);
  return openSqlite(sqlitePath(url), opts);
}

/** The database the configuration names, with its settings (the server and every CLI command). */
export function openConfiguredDatabase(cfg: { databaseUrl: string; databaseSchema?: string; databasePreparedStatements: boolean }, opts: Omit<OpenOptions, 'preparedStatements'> = {}): Promise<Database> {
  return openDatabase(cfg.databaseUrl, cfg.databaseSchema, { ...opts, preparedStatements: cfg.databasePreparedStatements });
}

export function isPostgresUrl(url: string): boolean {
  return /^postgres(ql)?:/.test(url);
}

/** The file a sqlite: URL (or bare path) names. */
export function sqlitePath(url: string): string {
  return url.replace(/^(sqlite|file):(\/\/)?/, '');
}

/** Kysely's bookkeeping table: present once any migration has run. */
export const MIGRATION_TABLE = 'kysely_migration';

export interface DatabaseState {
  /** missing: no file / no schema; empty: there, but Cubby never ran on it; ready: migrated at least once. */
  state: 'missing' | 'empty' | 'ready';
  /** Where we looked, for messages (a file path, or `postgres schema "x"`; never the URL: it may hold a password). */
  where: string;
}

/**
 * Looks at a database without creating or changing anything, so operator commands can refuse to
 * run against the wrong place instead of initialising a new, empty database there.
 */
export async function inspectDatabase(url: string, schema?: string): Promise<DatabaseState> {
  if (!isPostgresUrl(url)) {
    const file = path.resolve(sqlitePath(url));
    if (!fs.existsSync(file)) return { state: 'missing', where: file };
    const probe = new BetterSqlite3(file, { readonly: true, fileMustExist: true });
    try {
      const row = probe.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?").get(MIGRATION_TABLE);
      return { state: row ? 'ready' : 'empty', where: file };
    } finally {
      probe.close();
    }
  }
  const name = schema ?? 'public';
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const where = `postgres schema "${name}"`;
    const s = await client.query('SELECT 1 FROM information_schema.schemata WHERE schema_name = $1', [name]);
    if (s.rowCount === 0) return { state: 'missing', where };
    const t = await client.query('SELECT 1 FROM information_schema.tables WHERE table_schema = $1 AND table_name = $2', [name, MIGRATION_TABLE]);
    return { state: t.rowCount === 0 ? 'empty' : 'ready', where };
  } finally {
    await client.end();
  }
}

function openSqlite(file: string, opts: OpenOptions): Database {
  if (file !== ':memory:') makePrivate(file);
  const database = new BetterSqlite3(file);
  database.pragma('journal_mode = WAL');
  // FULL: a commit is on disk before we answer (SMTP 250, upload saved).
  database.pragma('synchronous = FULL');
  database.pragma('foreign_keys = ON');
  database.pragma('busy_timeout = 5000');
  // Temporary tables and indexes (ORDER BY sorters, the rowid lists of an UPDATE … WHERE id IN
  // (SELECT …)) in memory: with the default, each statement that needs one sets up and tears down a
  // temporary database, ~0.9 ms for an UPDATE that changes nothing (the job claim, many times a
  // second). Ours are small: bounded by LIMITs and batch sizes.
  database.pragma('temp_store = MEMORY');
  // SQLite's own default page cache, 2 MiB (better-sqlite3 builds SQLite with 16 MiB): pages are
  // read through the memory map below, and a group commit dirties a few hundred KiB. The larger
  // cache held 14 MiB more of the server's memory, filled with pages already written to the WAL.
  database.pragma('cache_size = -2000');
  // Reads through a memory map of the database file (up to SQLite's 2 GiB cap) instead of a read()
  // system call and a copy per page missing from the 2 MiB page cache. Pages come from the OS page
  // cache either way (shared, reclaimable); writes still go through the WAL. Random look-ups over a
  // large database (a search checking 20,000 full-text matches against the docs table) cost about
  // half the CPU (docs/search.md).
  if (file !== ':memory:') database.pragma('mmap_size = 2147483648');
  // Checkpoints run on a thread of their own (src/db/checkpointer.ts), not inside our commits.
  const checkpointer = file === ':memory:' ? null : startCheckpointer(path.resolve(file), {
    onError: checkpointErrorLog(opts.log),
    ...opts.checkpoints,
    driver: createRequire(import.meta.url).resolve('better-sqlite3'),
    onLost: () => {
      opts.log?.error({}, 'the SQLite checkpoint thread stopped; checkpoints run inside commits again');
      if (database.open) database.pragma('wal_autocheckpoint = 1000');
    },
  });
  if (checkpointer) database.pragma('wal_autocheckpoint = 0');
  const writeGate = checkpointer?.gate;
  const db = new Kysely<DB>({ dialect: new ImmediateSqliteDialect({ database: withStatementCache(database), writeGate }) });
  const commits = sqliteCommits(db, file, opts);
  return {
    db,
    dialect: 'sqlite',
    commits,
    writeGate,
    close: async () => {
      await commits.close();
      await checkpointer?.close();
      await db.destroy();
    },
  };
}

/**
 * The database file is the service's alone: created 0600 (in a 0700 directory when we make it)
 * before SQLite opens it, and tightened if an earlier version left it readable to others. SQLite
 * gives the -wal and -shm files the database file's mode; existing ones are tightened too.
 */
function makePrivate(file: string): void {
  fs.mkdirSync(path.dirname(path.resolve(file)), { recursive: true, mode: 0o700 });
  fs.closeSync(fs.openSync(file, fs.constants.O_RDWR | fs.constants.O_CREAT, 0o600));
  for (const f of [file, `${file}-wal`, `${file}-shm`, `${file}-journal`]) {
    try {
      if ((fs.statSync(f).mode & 0o077) !== 0) fs.chmodSync(f, 0o600);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
  }
}

/**
 * Each connection compresses the long values it writes with lz4 where the server has it (built
 * --with-lz4, as the common packages are), instead of the default pglz: several times cheaper per
 * value. Received mail compresses each email's text in its commit, where pglz was about 7 % of
 * the database's CPU under SMTP load. A session setting, not a column's: a dump (`cubby admin
 * backup`) restores on a server without lz4, which decompresses and compresses again with its own
 * default. Sent before the connection's first query, which node-postgres queues behind it; if it
 * fails the connection keeps the server's default, and a broken connection fails its next query.
 */
const LZ4_WHERE_AVAILABLE = `select set_config('default_toast_compression', 'lz4', false)
  from pg_settings where name = 'default_toast_compression' and 'lz4' = any(enumvals)`;

async function openPostgres(url: string, schema: string | undefined, opts: OpenOptions): Promise<Database> {
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
  pool.on('connect', (client) => void client.query(LZ4_WHERE_AVAILABLE).catch(() => undefined));
  if (opts.preparedStatements !== false) usePreparedStatements(pool, new HotStatements());
  const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool }) });
  return {
    db,
    dialect: 'postgres',
    schema: schema ?? 'public',
    poolStats: () => ({ total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount }),
    commits: postgresCommits(db, opts),
    close: () => db.destroy(),
  };
}

function migratorFor(db: Kysely<DB>, schema: string | undefined): Migrator {
  return new Migrator({
    db,
    provider: { getMigrations: async () => MIGRATIONS },
    // Named explicitly: without it Kysely looks for its bookkeeping tables in any schema and
    // can mistake another schema's for ours.
    ...(schema ? { migrationTableSchema: schema } : {}),
  });
}

/** Names of the migrations this code has that the database has not run (readiness checks). */
export async function pendingMigrations(db: Kysely<DB>, dialect: Dialect, schema: string | undefined): Promise<string[]> {
  const own = dialect === 'postgres' ? (schema ?? 'public') : undefined;
  for (let attempt = 1; ; attempt++) {
    try {
      const all = await migratorFor(db, own).getMigrations();
      return all.filter((m) => !m.executedAt).map((m) => m.name);
    } catch (err) {
      if (attempt >= LISTING_ATTEMPTS || !listingRaced(err, own)) throw err;
    }
  }
}

const LISTING_ATTEMPTS = 10;

/** SQLSTATEs of a catalog object that is gone: schema, table, column. */
const VANISHED = new Set(['3F000', '42P01', '42703']);

/**
 * Kysely looks for its bookkeeping tables by listing every column of every table in every schema
 * of the database, with functions (`pg_get_serial_sequence`) that look each table up again and fail
 * when another schema, table or column is dropped while the listing runs — parallel test suites or
 * other tenants of the database. Such an error, raised outside our own migrations (which create,
 * never drop, what they list), means only that the listing should be made again. Our own schema
 * vanishing is a real error.
 */
function listingRaced(err: unknown, own: string | undefined): boolean {
  const schema = /schema "([^"]+)" does not exist/.exec(String((err as Error)?.message ?? err));
  if (schema) return schema[1] !== own;
  const code = (err as { code?: unknown })?.code;
  return typeof code === 'string' && VANISHED.has(code);
}

export async function migrate(database: Database): Promise<void> {
  const migrator = migratorFor(database.db, database.schema);
  for (let attempt = 1; ; attempt++) {
    const { error, results } = await migrator.migrateToLatest();
    if (!error) return;
    const failed = results?.find((r) => r.status === 'Error');
    if (!failed && attempt < LISTING_ATTEMPTS && listingRaced(error, database.schema)) continue;
    throw new Error(`migration ${failed?.migrationName ?? '?'} failed: ${String(error)}`);
  }
}

/** True when the error is a unique-constraint violation on either dialect. */
export function isUniqueViolation(err: unknown): boolean {
  const e = err as { code?: string; message?: string };
  return e?.code === '23505' || e?.code === 'SQLITE_CONSTRAINT_UNIQUE' || e?.code === 'SQLITE_CONSTRAINT_PRIMARYKEY';
}

export { sql };
