import fs from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import type { Config } from './config.ts';

/**
 * CUBBY_SECRET_KEY, or one generated into the data dir on first start (mode 0600) so
 * that signed cursors, links and cookies survive restarts.
 */
export function resolveSecretKey(config: Config): string {
  if (config.secretKey) return config.secretKey;
  const file = path.join(config.dataDir, 'secret.key');
  const existing = readSecretFile(file);
  if (existing !== null) return existing;
  fs.mkdirSync(config.dataDir, { recursive: true, mode: 0o700 });
  const key = randomBytes(48).toString('base64url');
  // Write a temporary file, then link it into place: link() fails if the name exists and
  // never exposes a half-written file, so processes starting at once agree on one key.
  const tmp = `${file}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
  try {
    const fd = fs.openSync(tmp, 'wx', 0o600);
    try {
      fs.writeSync(fd, `${key}\n`);
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    try {
      fs.linkSync(tmp, file);
      return key;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      // Another process created it first: use theirs.
      return readSecretFile(file)!;
    }
  } finally {
    fs.rmSync(tmp, { force: true });
  }
}

/** The key in the file, null when there is no file; a file too short to be a key stops start-up. */
function readSecretFile(file: string): string | null {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
  const key = text.trim();
  if (key.length < 32) {
    throw new Error(`${file} holds no usable secret key (fewer than 32 characters). Restore it from a backup, or delete it to generate a new one (signed cursors and links stop working).`);
  }
  return key;
}
