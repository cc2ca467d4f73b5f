import { timingSafeEqual } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import type { Kysely } from 'kysely';
import type { DB } from '../db/schema.ts';
import type { OAuthClientsTable } from '../agent-auth/agent-auth.schema.ts';
import { randomToken, sha256Hex } from '../ids.ts';
import { iso } from '../time.ts';
import { basicCredentials, OAuthError, param } from './oauth.http.ts';
import { newSecret } from './tokens.ts';

// Dynamic client registration (RFC 7591). Registration is open, as MCP clients expect; it
// grants nothing by itself (every connection still needs a person's approval) and is
// throttled per client address.

export const DEVICE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code';
const GRANTS = ['authorization_code', 'refresh_token', DEVICE_GRANT];
const AUTH_METHODS = ['none', 'client_secret_post', 'client_secret_basic'] as const;
const MAX_REDIRECT_URIS = 10;
const ECHOED = ['client_uri', 'logo_uri', 'scope', 'contacts', 'tos_uri', 'policy_uri', 'software_id', 'software_version'] as const;

function stringList(body: Record<string, unknown>, name: string, fallback: string[]): string[] {
  const v = body[name];
  if (v === undefined || v === null) return fallback;
  if (!Array.isArray(v) || v.some((x) => typeof x !== 'string' || x.length > 2000) || v.length > 20) {
    throw new OAuthError('invalid_client_metadata', `${name} must be an array of strings.`);
  }
  return v as string[];
}

const LOOPBACK = new Set(['127.0.0.1', 'localhost', '[::1]']);
const FORBIDDEN_SCHEMES = new Set(['javascript:', 'data:', 'file:', 'vbscript:', 'blob:', 'about:']);

/** https, http on a loopback host (native apps, RFC 8252), or a private-use scheme; never a fragment. */
export function checkRedirectUri(uri: string): void {
  let u: URL;
  try {
    u = new URL(uri);
  } catch {
    throw new OAuthError('invalid_redirect_uri', `${uri} is not an absolute URI.`);
  }
  if (u.hash || uri.includes('#')) throw new OAuthError('invalid_redirect_uri', 'Redirect URIs must not contain a fragment.');
  if (FORBIDDEN_SCHEMES.has(u.protocol)) throw new OAuthError('invalid_redirect_uri', `The ${u.protocol} scheme is not allowed.`);
  if (u.protocol === 'http:' && !LOOPBACK.has(u.hostname)) throw new OAuthError('invalid_redirect_uri', 'http redirect URIs must point at a loopback address; use https.');
}

export async function registerClient(db: Kysely<DB>, raw: unknown, ip: string, now: Date) {
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) throw new OAuthError('invalid_client_metadata', 'Send the client metadata as a JSON object.');
  const body = raw as Record<string, unknown>;
  const grantTypes = stringList(body, 'grant_types', ['authorization_code']);
  const bad = grantTypes.find((g) => !GRANTS.includes(g));
  if (bad) throw new OAuthError('invalid_client_metadata', `grant type ${bad} is not supported.`);
  let responseTypes = stringList(body, 'response_types', grantTypes.includes('authorization_code') ? ['code'] : []);
  if (responseTypes.some((r) => r !== 'code')) throw new OAuthError('invalid_client_metadata', 'The only response type is code.');
  if (grantTypes.includes('authorization_code') && responseTypes.length === 0) responseTypes = ['code'];
  const redirectUris = stringList(body, 'redirect_uris', []);
  if (redirectUris.length > MAX_REDIRECT_URIS) throw new OAuthError('invalid_client_metadata', `At most ${MAX_REDIRECT_URIS} redirect URIs.`);
  redirectUris.forEach(checkRedirectUri);
  if (grantTypes.includes('authorization_code') && redirectUris.length === 0) {
    throw new OAuthError('invalid_redirect_uri', 'The authorization_code grant needs at least one redirect URI.');
  }
  const method = (param(body, 'token_endpoint_auth_method', 50) ?? 'client_secret_basic') as (typeof AUTH_METHODS)[number];
  if (!AUTH_METHODS.includes(method)) throw new OAuthError('invalid_client_metadata', `token_endpoint_auth_method ${method} is not supported.`);
  const name = (param(body, 'client_name', 500) ?? 'Unnamed client').trim().slice(0, 200) || 'Unnamed client';
  const extra: Record<string, unknown> = {};
  for (const k of ECHOED) if (body[k] !== undefined && JSON.stringify(body[k]).length <= 2000) extra[k] = body[k];

  const id = `mcp_client_${randomToken(24)}`;
  const secret = method === 'none' ? null : newSecret('cubby_cs_');
  const createdAt = iso(now);
  await db
    .insertInto('oauth_clients')
    .values({
      id,
      client_name: name,
      redirect_uris: JSON.stringify(redirectUris),
      grant_types: JSON.stringify(grantTypes),
      response_types: JSON.stringify(responseTypes),
      token_endpoint_auth_method: method,
      client_secret_hash: secret?.hash ?? null,
      metadata: JSON.stringify(extra),
      created_ip: ip,
      created_at: createdAt,
    })
    .execute();
  return {
    client_id: id,
    client_id_issued_at: Math.floor(now.getTime() / 1000),
    ...(secret ? { client_secret: secret.token, client_secret_expires_at: 0 } : {}),
    client_name: name,
    redirect_uris: redirectUris,
    grant_types: grantTypes,
    response_types: responseTypes,
    token_endpoint_auth_method: method,
    ...extra,
  };
}

export interface Client extends OAuthClientsTable {
  redirectUris: string[];
  grantTypes: string[];
}

export async function findClient(db: Kysely<DB>, clientId: string | undefined): Promise<Client | null> {
  if (!clientId || clientId.length > 100) return null;
  const row = await db.selectFrom('oauth_clients').selectAll().where('id', '=', clientId).executeTakeFirst();
  return row ? { ...row, redirectUris: JSON.parse(row.redirect_uris), grantTypes: JSON.parse(row.grant_types) } : null;
}

function sameSecret(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/**
 * Authenticates the client at the token and revocation endpoints: public clients name
 * themselves with client_id; confidential ones prove the secret (Basic or in the body).
 */
export async function authenticateClient(db: Kysely<DB>, req: FastifyRequest, body: unknown): Promise<Client> {
  const basic = basicCredentials(req);
  const clientId = basic?.clientId ?? param(body, 'client_id', 100);
  const client = await findClient(db, clientId);
  if (!client) throw new OAuthError('invalid_client', 'Unknown client; register at /oauth/register.', basic ? 401 : 400);
  if (client.token_endpoint_auth_method === 'none') return client;
  const secret = basic?.secret ?? param(body, 'client_secret', 200);
  if (!secret || !client.client_secret_hash || !sameSecret(sha256Hex(secret), client.client_secret_hash)) {
    throw new OAuthError('invalid_client', 'Client authentication failed.', 401);
  }
  return client;
}

export function assertGrantAllowed(client: Client, grant: string): void {
  if (!client.grantTypes.includes(grant)) throw new OAuthError('unauthorized_client', `This client did not register the ${grant} grant.`);
}
