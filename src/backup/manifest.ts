import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { z } from 'zod';

// A backup is a directory: the database (a SQLite file or a pg_dump archive), the blobs in the fs
// store's layout (`blobs/<aa>/<sha256>`), the generated secret key when there is one, and this
// manifest. The manifest is written last: a directory without it is not a backup (an interrupted
// run leaves nothing that restore would take for one).

export const MANIFEST_FILE = 'cubby-backup.json';
export const FORMAT = 'cubby-backup';

export const manifestSchema = z.object({
  format: z.literal(FORMAT),
  format_version: z.literal(1),
  created_at: z.string(),
  cubby_version: z.string(),
  database: z.discriminatedUnion('dialect', [
    z.object({ dialect: z.literal('sqlite'), file: z.string() }),
    z.object({ dialect: z.literal('postgres'), file: z.string(), schema: z.string() }),
  ]),
  /** Names of the migrations applied in the snapshot (the restored server runs any newer ones). */
  migrations: z.array(z.string()),
  blobs: z.object({ dir: z.string(), count: z.number().int().nonnegative(), bytes: z.number().int().nonnegative() }),
  /**
   * The secret that seals DKIM keys and webhook secrets and signs links: the generated key file is
   * in the backup (`file`), or it came from CUBBY_SECRET_KEY and the operator keeps it (`environment`),
   * or no server has made one yet (`none`).
   * The fingerprint lets restore notice a different key before anything is written.
   */
  secret: z.object({ source: z.enum(['file', 'environment', 'none']), file: z.string().nullable(), fingerprint: z.string().nullable() }),
});
export type Manifest = z.infer<typeof manifestSchema>;

/** A short, one-way tag of a secret key (never the key): equal keys, equal tags. */
export function secretFingerprint(secret: string): string {
  return createHash('sha256').update(`cubby-secret-fingerprint\0${secret}`).digest('hex').slice(0, 16);
}

export class BackupError extends Error {
  override readonly name = 'BackupError';
  constructor(
    readonly code: 'BACKUP_TARGET_NOT_EMPTY' | 'BACKUP_SOURCE_INVALID' | 'RESTORE_SOURCE_NOT_A_BACKUP' | 'RESTORE_TARGET_NOT_EMPTY' | 'RESTORE_MISMATCH' | 'BACKUP_TOOL_MISSING' | 'BACKUP_FAILED',
    message: string,
  ) {
    super(message);
  }
}

/** Reads and checks a backup's manifest and the files it names; BackupError when DIR is not a backup. */
export function readManifest(dir: string): Manifest {
  const notBackup = (why: string) => new BackupError('RESTORE_SOURCE_NOT_A_BACKUP', `${dir} is not a Cubby backup: ${why}`);
  if (!fs.existsSync(dir)) throw notBackup('no such directory');
  if (!fs.statSync(dir).isDirectory()) throw notBackup('not a directory');
  const file = path.join(dir, MANIFEST_FILE);
  if (!fs.existsSync(file)) throw notBackup(`no ${MANIFEST_FILE} (a backup that did not finish has none)`);
  let raw: unknown;
  try {
    raw = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch {
    throw notBackup(`${MANIFEST_FILE} is not JSON`);
  }
  const parsed = manifestSchema.safeParse(raw);
  if (!parsed.success) throw notBackup(`${MANIFEST_FILE} is not a backup manifest (${parsed.error.issues[0]?.path.join('.') || 'format'}: ${parsed.error.issues[0]?.message})`);
  const m = parsed.data;
  for (const rel of [m.database.file, m.blobs.dir, ...(m.secret.file ? [m.secret.file] : [])]) {
    if (path.isAbsolute(rel) || rel.split(/[\\/]/).includes('..')) throw notBackup(`${MANIFEST_FILE} names a path outside the backup: ${rel}`);
    if (!fs.existsSync(path.join(dir, rel))) throw notBackup(`${rel} is missing`);
  }
  return m;
}

/** True when `dir` does not exist or has no entries. */
export function isMissingOrEmpty(dir: string): boolean {
  try {
    return fs.readdirSync(dir).length === 0;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return true;
    throw err;
  }
}
