import { createHash, createHmac, createSecretKey, timingSafeEqual, type KeyObject } from 'node:crypto';

// Signed, expiring tokens for links fetched without an API key (upload and download
// URLs) and for ids clients hand back (signed blob ids). Each purpose has its own key,
// so a token made for one use is worthless for another.

/** HMAC-SHA-256's block: a longer key is hashed down to its digest first (RFC 2104). */
const HMAC_BLOCK_BYTES = 64;
const keys = new Map<string, KeyObject>();

/**
 * The key of one purpose, made once: every upload PUT and download checks a token, and building
 * the key each time (our keys are longer than the block, so HMAC hashed them first) was most of
 * the check's cost. The digest of a long key is the key HMAC uses, so MACs are unchanged.
 */
function keyOf(secret: string, purpose: string): KeyObject {
  const text = `${secret}:${purpose}`;
  let key = keys.get(text);
  if (!key) {
    const bytes = Buffer.from(text);
    key = createSecretKey(bytes.length > HMAC_BLOCK_BYTES ? createHash('sha256').update(bytes).digest() : bytes);
    // A process has one secret and a few purposes; tests make many apps, each with its own secret.
    if (keys.size >= 256) keys.delete(keys.keys().next().value!);
    keys.set(text, key);
  }
  return key;
}

function mac(secret: string, purpose: string, body: string): string {
  return createHmac('sha256', keyOf(secret, purpose)).update(body).digest('base64url').slice(0, 32);
}

function safeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

export function signToken(secret: string, purpose: string, payload: Record<string, unknown>): string {
  const body = Buffer.from(JSON.stringify(payload)).toString('base64url');
  return `${body}.${mac(secret, purpose, body)}`;
}

/** The payload, or null when the token is forged, for another purpose, or expired (`exp` in ms). */
export function verifyToken<T extends Record<string, unknown>>(secret: string, purpose: string, token: string, now: Date): T | null {
  if (token.length > 4096) return null;
  const [body, sig, extra] = token.split('.');
  if (!body || !sig || extra !== undefined || !safeEqual(sig, mac(secret, purpose, body))) return null;
  try {
    const payload = JSON.parse(Buffer.from(body, 'base64url').toString('utf8')) as T & { exp?: number };
    if (typeof payload.exp === 'number' && payload.exp <= now.getTime()) return null;
    return payload;
  } catch {
    return null;
  }
}

/** `<id>--<mac>`: an id a client may hold and hand back, but not invent. */
export function signId(secret: string, purpose: string, id: string): string {
  return `${id}--${mac(secret, purpose, id)}`;
}

export function verifySignedId(secret: string, purpose: string, signed: string): string | null {
  // Ids never contain '-', while the base64url MAC may: split at the first '--'.
  const at = signed.indexOf('--');
  if (at <= 0 || signed.length > 300) return null;
  const id = signed.slice(0, at);
  return safeEqual(signed.slice(at + 2), mac(secret, purpose, id)) ? id : null;
}
