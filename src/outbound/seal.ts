import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';

// AES-256-GCM for outbound secrets at rest (system-mail bodies carrying sign-in codes, DKIM private
// keys). The key is derived from the service secret with a purpose label, so it never equals a key
// used elsewhere. Format: v1.<iv>.<tag>.<ciphertext>, base64url parts.

function keyFor(secret: string, purpose: string): Buffer {
  return createHash('sha256').update(`cubby:${purpose}:`).update(secret).digest();
}

export function seal(secret: string, purpose: string, plain: Buffer): string {
  const iv = randomBytes(12);
  const c = createCipheriv('aes-256-gcm', keyFor(secret, purpose), iv);
  const body = Buffer.concat([c.update(plain), c.final()]);
  return ['v1', iv.toString('base64url'), c.getAuthTag().toString('base64url'), body.toString('base64url')].join('.');
}

export function unseal(secret: string, purpose: string, sealed: string): Buffer {
  const [v, iv, tag, body] = sealed.split('.');
  if (v !== 'v1' || !iv || !tag || body === undefined) throw new Error('sealed value has an unknown format');
  const d = createDecipheriv('aes-256-gcm', keyFor(secret, purpose), Buffer.from(iv, 'base64url'));
  d.setAuthTag(Buffer.from(tag, 'base64url'));
  return Buffer.concat([d.update(Buffer.from(body, 'base64url')), d.final()]);
}
