import { z } from 'zod';
import { named } from '../http/contract.ts';

// Response schemas of agent access (both surfaces).

export const Capabilities = named(
  'AgentAuthCapabilities',
  z.object({
    flows: z.array(z.looseObject({ id: z.string(), available: z.boolean(), description: z.string(), preferred: z.boolean().optional() })),
    mcp_url: z.string(),
    creates_accounts: z.boolean(),
    sign_up_url: z.string(),
    key_prefix: z.string(),
    scopes: z.array(z.string()),
  }),
  'The authentication flows an agent can use.',
);

export const CodeRequested = z.object({ message: z.string(), email: z.string(), expires_in_seconds: z.number().int(), fallback_url: z.string(), hint: z.string() });

export const IssuedKey = named(
  'IssuedApiKey',
  z.object({
    api_key: z.string().describe('Shown once; store it privately'),
    account_id: z.string(),
    account_name: z.string(),
    scope: z.string(),
    mailbox_access: z.string(),
    mailbox_ids: z.array(z.string()),
    mailbox_permissions: z.record(z.string(), z.string()),
    account_connection_limits: z.object({ max_agent_connections: z.number().nullable(), active_agent_connections: z.number().int(), max_api_keys: z.number().nullable() }),
    expires_at: z.string().nullable(),
    manage_access: z.object({ url: z.string(), connection_id: z.string(), revocable: z.boolean() }),
    mailboxes: z.array(z.object({ id: z.string(), title: z.string().nullable(), archived: z.boolean(), permission: z.string().optional() })),
    guidance: z.string(),
  }),
  'An API key issued to an agent, with what it may do and where the person manages it.',
);

export const LoginLink = z.object({
  url: z.string(),
  path: z.string(),
  single_use: z.literal(true),
  requires_login: z.literal(true),
  redirect_path: z.string(),
  expires_in: z.number().int(),
});
