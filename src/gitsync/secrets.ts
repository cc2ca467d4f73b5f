import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { decryptSecret, encryptSecret } from '../webhooks/secrets.ts';

// The repository token and the push webhook's secret are kept encrypted with the helper the email
// webhooks use (AES-256-GCM under a key derived from the service secret). The bucket id and the
// secret's purpose are the additional authenticated data: a ciphertext copied onto another
// connection, or from the token column into the webhook one, fails to open.

export const seal = (serviceSecret: string, bucketId: string, purpose: 'token' | 'webhook', value: string) => encryptSecret(serviceSecret, `git_sync:${purpose}:${bucketId}`, value);
export const unseal = (serviceSecret: string, bucketId: string, purpose: 'token' | 'webhook', stored: string) => decryptSecret(serviceSecret, `git_sync:${purpose}:${bucketId}`, stored);

/** A push webhook secret: shown once, pasted into the git host's webhook settings. */
export function generateWebhookSecret(): string {
  return `gitwh_${randomBytes(24).toString('base64url')}`;
}

/**
 * Checks a push webhook's signature: GitHub sends `X-Hub-Signature-256: sha256=<hex>`, Gitea and
 * Forgejo `X-Gitea-Signature: <hex>` (Forgejo also `X-Forgejo-Signature`), each the HMAC-SHA256 of
 * the raw body with the secret. Compared in constant time.
 */
export function verifyPushSignature(secret: string, body: Buffer, headers: Record<string, string | string[] | undefined>): boolean {
  const header = (name: string) => {
    const v = headers[name];
    return typeof v === 'string' ? v.trim() : undefined;
  };
  const github = header('x-hub-signature-256');
  const given = github !== undefined ? (github.startsWith('sha256=') ? github.slice(7) : null) : (header('x-gitea-signature') ?? header('x-forgejo-signature'));
  if (!given || !/^[0-9a-f]{64}$/i.test(given)) return false;
  const expected = createHmac('sha256', secret).update(body).digest();
  return timingSafeEqual(expected, Buffer.from(given, 'hex'));
}
