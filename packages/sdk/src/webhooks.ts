import { WebhookVerificationError } from './errors.ts';
import type { EmailReceivedEvent } from './types.ts';

// Verifies a webhook delivery the Standard Webhooks way: the signature is
// base64(HMAC-SHA256(secret, "<webhook-id>.<webhook-timestamp>.<raw body>")) under `v1,`, the
// secret is `whsec_` + base64 key bytes, and the timestamp must be within `toleranceSeconds`.
// WebCrypto only, so it runs in Node 20+, browsers, Deno and workers alike.

export type HeaderBag = Headers | Record<string, string | string[] | undefined>;

function header(headers: HeaderBag, name: string): string | undefined {
  if (typeof (headers as Headers).get === 'function') return (headers as Headers).get(name) ?? undefined;
  const bag = headers as Record<string, string | string[] | undefined>;
  const key = Object.keys(bag).find((k) => k.toLowerCase() === name);
  const v = key === undefined ? undefined : bag[key];
  return Array.isArray(v) ? v[0] : v;
}

function fromBase64(s: string): Uint8Array {
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

function timingSafeEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a[i]! ^ b[i]!;
  return diff === 0;
}

export interface VerifyOptions {
  /** Largest allowed difference between the delivery's timestamp and now (default 300 s). */
  toleranceSeconds?: number;
  now?: () => Date;
}

/** Checks the signature and returns the parsed event; throws WebhookVerificationError otherwise. */
export async function verifyWebhook(rawBody: string | Uint8Array, headers: HeaderBag, secret: string, opts: VerifyOptions = {}): Promise<EmailReceivedEvent> {
  const id = header(headers, 'webhook-id');
  const timestamp = header(headers, 'webhook-timestamp');
  const signatures = header(headers, 'webhook-signature');
  if (!id || !timestamp || !signatures) throw new WebhookVerificationError('missing webhook-id, webhook-timestamp or webhook-signature header');
  if (!/^\d+$/.test(timestamp)) throw new WebhookVerificationError('webhook-timestamp is not a number');
  const now = Math.floor((opts.now?.() ?? new Date()).getTime() / 1000);
  const tolerance = opts.toleranceSeconds ?? 300;
  if (Math.abs(now - Number(timestamp)) > tolerance) throw new WebhookVerificationError('webhook-timestamp is too old or too new');

  const body = typeof rawBody === 'string' ? rawBody : new TextDecoder().decode(rawBody);
  let keyBytes: Uint8Array;
  try {
    keyBytes = fromBase64(secret.startsWith('whsec_') ? secret.slice('whsec_'.length) : secret);
  } catch {
    throw new WebhookVerificationError('the secret is not a whsec_ base64 secret');
  }
  const key = await crypto.subtle.importKey('raw', keyBytes as Uint8Array<ArrayBuffer>, { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
  const expected = new Uint8Array(await crypto.subtle.sign('HMAC', key, new TextEncoder().encode(`${id}.${timestamp}.${body}`)));
  const ok = signatures.split(' ').some((sig) => {
    const [version, value] = sig.split(',');
    if (version !== 'v1' || !value) return false;
    try {
      return timingSafeEqual(fromBase64(value), expected);
    } catch {
      return false;
    }
  });
  if (!ok) throw new WebhookVerificationError('no signature matches');
  try {
    return JSON.parse(body) as EmailReceivedEvent;
  } catch {
    throw new WebhookVerificationError('the body is not JSON');
  }
}
