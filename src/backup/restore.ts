import { execFile } from 'node:child_process';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import type { Config } from '../config.ts';
import { createBlobStore, isSha256 } from '../blobs/index.ts';
import { inspectDatabase, isPostgresUrl, sqlitePath } from '../db/database.ts';
import { syncDir } from './backup.ts';
import { BackupError, isMissingOrEmpty, readManifest, secretFingerprint, type Manifest } from './manifest.ts';

const run = promisify(execFile);
const PUTS = 8;

export interface RestoreResult {
  restored_from: string;
  dialect: 'sqlite' | 'postgres';
  data_dir: string;
  blobs: number;
  bytes: number;
  backup_created_at: string;
}

/**
 * `cubby admin restore --from DIR` into the configured data dir and database, which must be empty.
 * Everything is checked before anything is written; a failure part-way removes what was written.
 * The database comes last, so a target without one was never half restored into.
 */
export async function restore(config: Config, fromArg: string): Promise<RestoreResult> {
  const from = path.resolve(fromArg);
  const m = readManifest(from);
  const postgres = isPostgresUrl(config.databaseUrl);
  const dialect = postgres ? 'postgres' : 'sqlite';
  if (m.database.dialect !== dialect) {
    throw new BackupError('RESTORE_MISMATCH', `the backup holds a ${m.database.dialect} database but CUBBY_DATABASE_URL names a ${dialect} one; restore it into the same kind of database`);
  }
  checkSecret(config, m);
  const dbFile = postgres ? null : path.resolve(sqlitePath(config.databaseUrl));
  await checkTargetEmpty(config, m, dbFile);

  const created: string[] = [];
  const createdDataDir = !fs.existsSync(config.dataDir);
  let schemaCreatedByUs = false;
  try {
    await fsp.mkdir(config.dataDir, { recursive: true, mode: 0o700 });
    const blobs = await restoreBlobs(config, path.join(from, m.blobs.dir), m);
    if (m.secret.file && !config.secretKey) {
      const target = path.join(config.dataDir, 'secret.key');
      await fsp.copyFile(path.join(from, m.secret.file), target, fs.constants.COPYFILE_EXCL);
      created.push(target);
      await fsp.chmod(target, 0o600);
    }
    if (dbFile) {
      const tmp = `${dbFile}.restoring`;
      await fsp.mkdir(path.dirname(dbFile), { recursive: true, mode: 0o700 });
      await fsp.copyFile(path.join(from, m.database.file), tmp, fs.constants.COPYFILE_EXCL);
      created.push(tmp);
      await fsp.chmod(tmp, 0o600);
      const fh = await fsp.open(tmp, 'r+');
      await fh.sync().finally(() => fh.close());
      await fsp.rename(tmp, dbFile);
      created.push(dbFile);
      await syncDir(path.dirname(dbFile));
    } else {
      schemaCreatedByUs = await pgRestore(config.databaseUrl, (m.database as { schema: string }).schema, path.join(from, m.database.file));
    }
    const state = await inspectDatabase(config.databaseUrl, config.databaseSchema);
    if (state.state !== 'ready') throw new BackupError('BACKUP_FAILED', `the restored database at ${state.where} is ${state.state}`);
    return { restored_from: from, dialect, data_dir: config.dataDir, blobs: blobs.count, bytes: blobs.bytes, backup_created_at: m.created_at };
  } catch (err) {
    for (const f of created.reverse()) await fsp.rm(f, { force: true });
    if (config.blobs.kind === 'fs') await fsp.rm(config.blobs.dir, { recursive: true, force: true });
    if (createdDataDir) await fsp.rm(config.dataDir, { recursive: true, force: true });
    if (schemaCreatedByUs) await dropSchema(config.databaseUrl, (m.database as { schema: string }).schema).catch(() => {});
    throw err;
  }
}

/** The secret that sealed the backup's DKIM keys and webhook secrets must be the one the restored server uses. */
function checkSecret(config: Config, m: Manifest): void {
  const s = m.secret;
  if (s.source === 'environment' && (!config.secretKey || secretFingerprint(config.secretKey) !== s.fingerprint)) {
    throw new BackupError('RESTORE_MISMATCH', 'the backed-up server took its secret key from CUBBY_SECRET_KEY: set CUBBY_SECRET_KEY to that same key for the restore and the restored server (sealed DKIM keys, webhook secrets and signed links need it)');
  }
  if (s.source === 'file' && config.secretKey && secretFingerprint(config.secretKey) !== s.fingerprint) {
    throw new BackupError('RESTORE_MISMATCH', "the backup carries the server's generated secret key (secret.key), and CUBBY_SECRET_KEY is set to a different one: unset CUBBY_SECRET_KEY to use the backup's");
  }
}

async function checkTargetEmpty(config: Config, m: Manifest, dbFile: string | null): Promise<void> {
  const notEmpty = (what: string) => new BackupError('RESTORE_TARGET_NOT_EMPTY', `${what} is not empty: restore into a new, empty data dir${dbFile ? '' : ' and database schema'}`);
  if (!isMissingOrEmpty(config.dataDir)) throw notEmpty(`the data dir ${config.dataDir}`);
  if (dbFile && fs.existsSync(dbFile)) throw notEmpty(`the database ${dbFile}`);
  if (config.blobs.kind === 'fs' && !isMissingOrEmpty(config.blobs.dir)) throw notEmpty(`the blob dir ${config.blobs.dir}`);
  if (m.database.dialect === 'postgres') {
    const wanted = config.databaseSchema ?? 'public';
    if (m.database.schema !== wanted) {
      throw new BackupError('RESTORE_MISMATCH', `the backup holds postgres schema "${m.database.schema}", but CUBBY_DATABASE_SCHEMA is "${wanted}": restore into a schema of the same name (another database, or set CUBBY_DATABASE_SCHEMA=${m.database.schema})`);
    }
    const client = new pg.Client({ connectionString: config.databaseUrl });
    await client.connect();
    try {
      const r = await client.query("SELECT count(*)::int AS n FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind IN ('r', 'p', 'v', 'm', 'S')", [wanted]);
      if (r.rows[0].n > 0) throw notEmpty(`postgres schema "${wanted}"`);
    } finally {
      await client.end();
    }
  }
}

/** Puts every backed-up blob into the configured store (fs or S3), checking each one's SHA-256. */
async function restoreBlobs(config: Config, dir: string, m: Manifest): Promise<{ count: number; bytes: number }> {
  const store = await createBlobStore(config);
  const files: { sha256: string; file: string }[] = [];
  for (const aa of await fsp.readdir(dir)) {
    if (!/^[0-9a-f]{2}$/.test(aa)) continue;
    for (const name of await fsp.readdir(path.join(dir, aa))) if (isSha256(name) && name.startsWith(aa)) files.push({ sha256: name, file: path.join(dir, aa, name) });
  }
  if (files.length !== m.blobs.count) {
    throw new BackupError('RESTORE_SOURCE_NOT_A_BACKUP', `the backup is damaged: its manifest lists ${m.blobs.count} blobs, ${dir} holds ${files.length}`);
  }
  let bytes = 0;
  for (let i = 0; i < files.length; i += PUTS) {
    await Promise.all(
      files.slice(i, i + PUTS).map(async ({ sha256, file }) => {
        const stored = await store.put(fs.createReadStream(file), { sha256Hex: sha256 });
        bytes += stored.byteSize;
      }),
    );
  }
  return { count: files.length, bytes };
}

/**
 * pg_restore in one transaction. pg_dump records our schema's CREATE SCHEMA; when the schema already
 * exists (empty; `public` always does) that entry is left out of the restore list. Returns whether
 * the restore created the schema.
 */
async function pgRestore(url: string, schema: string, file: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  let exists: boolean;
  try {
    exists = ((await client.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [schema])).rowCount ?? 0) > 0;
  } finally {
    await client.end();
  }
  const args = [`--dbname=${url}`, '--no-owner', '--no-privileges', '--exit-on-error', '--single-transaction'];
  let listFile: string | null = null;
  try {
    if (exists) {
      const { stdout } = await run('pg_restore', ['--list', file], { maxBuffer: 64 * 1024 * 1024 });
      // In the OS temp dir: the backup directory may be read-only, and stays as it was.
      listFile = path.join(os.tmpdir(), `cubby-restore-${process.pid}-${Date.now()}.list`);
      const kept = stdout.split('\n').filter((l) => !/^\d+;\s+\d+\s+\d+\s+SCHEMA\s+-\s+/.test(l));
      await fsp.writeFile(listFile, kept.join('\n'), { mode: 0o600 });
      args.push(`--use-list=${listFile}`);
    }
    await run('pg_restore', [...args, file], { maxBuffer: 16 * 1024 * 1024 });
  } catch (err) {
    const e = err as NodeJS.ErrnoException & { stderr?: string };
    if (e.code === 'ENOENT') throw new BackupError('BACKUP_TOOL_MISSING', 'pg_restore is not installed (or not on PATH): install the PostgreSQL client tools of your server\'s major version');
    throw new BackupError('BACKUP_FAILED', `pg_restore failed: ${(e.stderr ?? e.message).trim()}`);
  } finally {
    if (listFile) await fsp.rm(listFile, { force: true });
  }
  return !exists;
}

async function dropSchema(url: string, schema: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(`DROP SCHEMA IF EXISTS "${schema.replace(/"/g, '""')}" CASCADE`);
  } finally {
    await client.end();
  }
}
