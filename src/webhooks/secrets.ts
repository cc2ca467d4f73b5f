import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';

// Webhook signing secrets: Standard Webhooks form (`whsec_` + base64 of 32 random bytes), kept
// encrypted at rest with AES-256-GCM under a key derived from the service secret. The webhook id is
// the additional authenticated data, so a ciphertext copied onto another webhook row fails to open.

export const SECRET_PREFIX = 'whsec_';

export function generateSigningSecret(): string {
  return `${SECRET_PREFIX}${randomBytes(32).toString('base64')}`;
}

/** The HMAC key a `whsec_…` secret stands for. */
export function signingKey(secret: string): Buffer {
  return Buffer.from(secret.slice(SECRET_PREFIX.length), 'base64');
}

function keyFor(serviceSecret: string): Buffer {
  return createHash('sha256').update(`${serviceSecret}:webhook-secrets:v1`).digest();
}

export function encryptSecret(serviceSecret: string, webhookId: string, secret: string): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', keyFor(serviceSecret), iv);
  cipher.setAAD(Buffer.from(webhookId));
  const ct = Buffer.concat([cipher.update(secret, 'utf8'), cipher.final()]);
  return ['v1', iv.toString('base64url'), cipher.getAuthTag().toString('base64url'), ct.toString('base64url')].join('.');
}

export function decryptSecret(serviceSecret: string, webhookId: string, stored: string): string {
  const [version, iv, tag, ct] = stored.split('.');
  if (version !== 'v1' || !iv || !tag || !ct) throw new Error('webhook secret: unknown format');
  const decipher = createDecipheriv('aes-256-gcm', keyFor(serviceSecret), Buffer.from(iv, 'base64url'));
  decipher.setAAD(Buffer.from(webhookId));
  decipher.setAuthTag(Buffer.from(tag, 'base64url'));
  return Buffer.concat([decipher.update(Buffer.from(ct, 'base64url')), decipher.final()]).toString('utf8');
}
