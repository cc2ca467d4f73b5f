import { createCipheriv, createDecipheriv, createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { randomToken } from '../ids.ts';

// Site passwords are shown to the owner after each build, so they are kept sealed (AES-256-GCM
// with a key derived from the service secret), not hashed. Nothing here is ever logged.

function keyOf(secret: string): Buffer {
  return createHash('sha256').update(`${secret}:site-password`).digest();
}

export function sealPassword(secret: string, password: string): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', keyOf(secret), iv);
  const body = Buffer.concat([cipher.update(password, 'utf8'), cipher.final()]);
  return `v1.${Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64url')}`;
}

export function openPassword(secret: string, sealed: string): string {
  const raw = Buffer.from(sealed.slice(3), 'base64url');
  const decipher = createDecipheriv('aes-256-gcm', keyOf(secret), raw.subarray(0, 12));
  decipher.setAuthTag(raw.subarray(12, 28));
  return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8');
}

/** Compares in constant time (hashing first makes the lengths equal). */
export function samePassword(a: string, b: string): boolean {
  return timingSafeEqual(createHash('sha256').update(a).digest(), createHash('sha256').update(b).digest());
}

// Easy to read aloud and type: no 0/o, 1/l/i.
const ALPHABET = 'abcdefghjkmnpqrstuvwxyz23456789';
/** Four groups of four (about 79 bits), e.g. `k7mq-3paw-x9tz-4hne`. */
export function generatePassword(): string {
  return randomToken(16, ALPHABET).match(/.{4}/g)!.join('-');
}

export const PASSWORD_MIN = 8;
export const PASSWORD_MAX = 128;
