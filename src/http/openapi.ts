import { z } from 'zod';
import { named, Timestamp } from './contract.ts';

// Document-level parts of the two OpenAPI documents: tags, security schemes, the
// `email.received` webhook, and the split of the one generated document into one per surface
// (paths of that surface and only the components they reference).

export type SurfacePrefix = '/v1' | '/api/v1';

const TAGS: Array<{ name: string; description: string }> = [
  { name: 'accounts', description: 'Status, accounts and plan limits.' },
  { name: 'agent access', description: 'Email codes and connection grants that give an agent an API key.' },
  { name: 'mailboxes', description: 'Mailboxes (surface R): file buckets with their own email address.' },
  { name: 'buckets', description: 'Buckets (surface A): the same stored objects as mailboxes.' },
  { name: 'files', description: 'Versioned files of a mailbox or bucket.' },
  { name: 'uploads', description: 'Direct uploads and batch upload sessions.' },
  { name: 'emails', description: 'Received and sent email stored in a mailbox.' },
  { name: 'sending', description: 'Sending and replying by email.' },
  { name: 'email settings', description: 'Addresses, aliases, sender allowlist, webhook and live subscription.' },
  { name: 'email domains', description: 'Custom receiving domains.' },
  { name: 'publications', description: 'Static websites published from a bucket.' },
  { name: 'git sync', description: 'A bucket kept in step with a branch of a git repository over HTTPS (docs/git-sync.md).' },
  { name: 'search', description: 'Full-text search across the mail and files a credential can read (docs/search.md).' },
];

export const EmailReceivedEvent = named(
  'EmailReceivedEvent',
  z.object({
    id: z.string().describe('Event id (evt_…); the same on every retry, also sent as `webhook-id`'),
    type: z.literal('email.received'),
    created_at: Timestamp,
    data: z.object({
      account_id: z.string(),
      mailbox_id: z.string(),
      email_id: z.string(),
      received_at: Timestamp,
      attachment_count: z.number().int(),
    }),
  }),
  'Body of the `email.received` webhook: ids and counts only, never content; read the email through the API.',
  {
    id: 'evt_01JD2Q9K3M4N5P6Q7R8S9T0V1W',
    type: 'email.received',
    created_at: '2026-11-24T10:00:00.000Z',
    data: { account_id: 'acc_01JD…', mailbox_id: 'bkt_01JD…', email_id: 'eml_01JD…', received_at: '2026-11-24T10:00:00.000Z', attachment_count: 1 },
  },
);

const signatureHeader = (name: string, description: string, example: string) => ({ name, in: 'header', required: true, description, schema: { type: 'string' }, example });

/** OpenAPI 3.1 `webhooks`: what a mailbox's webhook URL receives (surface R configures it). */
function webhooks() {
  return {
    'email.received': {
      post: {
        operationId: 'emailReceivedWebhook',
        summary: 'An email was stored in the mailbox',
        description:
          'Signed with the Standard Webhooks scheme: verify `webhook-signature` (`v1,` + base64 HMAC-SHA256 of `{webhook-id}.{webhook-timestamp}.{raw body}` with the `whsec_…` secret) before trusting the body. ' +
          'Answer 2xx within 15 s. Network errors, 408, 429 and 5xx are retried with backoff (Retry-After honoured within 1–3600 s); other statuses and redirects stop the delivery.',
        tags: ['email settings'],
        parameters: [
          signatureHeader('webhook-id', 'Event id; the same on every retry (deduplicate on it)', 'evt_01JD2Q9K3M4N5P6Q7R8S9T0V1W'),
          signatureHeader('webhook-timestamp', 'Unix seconds of this attempt; reject old ones', '1795946400'),
          signatureHeader('webhook-signature', 'Space-separated `v1,<base64 signature>` values', 'v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4='),
        ],
        requestBody: { required: true, content: { 'application/json': { schema: { $ref: '#/components/schemas/EmailReceivedEvent' } } } },
        responses: {
          '2XX': { description: 'Accepted; the delivery succeeded' },
          default: { description: 'Any other answer fails the attempt (retried for 408, 429 and 5xx)' },
        },
      },
    },
  };
}

function securitySchemes(base: string) {
  return {
    bearer: { type: 'http', scheme: 'bearer', description: 'API key (`cubby_…`), made in the dashboard, by agent access, or by the CLI.' },
    oauth: {
      type: 'oauth2',
      description:
        'OAuth 2.1 for agents (RFC 6749, 7636, 8628, 8707): authorization code with PKCE (S256 only) or the device authorization grant; ' +
        `dynamic client registration at ${base}/oauth/register; metadata at ${base}/.well-known/oauth-authorization-server.`,
      flows: {
        authorizationCode: { authorizationUrl: `${base}/oauth/authorize`, tokenUrl: `${base}/oauth/token`, refreshUrl: `${base}/oauth/token`, scopes: { mcp: 'Use the service as the signed-in person', offline_access: 'Receive a refresh token' } },
        'x-deviceAuthorization': { deviceAuthorizationUrl: `${base}/oauth/device_authorization`, tokenUrl: `${base}/oauth/token`, scopes: { mcp: 'Use the service as the signed-in person', offline_access: 'Receive a refresh token' } },
      },
    },
  };
}

/** Every `#/components/schemas/X` a value refers to, followed through the components themselves. */
function referencedSchemas(doc: any): Set<string> {
  const seen = new Set<string>();
  const walk = (v: unknown) => {
    if (Array.isArray(v)) return v.forEach(walk);
    if (!v || typeof v !== 'object') return;
    for (const [k, child] of Object.entries(v)) {
      if (k === '$ref' && typeof child === 'string' && child.startsWith('#/components/schemas/')) {
        const id = child.slice('#/components/schemas/'.length);
        if (!seen.has(id)) {
          seen.add(id);
          walk(doc.components?.schemas?.[id]);
        }
      } else walk(child);
    }
  };
  walk({ ...doc, components: undefined });
  return seen;
}

/** One surface's document from the generated whole. */
export function surfaceDocument(whole: any, prefix: SurfacePrefix, base: string): any {
  const doc = structuredClone(whole);
  doc.paths = Object.fromEntries(Object.entries(doc.paths ?? {}).filter(([p]) => p.startsWith(`${prefix}/`)));
  doc.servers = [{ url: base }];
  doc.info = { ...doc.info, title: prefix === '/v1' ? 'Cubby API (surface R)' : 'Cubby API (surface A)' };
  const used = new Set<string>();
  for (const item of Object.values<any>(doc.paths)) for (const op of Object.values<any>(item)) for (const t of op?.tags ?? []) used.add(t);
  doc.tags = TAGS.filter((t) => used.has(t.name));
  doc.components = { ...doc.components, securitySchemes: securitySchemes(base) };
  if (prefix === '/v1') doc.webhooks = webhooks();
  // Register EmailReceivedEvent even when no route refers to it, then keep only what is used.
  doc.components.schemas = { ...doc.components.schemas };
  const keep = referencedSchemas(doc);
  doc.components.schemas = Object.fromEntries(Object.entries(doc.components.schemas).filter(([id]) => keep.has(id)));
  return doc;
}

export const OPENAPI_INFO = {
  title: 'Cubby API',
  version: '1.0.0',
  description:
    'Private file buckets, each with its own email address. Surface R (`/v1`) calls them mailboxes; surface A (`/api/v1`) calls them buckets. ' +
    'Errors carry a stable `code`; every error status below lists the codes it can carry. Human-readable reference: `/docs/api`.',
};
