import { execFile } from 'node:child_process';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import BetterSqlite3 from 'better-sqlite3';
import pg from 'pg';
import type { Config } from '../config.ts';
import { createBlobStore, BlobNotFoundError, type BlobStore } from '../blobs/index.ts';
import { spoolToFile } from '../blobs/spool.ts';
import { inspectDatabase, isPostgresUrl, MIGRATION_TABLE, sqlitePath } from '../db/database.ts';
import { iso } from '../time.ts';
import { SERVER_VERSION } from '../version.ts';
import { BackupError, FORMAT, isMissingOrEmpty, MANIFEST_FILE, secretFingerprint, type Manifest } from './manifest.ts';

const run = promisify(execFile);

/** Blob copies in flight at once (each a read from the store and a synced write). */
const COPIES = 8;
/** Blob addresses read from the snapshot per query. */
const PAGE = 5000;

/** The condition for blobs whose bytes are in the store, not their row (a database from before migration 0029 has no such column). */
function inStore(migrations: string[]): string {
  return migrations.includes('0029_inline_blobs') ? 'AND inline_bytes IS NULL' : '';
}

/**
 * What a backup reads from the database snapshot it took. The snapshot is taken first and the blobs
 * copied after it: blobs are written before any row names them and never change, so every blob the
 * snapshot refers to is already in the store. (The blob collector could remove one that a file
 * version deleted after the snapshot still names; that blob is then reported and the backup fails.)
 */
interface Snapshot {
  migrations: string[];
  /**
   * The address of every blob in the store that a `blobs` row names, a page at a time. Blobs kept
   * in their row (src/blobs/inline-blobs.ts) are in the snapshot already.
   */
  blobPages(): AsyncIterable<string[]>;
  /** Whether a file version or a published site in the snapshot uses this blob. */
  isReferenced(sha256: string): Promise<boolean>;
  close(): Promise<void>;
}

export interface BackupResult {
  backup: string;
  dialect: 'sqlite' | 'postgres';
  blobs: number;
  bytes: number;
  migrations: number;
  created_at: string;
  secret: Manifest['secret']['source'];
  /** What the operator must keep beside the backup themselves. */
  note?: string;
}

/**
 * `cubby admin backup --out DIR`: a consistent snapshot of a running (or stopped) server. DIR must be
 * missing or empty; on any failure what was written to it is removed again.
 */
export async function backup(config: Config, outArg: string, now: Date): Promise<BackupResult> {
  const out = path.resolve(outArg);
  if (fs.existsSync(out) && !fs.statSync(out).isDirectory()) throw new BackupError('BACKUP_TARGET_NOT_EMPTY', `${out} exists and is not a directory`);
  if (!isMissingOrEmpty(out)) throw new BackupError('BACKUP_TARGET_NOT_EMPTY', `${out} is not empty: back up into a new or empty directory`);
  const state = await inspectDatabase(config.databaseUrl, config.databaseSchema);
  if (state.state !== 'ready') throw new BackupError('BACKUP_SOURCE_INVALID', `no Cubby database at ${state.where} (${state.state}); run the backup with the same CUBBY_* settings as the server`);

  const createdDir = !fs.existsSync(out);
  await fsp.mkdir(out, { recursive: true, mode: 0o700 });
  let snapshot: Snapshot | undefined;
  try {
    await fsp.mkdir(path.join(out, 'database'), { mode: 0o700 });
    const pgSchema = config.databaseSchema ?? 'public';
    const database: Manifest['database'] = isPostgresUrl(config.databaseUrl)
      ? { dialect: 'postgres', file: 'database/cubby.pgdump', schema: pgSchema }
      : { dialect: 'sqlite', file: 'database/cubby.db' };
    snapshot =
      database.dialect === 'postgres'
        ? await postgresSnapshot(config.databaseUrl, pgSchema, path.join(out, database.file))
        : await sqliteSnapshot(sqlitePath(config.databaseUrl), path.join(out, database.file));

    const blobs = await copyBlobs(await createBlobStore(config), snapshot, path.join(out, 'blobs'));
    const secret = await copySecret(config, out);
    const manifest: Manifest = {
      format: FORMAT,
      format_version: 1,
      created_at: iso(now),
      cubby_version: SERVER_VERSION,
      database,
      migrations: snapshot.migrations,
      blobs: { dir: 'blobs', ...blobs },
      secret,
    };
    await snapshot.close();
    snapshot = undefined;
    // Last, and atomically: from here on the directory is a backup.
    const tmp = path.join(out, `${MANIFEST_FILE}.tmp`);
    await fsp.writeFile(tmp, `${JSON.stringify(manifest, null, 2)}\n`, { mode: 0o600, flush: true });
    await fsp.rename(tmp, path.join(out, MANIFEST_FILE));
    await syncDir(out);
    return {
      backup: out,
      dialect: database.dialect,
      blobs: blobs.count,
      bytes: blobs.bytes,
      migrations: manifest.migrations.length,
      created_at: manifest.created_at,
      secret: secret.source,
      ...(secret.source === 'environment' ? { note: 'CUBBY_SECRET_KEY is not in the backup: keep it with the backup; the restore and the restored server need the same key' } : {}),
    };
  } catch (err) {
    await snapshot?.close().catch(() => {});
    if (createdDir) await fsp.rm(out, { recursive: true, force: true });
    else for (const entry of await fsp.readdir(out)) await fsp.rm(path.join(out, entry), { recursive: true, force: true });
    throw err;
  }
}

/** SQLite's online backup API: a consistent copy while the server keeps writing (WAL). */
async function sqliteSnapshot(file: string, target: string): Promise<Snapshot> {
  const source = new BetterSqlite3(file, { fileMustExist: true });
  try {
    source.pragma('busy_timeout = 5000');
    // All remaining pages in one step, so one read transaction: in WAL mode the server's writes go
    // on meanwhile, and the copy is never restarted by them (as a page-by-page copy would be).
    await source.backup(target, { progress: () => 0x7fffffff });
  } finally {
    source.close();
  }
  await fsp.chmod(target, 0o600);
  const copy = new BetterSqlite3(target, { fileMustExist: true });
  // One self-contained file (no -wal/-shm beside it); the restored server switches WAL back on.
  copy.pragma('journal_mode = DELETE');
  const migrations = (copy.prepare(`SELECT name FROM ${MIGRATION_TABLE} ORDER BY name`).all() as { name: string }[]).map((r) => r.name);
  const page = copy.prepare<[string], { sha256: string }>(`SELECT sha256 FROM blobs WHERE sha256 > ? ${inStore(migrations)} ORDER BY sha256 LIMIT ${PAGE}`);
  const used = copy.prepare('SELECT 1 FROM file_versions WHERE sha256 = ? UNION ALL SELECT 1 FROM site_bundle_blobs WHERE sha256 = ? UNION ALL SELECT 1 FROM accounts WHERE logo_sha256 = ? LIMIT 1');
  return {
    migrations,
    async *blobPages() {
      let after = '';
      for (;;) {
        const rows = page.all(after).map((r) => r.sha256);
        if (rows.length === 0) return;
        yield rows;
        after = rows[rows.length - 1]!;
      }
    },
    isReferenced: async (sha256) => used.get(sha256, sha256, sha256) !== undefined,
    close: async () => void copy.close(),
  };
}

/**
 * pg_dump of our schema, taken in a snapshot this connection exports and keeps open: the blob list
 * is read in the very same snapshot, so it matches the dump exactly.
 */
async function postgresSnapshot(url: string, schema: string, target: string): Promise<Snapshot> {
  const client = new pg.Client({ connectionString: url, options: `-c search_path="${schema}"` });
  await client.connect();
  try {
    await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
    const { rows } = await client.query<{ id: string }>('SELECT pg_export_snapshot() AS id');
    try {
      await run('pg_dump', [`--dbname=${url}`, `--schema=${schema}`, '--format=custom', '--no-owner', '--no-privileges', `--snapshot=${rows[0]!.id}`, `--file=${target}`], { maxBuffer: 16 * 1024 * 1024 });
    } catch (err) {
      const e = err as NodeJS.ErrnoException & { stderr?: string };
      if (e.code === 'ENOENT') throw new BackupError('BACKUP_TOOL_MISSING', 'pg_dump is not installed (or not on PATH): install the PostgreSQL client tools of your server\'s major version, or follow the manual procedure in docs/operations.md');
      throw new BackupError('BACKUP_FAILED', `pg_dump failed: ${(e.stderr ?? e.message).trim()}`);
    }
    await fsp.chmod(target, 0o600);
    const migrations = (await client.query<{ name: string }>(`SELECT name FROM ${MIGRATION_TABLE} ORDER BY name`)).rows.map((r) => r.name);
    return {
      migrations,
      async *blobPages() {
        let after = '';
        for (;;) {
          const page = (await client.query<{ sha256: string }>(`SELECT sha256 FROM blobs WHERE sha256 > $1 ${inStore(migrations)} ORDER BY sha256 LIMIT ${PAGE}`, [after])).rows.map((r) => r.sha256);
          if (page.length === 0) return;
          yield page;
          after = page[page.length - 1]!;
        }
      },
      isReferenced: async (sha256) =>
        ((await client.query('SELECT 1 FROM file_versions WHERE sha256 = $1 UNION ALL SELECT 1 FROM site_bundle_blobs WHERE sha256 = $1 UNION ALL SELECT 1 FROM accounts WHERE logo_sha256 = $1 LIMIT 1', [sha256])).rowCount ?? 0) > 0,
      close: async () => {
        await client.query('COMMIT').catch(() => {});
        await client.end();
      },
    };
  } catch (err) {
    await client.end().catch(() => {});
    throw err;
  }
}

/** Copies every blob the snapshot lists into `dir` (fs store layout), checking each one's SHA-256. */
async function copyBlobs(store: BlobStore, snapshot: Snapshot, dir: string): Promise<{ count: number; bytes: number }> {
  await fsp.mkdir(dir, { mode: 0o700 });
  const made = new Map<string, Promise<void>>();
  let count = 0;
  let bytes = 0;
  const copyOne = async (sha256: string) => {
    let body;
    try {
      body = await store.read(sha256);
    } catch (err) {
      if (!(err instanceof BlobNotFoundError)) throw err;
      // A row left for the collector (nothing uses it) may outlive its blob: nothing to keep.
      if (!(await snapshot.isReferenced(sha256))) return;
      throw new BackupError('BACKUP_FAILED', `blob ${sha256} is in use in the snapshot but missing from the blob store (removed while the backup ran?); run the backup again`);
    }
    const aa = path.join(dir, sha256.slice(0, 2));
    // The directory's creation is shared: copies run in parallel, and two blobs with the same
    // prefix must both wait for it (not only the first one asking).
    let ready = made.get(aa);
    if (!ready) {
      ready = fsp.mkdir(aa, { recursive: true, mode: 0o700 }).then(() => undefined);
      made.set(aa, ready);
    }
    await ready;
    try {
      const stored = await spoolToFile(body, { sha256Hex: sha256 }, path.join(aa, sha256), { fsync: true });
      count++;
      bytes += stored.byteSize;
    } finally {
      body.destroy();
    }
  };
  for await (const page of snapshot.blobPages()) {
    for (let i = 0; i < page.length; i += COPIES) await Promise.all(page.slice(i, i + COPIES).map(copyOne));
  }
  for (const aa of made.keys()) await syncDir(aa);
  await syncDir(dir);
  return { count, bytes };
}

/** The generated secret key goes with the data it sealed; a key from the environment stays with the operator. */
async function copySecret(config: Config, out: string): Promise<Manifest['secret']> {
  if (config.secretKey) return { source: 'environment', file: null, fingerprint: secretFingerprint(config.secretKey) };
  let text: string;
  try {
    text = await fsp.readFile(path.join(config.dataDir, 'secret.key'), 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { source: 'none', file: null, fingerprint: null };
    throw err;
  }
  await fsp.writeFile(path.join(out, 'secret.key'), text, { mode: 0o600, flag: 'wx', flush: true });
  return { source: 'file', file: 'secret.key', fingerprint: secretFingerprint(text.trim()) };
}

export async function syncDir(dir: string): Promise<void> {
  const fh = await fsp.open(dir, 'r');
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}
