import { hash, verify } from '@node-rs/argon2';
import type { Kysely } from 'kysely';
import type { DB } from '../db/schema.ts';
import { newId } from '../ids.ts';
import { iso } from '../time.ts';

// argon2id with OWASP's suggested minimum (19 MiB, 2 passes).
const ARGON = { memoryCost: 19_456, timeCost: 2, parallelism: 1 } as const;
export const MIN_PASSWORD_LENGTH = 10;
const COMMON = new Set(['password', 'password1', 'password123', '1234567890', 'qwertyuiop', 'letmein123', 'iloveyou12', 'welcome123', 'admin12345']);

export function normalizeEmail(email: string): string {
  return email.trim().toLowerCase();
}

const EMAIL_SHAPE = /^[^\s@<>()",;:\\]{1,64}@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+$/;
export function isEmail(value: string): boolean {
  return value.length <= 254 && EMAIL_SHAPE.test(value);
}

/** Why a password is too weak, or null when it is acceptable. */
export function passwordProblem(password: string, email?: string): string | null {
  if (password.length < MIN_PASSWORD_LENGTH) return `Use at least ${MIN_PASSWORD_LENGTH} characters.`;
  if (password.length > 256) return 'Use at most 256 characters.';
  if (new Set(password).size < 4) return 'Use more varied characters.';
  if (COMMON.has(password.toLowerCase())) return 'That password is too common.';
  if (email && password.toLowerCase().includes(normalizeEmail(email).split('@')[0]!) && password.length < 16) {
    return 'Do not build the password from your email address.';
  }
  return null;
}

export function hashPassword(password: string): Promise<string> {
  return hash(password, ARGON);
}

export async function verifyPassword(hashed: string, password: string): Promise<boolean> {
  try {
    return await verify(hashed, password);
  } catch {
    return false;
  }
}

// Verifying against a fixed hash when the user is unknown keeps timing alike for both cases.
let dummyHash: Promise<string> | undefined;
export function dummyPasswordCheck(password: string): Promise<boolean> {
  dummyHash ??= hashPassword('not-a-real-password-0000');
  return dummyHash.then((h) => verifyPassword(h, password));
}

export async function insertUser(db: Kysely<DB>, input: { email: string; name: string; passwordHash: string; verified?: boolean }, now: Date) {
  const row = {
    id: newId('usr'),
    email: normalizeEmail(input.email),
    name: input.name.trim(),
    password_hash: input.passwordHash,
    two_factor_enabled: 0,
    email_verified_at: input.verified === false ? null : iso(now),
    created_at: iso(now),
    updated_at: iso(now),
  };
  await db.insertInto('users').values(row).execute();
  return row;
}

export function findUserByEmail(db: Kysely<DB>, email: string) {
  return db.selectFrom('users').selectAll().where('email', '=', normalizeEmail(email)).executeTakeFirst();
}
