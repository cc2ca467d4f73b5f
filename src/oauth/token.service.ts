import type { Kysely } from 'kysely';
import type { AppDeps } from '../context.ts';
import type { DB } from '../db/schema.ts';
import { sha256Hex } from '../ids.ts';
import { iso } from '../time.ts';
import { ADMIN_ROLES, agentId, revealConnectionKey, revokeConnection } from '../agent-auth/connections.service.ts';
import { API_KEY_PREFIX } from '../auth/credential.ts';
import { checkResource, OAuthError, OFFLINE_SCOPE, scopeHas } from './oauth.http.ts';
import type { Client } from './clients.service.ts';
import { ACCESS_TOKEN_TTL_SECONDS, isAccessToken, isRefreshToken, newAccessToken, newRefreshToken, REFRESH_TOKEN_TTL_SECONDS } from './tokens.ts';

/** The extension field of the token reply that carries an API key for the REST API. */
export const API_KEY_FIELD = 'cubby_api_key';

async function liveConnection(db: Kysely<DB>, connectionId: string, now: Date) {
  const conn = await db
    .selectFrom('agent_connections')
    .innerJoin('api_keys', 'api_keys.id', 'agent_connections.api_key_id')
    .leftJoin('memberships', (j) => j.onRef('memberships.account_id', '=', 'agent_connections.account_id').onRef('memberships.user_id', '=', 'agent_connections.user_id'))
    .select([
      'agent_connections.id',
      'agent_connections.client_id',
      'agent_connections.account_id',
      'agent_connections.api_key_id',
      'agent_connections.revoked_at',
      'api_keys.revoked_at as key_revoked_at',
      'memberships.role',
    ])
    .where('agent_connections.id', '=', connectionId)
    .executeTakeFirst();
  if (!conn || conn.revoked_at || conn.key_revoked_at) throw new OAuthError('invalid_grant', 'This connection has been revoked.');
  // Removed or reduced to collaborator: the connection and its refresh tokens end here.
  if (!conn.role || !ADMIN_ROLES.includes(conn.role)) {
    await revokeConnection(db, conn.id, 'membership_changed', now);
    throw new OAuthError('invalid_grant', 'This connection was revoked: its owner is no longer an owner or administrator of the account.');
  }
  return conn;
}

/**
 * The token reply for a connection: an access token bound to the resource, a refresh token
 * when the client may refresh, and the API key extension when it was asked for.
 */
export async function issueTokens(
  deps: AppDeps,
  client: Client,
  grant: { connectionId: string; scope: string; resource: string; wantApiKey: boolean },
) {
  const now = deps.now();
  const conn = await liveConnection(deps.db, grant.connectionId, now);
  if (conn.client_id !== client.id) throw new OAuthError('invalid_grant', 'This grant belongs to another client.');
  // offline_access asks for a refresh token; a client that registered the refresh_token grant
  // gets one too (RFC 6749 leaves issuing them to the server).
  const refresh = scopeHas(grant.scope, OFFLINE_SCOPE) || client.grantTypes.includes('refresh_token');
  const access = newAccessToken();
  const refreshToken = refresh ? newRefreshToken() : null;
  const apiKey = await deps.db.transaction().execute(async (trx) => {
    await trx
      .insertInto('oauth_tokens')
      .values({ id: agentId('tok'), token_hash: access.hash, connection_id: conn.id, kind: 'access', scope: grant.scope, resource: grant.resource, expires_at: iso(now.getTime() + ACCESS_TOKEN_TTL_SECONDS * 1000), rotated_at: null, revoked_at: null, created_at: iso(now) })
      .execute();
    if (refreshToken) {
      await trx
        .insertInto('oauth_tokens')
        .values({ id: agentId('tok'), token_hash: refreshToken.hash, connection_id: conn.id, kind: 'refresh', scope: grant.scope, resource: grant.resource, expires_at: iso(now.getTime() + REFRESH_TOKEN_TTL_SECONDS * 1000), rotated_at: null, revoked_at: null, created_at: iso(now) })
        .execute();
    }
    return grant.wantApiKey ? revealConnectionKey(trx, conn.api_key_id) : null;
  });
  return {
    access_token: access.token,
    token_type: 'Bearer',
    expires_in: ACCESS_TOKEN_TTL_SECONDS,
    scope: grant.scope,
    ...(refreshToken ? { refresh_token: refreshToken.token } : {}),
    ...(apiKey ? { [API_KEY_FIELD]: apiKey } : {}),
    // The same key under `<brand>_api_key` for each CUBBY_COMPAT_BRANDS word (docs/compat.md).
    ...(apiKey ? Object.fromEntries(deps.config.compatBrands.map((b) => [`${b}_api_key`, apiKey])) : {}),
    connection_id: conn.id,
    account_id: conn.account_id,
  };
}

/**
 * Refresh with rotation: each refresh token works once and is replaced. Presenting one that
 * was already exchanged is reuse (a stolen copy, or the client's own lost race): the whole
 * connection is revoked, so whichever party holds the other copy is cut off too.
 */
export async function refreshTokens(deps: AppDeps, client: Client, input: { refreshToken?: string; scope?: string; resource?: string }) {
  if (!input.refreshToken) throw new OAuthError('invalid_request', 'refresh_token is required.');
  const now = deps.now();
  const row = isRefreshToken(input.refreshToken)
    ? await deps.db
        .selectFrom('oauth_tokens')
        .innerJoin('agent_connections', 'agent_connections.id', 'oauth_tokens.connection_id')
        .selectAll('oauth_tokens')
        .select('agent_connections.client_id')
        .where('oauth_tokens.token_hash', '=', sha256Hex(input.refreshToken))
        .where('oauth_tokens.kind', '=', 'refresh')
        .executeTakeFirst()
    : undefined;
  if (!row || row.client_id !== client.id) throw new OAuthError('invalid_grant', 'Unknown refresh token for this client.');
  if (row.rotated_at) {
    await revokeConnection(deps.db, row.connection_id, 'refresh_token_reuse', now);
    throw new OAuthError('invalid_grant', 'This refresh token was already used; the connection has been revoked. Authorize again.');
  }
  if (row.revoked_at) throw new OAuthError('invalid_grant', 'This refresh token has been revoked.');
  if (Date.parse(row.expires_at) <= now.getTime()) throw new OAuthError('invalid_grant', 'This refresh token has expired. Authorize again.');
  if (input.scope !== undefined) {
    const asked = input.scope.split(/\s+/).filter(Boolean);
    if (asked.some((s) => !scopeHas(row.scope, s))) throw new OAuthError('invalid_scope', 'A refresh cannot add scopes.');
  }
  if (input.resource !== undefined && checkResource(deps, input.resource) !== row.resource) throw new OAuthError('invalid_target', 'resource differs from the original grant.');
  await liveConnection(deps.db, row.connection_id, now);
  const res = await deps.db.updateTable('oauth_tokens').set({ rotated_at: iso(now) }).where('id', '=', row.id).where('rotated_at', 'is', null).executeTakeFirst();
  if (Number(res.numUpdatedRows) !== 1) {
    await revokeConnection(deps.db, row.connection_id, 'refresh_token_reuse', now);
    throw new OAuthError('invalid_grant', 'This refresh token was already used; the connection has been revoked.');
  }
  return issueTokens(deps, { ...client, grantTypes: [...client.grantTypes, 'refresh_token'] }, { connectionId: row.connection_id, scope: row.scope, resource: row.resource, wantApiKey: false });
}

/**
 * Token revocation (RFC 7009). An access token ends alone; a refresh token ends the grant
 * (the connection, its key and every token); so does the connection's API key. Unknown
 * tokens and tokens of other clients are ignored, as the RFC asks.
 */
export async function revokeToken(deps: AppDeps, client: Client, token: string | undefined): Promise<void> {
  if (!token) throw new OAuthError('invalid_request', 'token is required.');
  const now = deps.now();
  if (isAccessToken(token) || isRefreshToken(token)) {
    const row = await deps.db
      .selectFrom('oauth_tokens')
      .innerJoin('agent_connections', 'agent_connections.id', 'oauth_tokens.connection_id')
      .select(['oauth_tokens.id', 'oauth_tokens.kind', 'oauth_tokens.connection_id', 'agent_connections.client_id'])
      .where('oauth_tokens.token_hash', '=', sha256Hex(token))
      .executeTakeFirst();
    if (!row || row.client_id !== client.id) return;
    if (row.kind === 'access') await deps.db.updateTable('oauth_tokens').set({ revoked_at: iso(now) }).where('id', '=', row.id).where('revoked_at', 'is', null).execute();
    else await revokeConnection(deps.db, row.connection_id, 'revoked_by_client', now);
    return;
  }
  if (token.startsWith(API_KEY_PREFIX)) {
    const conn = await deps.db
      .selectFrom('agent_connections')
      .innerJoin('api_keys', 'api_keys.id', 'agent_connections.api_key_id')
      .select(['agent_connections.id', 'agent_connections.client_id'])
      .where('api_keys.token_hash', '=', sha256Hex(token))
      .executeTakeFirst();
    if (conn && conn.client_id === client.id) await revokeConnection(deps.db, conn.id, 'revoked_by_client', now);
  }
}
