import { createHash } from 'node:crypto';
import type { AppDeps, Actor } from '../context.ts';
import type { OAuthPendingAuthorizationsTable } from '../agent-auth/agent-auth.schema.ts';
import { sha256Hex } from '../ids.ts';
import { iso } from '../time.ts';
import { agentId, insertConnection, prepareConnection, revokeConnection, type ConnectionRequest } from '../agent-auth/connections.service.ts';
import { checkResource, issuer, normaliseScope, OAuthError } from './oauth.http.ts';
import { checkRedirectUri, findClient, type Client } from './clients.service.ts';
import { newSecret } from './tokens.ts';

// Authorization code with PKCE (RFC 6749 §4.1, RFC 7636 S256 only) for remote MCP clients.

const PENDING_TTL_MS = 15 * 60_000;
const CODE_TTL_MS = 5 * 60_000;

/** A problem we must show the person instead of redirecting (unknown client or redirect URI). */
export class AuthorizePageError extends Error {}

/** RFC 8252 §7.3: a loopback redirect may use any port. Otherwise the registered URI exactly. */
export function redirectAllowed(client: Client, uri: string): boolean {
  if (client.redirectUris.includes(uri)) return true;
  let u: URL;
  try {
    u = new URL(uri);
  } catch {
    return false;
  }
  if (u.protocol !== 'http:' || !['127.0.0.1', '[::1]', 'localhost'].includes(u.hostname)) return false;
  return client.redirectUris.some((r) => {
    try {
      const v = new URL(r);
      return v.protocol === u.protocol && v.hostname === u.hostname && v.pathname === u.pathname && v.search === u.search;
    } catch {
      return false;
    }
  });
}

/** The redirect back to the client, with `iss` (RFC 9207) and the state. */
export function redirectWith(deps: AppDeps, redirectUri: string, params: Record<string, string | null | undefined>): string {
  const u = new URL(redirectUri);
  for (const [k, v] of Object.entries(params)) if (v !== null && v !== undefined) u.searchParams.set(k, v);
  u.searchParams.set('iss', issuer(deps));
  return u.toString();
}

export type AuthorizeQuery = Record<string, string | undefined>;

/**
 * Validates an authorization request and stores it for the person's decision. Client and
 * redirect problems throw AuthorizePageError (never redirect to an unverified URI); the
 * rest come back as an error redirect.
 */
export async function startAuthorization(deps: AppDeps, q: AuthorizeQuery): Promise<{ pendingId: string } | { redirect: string }> {
  const client = await findClient(deps.db, q.client_id);
  if (!client) throw new AuthorizePageError('Unknown client_id. The application must register at /oauth/register first.');
  const redirectUri = q.redirect_uri ?? (client.redirectUris.length === 1 ? client.redirectUris[0] : undefined);
  if (!redirectUri || !redirectAllowed(client, redirectUri)) throw new AuthorizePageError('The redirect_uri is not one this application registered.');
  checkRedirectUri(redirectUri);
  const fail = (error: string, description: string) => ({ redirect: redirectWith(deps, redirectUri, { error, error_description: description, state: q.state }) });
  if (q.response_type !== 'code') return fail('unsupported_response_type', 'response_type must be code.');
  if (!client.grantTypes.includes('authorization_code')) return fail('unauthorized_client', 'This client did not register the authorization_code grant.');
  if (!q.code_challenge || !/^[A-Za-z0-9_-]{43}$/.test(q.code_challenge)) return fail('invalid_request', 'PKCE is required: send a S256 code_challenge.');
  if ((q.code_challenge_method ?? 'plain') !== 'S256') return fail('invalid_request', 'code_challenge_method must be S256.');
  let scope: string;
  let resource: string;
  try {
    scope = normaliseScope(q.scope, deps.config.compatBrands);
    resource = checkResource(deps, q.resource);
  } catch (err) {
    if (err instanceof OAuthError) return fail(err.error, err.description);
    throw err;
  }
  if (q.state && q.state.length > 1000) return fail('invalid_request', 'state is too long.');
  const now = deps.now();
  const id = agentId('oar');
  await deps.db
    .insertInto('oauth_pending_authorizations')
    .values({
      id,
      client_id: client.id,
      redirect_uri: redirectUri,
      state: q.state ?? null,
      code_challenge: q.code_challenge,
      scope,
      resource,
      want_api_key: q.api_key === 'true' ? 1 : 0,
      expires_at: iso(now.getTime() + PENDING_TTL_MS),
      created_at: iso(now),
    })
    .execute();
  return { pendingId: id };
}

export async function findPendingAuthorization(deps: AppDeps, id: string | undefined) {
  if (!id || !/^oar_[A-Za-z0-9]{1,40}$/.test(id)) return null;
  const row = await deps.db
    .selectFrom('oauth_pending_authorizations')
    .innerJoin('oauth_clients', 'oauth_clients.id', 'oauth_pending_authorizations.client_id')
    .selectAll('oauth_pending_authorizations')
    .select('oauth_clients.client_name')
    .where('oauth_pending_authorizations.id', '=', id)
    .executeTakeFirst();
  if (!row || Date.parse(row.expires_at) <= deps.now().getTime()) return null;
  return row;
}

type Pending = OAuthPendingAuthorizationsTable & { client_name: string };

/** The person approved: create the connection and a one-time code; returns the redirect. */
export async function approveAuthorization(deps: AppDeps, pending: Pending, choice: Omit<ConnectionRequest, 'kind'>, actor: Actor): Promise<string> {
  const now = deps.now();
  const prepared = await prepareConnection(
    deps.db,
    { ...choice, kind: 'oauth_code', clientId: pending.client_id, clientName: pending.client_name, resource: pending.resource, oauthScope: pending.scope },
    now,
  );
  const code = newSecret('cubby_ac_');
  await deps.db.transaction().execute(async (trx) => {
    const gone = await trx.deleteFrom('oauth_pending_authorizations').where('id', '=', pending.id).executeTakeFirst();
    if (Number(gone.numDeletedRows) !== 1) throw new AuthorizePageError('This request was already decided.');
    const { connectionId } = await insertConnection(trx, prepared, actor, now);
    await trx
      .insertInto('oauth_auth_codes')
      .values({
        id: agentId('code'),
        code_hash: code.hash,
        client_id: pending.client_id,
        connection_id: connectionId,
        redirect_uri: pending.redirect_uri,
        code_challenge: pending.code_challenge,
        scope: pending.scope,
        resource: pending.resource,
        want_api_key: pending.want_api_key,
        expires_at: iso(now.getTime() + CODE_TTL_MS),
        used_at: null,
        created_at: iso(now),
      })
      .execute();
  });
  return redirectWith(deps, pending.redirect_uri, { code: code.token, state: pending.state });
}

export async function denyAuthorization(deps: AppDeps, pending: Pending): Promise<string> {
  await deps.db.deleteFrom('oauth_pending_authorizations').where('id', '=', pending.id).execute();
  return redirectWith(deps, pending.redirect_uri, { error: 'access_denied', error_description: 'The person denied access.', state: pending.state });
}

function s256(verifier: string): string {
  return createHash('sha256').update(verifier).digest('base64url');
}

/** Exchanges a code once (RFC 6749 §4.1.3, RFC 7636 §4.6). A replayed code revokes its connection. */
export async function redeemCode(deps: AppDeps, client: Client, input: { code?: string; redirectUri?: string; verifier?: string; resource?: string }) {
  if (!input.code) throw new OAuthError('invalid_request', 'code is required.');
  if (!input.verifier || !/^[A-Za-z0-9._~-]{43,128}$/.test(input.verifier)) throw new OAuthError('invalid_request', 'code_verifier (43 to 128 characters) is required.');
  const now = deps.now();
  const row = await deps.db.selectFrom('oauth_auth_codes').selectAll().where('code_hash', '=', sha256Hex(input.code)).executeTakeFirst();
  if (!row || row.client_id !== client.id) throw new OAuthError('invalid_grant', 'Unknown code for this client.');
  if (row.used_at) {
    await revokeConnection(deps.db, row.connection_id, 'authorization_code_reuse', now);
    throw new OAuthError('invalid_grant', 'This code was already used; the connection made with it has been revoked.');
  }
  if (Date.parse(row.expires_at) <= now.getTime()) throw new OAuthError('invalid_grant', 'The code expired.');
  if (input.redirectUri !== row.redirect_uri) throw new OAuthError('invalid_grant', 'redirect_uri does not match the authorization request.');
  if (s256(input.verifier) !== row.code_challenge) throw new OAuthError('invalid_grant', 'code_verifier does not match the code_challenge.');
  if (input.resource !== undefined && checkResource(deps, input.resource) !== row.resource) throw new OAuthError('invalid_target', 'resource differs from the authorization request.');
  const res = await deps.db.updateTable('oauth_auth_codes').set({ used_at: iso(now) }).where('id', '=', row.id).where('used_at', 'is', null).executeTakeFirst();
  if (Number(res.numUpdatedRows) !== 1) {
    await revokeConnection(deps.db, row.connection_id, 'authorization_code_reuse', now);
    throw new OAuthError('invalid_grant', 'This code was already used.');
  }
  return { connectionId: row.connection_id, scope: row.scope, resource: row.resource, wantApiKey: row.want_api_key === 1 };
}
