import { createHmac } from 'node:crypto';
import { signingKey } from './secrets.ts';

/**
 * Standard Webhooks headers for one attempt: `webhook-id` is the event id (the same on every
 * retry, so receivers deduplicate), the timestamp and signature are fresh per attempt; the
 * signature is `v1,` + base64 HMAC-SHA256 of "id.timestamp.body".
 */
export function signatureHeaders(secret: string, eventId: string, body: string, at: Date): Record<string, string> {
  const timestamp = Math.floor(at.getTime() / 1000).toString();
  const mac = createHmac('sha256', signingKey(secret)).update(`${eventId}.${timestamp}.${body}`).digest('base64');
  return { 'webhook-id': eventId, 'webhook-timestamp': timestamp, 'webhook-signature': `v1,${mac}` };
}
