import type { AppDeps, Actor } from '../context.ts';
import type { OAuthDeviceCodesTable } from '../agent-auth/agent-auth.schema.ts';
import { randomToken, sha256Hex } from '../ids.ts';
import { iso } from '../time.ts';
import { isUniqueViolation } from '../db/database.ts';
import { agentId, insertConnection, prepareConnection, revokeConnection, type ConnectionRequest } from '../agent-auth/connections.service.ts';
import { checkResource, OAuthError } from './oauth.http.ts';
import type { Client } from './clients.service.ts';

// The device authorization grant (RFC 8628). The user code doubles as the "connection id"
// the person compares between the agent's terminal and the approval page: a safety check,
// never something to type into a chat.

export const DEVICE_CODE_TTL_SECONDS = 600;
export const DEVICE_POLL_INTERVAL_SECONDS = 5;
// RFC 8628 §6.1: consonants only (no vowels, so no words), no look-alikes.
const USER_CODE_ALPHABET = 'BCDFGHJKLMNPQRSTVWXZ';

export function formatUserCode(code: string): string {
  return `${code.slice(0, 4)}-${code.slice(4)}`;
}

/** The stored form of what a person typed or a link carried: letters only, upper case. */
export function normaliseUserCode(input: string): string | null {
  const s = input.toUpperCase().replace(/[\s-]/g, '');
  return s.length === 8 && [...s].every((c) => USER_CODE_ALPHABET.includes(c)) ? s : null;
}

export async function startDeviceAuthorization(deps: AppDeps, client: Client, input: { scope: string; resource: string; wantApiKey: boolean }) {
  const now = deps.now();
  const deviceCode = `cubby_dc_${randomToken(43)}`;
  for (let attempt = 0; ; attempt++) {
    const userCode = randomToken(8, USER_CODE_ALPHABET);
    try {
      await deps.db
        .insertInto('oauth_device_codes')
        .values({
          id: agentId('dev'),
          device_code_hash: sha256Hex(deviceCode),
          user_code: userCode,
          client_id: client.id,
          scope: input.scope,
          resource: input.resource,
          want_api_key: input.wantApiKey ? 1 : 0,
          status: 'pending',
          interval_seconds: DEVICE_POLL_INTERVAL_SECONDS,
          last_polled_at: null,
          expires_at: iso(now.getTime() + DEVICE_CODE_TTL_SECONDS * 1000),
          user_id: null,
          connection_id: null,
          decided_at: null,
          created_at: iso(now),
        })
        .execute();
      const verification = `${deps.publicUrl()}/oauth/device`;
      return {
        device_code: deviceCode,
        user_code: formatUserCode(userCode),
        verification_uri: verification,
        verification_uri_complete: `${verification}?user_code=${formatUserCode(userCode)}`,
        expires_in: DEVICE_CODE_TTL_SECONDS,
        interval: DEVICE_POLL_INTERVAL_SECONDS,
      };
    } catch (err) {
      // A user code still in use (one in 25 billion): draw another.
      if (!isUniqueViolation(err) || attempt >= 3) throw err;
    }
  }
}

/** A device request the person can still decide on, with its client's name. */
export async function findPendingDevice(deps: AppDeps, userCode: string) {
  const code = normaliseUserCode(userCode);
  if (!code) return null;
  const row = await deps.db
    .selectFrom('oauth_device_codes')
    .innerJoin('oauth_clients', 'oauth_clients.id', 'oauth_device_codes.client_id')
    .selectAll('oauth_device_codes')
    .select('oauth_clients.client_name')
    .where('oauth_device_codes.user_code', '=', code)
    .executeTakeFirst();
  if (!row || row.status !== 'pending' || Date.parse(row.expires_at) <= deps.now().getTime()) return null;
  return row;
}

/** Approves a pending device request with exactly what the person chose. */
export async function approveDevice(deps: AppDeps, device: OAuthDeviceCodesTable & { client_name: string }, choice: Omit<ConnectionRequest, 'kind'>, actor: Actor) {
  const now = deps.now();
  const prepared = await prepareConnection(deps.db, { ...choice, kind: 'oauth_device', clientId: device.client_id, clientName: device.client_name, resource: device.resource, oauthScope: device.scope }, now);
  return deps.db.transaction().execute(async (trx) => {
    const { connectionId } = await insertConnection(trx, prepared, actor, now);
    const res = await trx
      .updateTable('oauth_device_codes')
      .set({ status: 'approved', user_id: choice.userId, connection_id: connectionId, decided_at: iso(now) })
      .where('id', '=', device.id)
      .where('status', '=', 'pending')
      .where('expires_at', '>', iso(now))
      .executeTakeFirst();
    // Decided meanwhile (another tab) or expired: nothing is created.
    if (Number(res.numUpdatedRows) !== 1) throw new OAuthError('invalid_grant', 'This request was already decided or has expired.');
    return connectionId;
  });
}

export async function denyDevice(deps: AppDeps, deviceId: string, userId: string): Promise<void> {
  await deps.db
    .updateTable('oauth_device_codes')
    .set({ status: 'denied', user_id: userId, decided_at: iso(deps.now()) })
    .where('id', '=', deviceId)
    .where('status', '=', 'pending')
    .execute();
}

/**
 * One poll of the token endpoint with a device code (RFC 8628 §3.5). Returns the connection
 * to issue tokens for once approved; otherwise throws the error the RFC names. Polling faster
 * than the interval answers slow_down and adds five seconds to the interval for good.
 */
export async function pollDevice(deps: AppDeps, client: Client, deviceCode: string | undefined, resource?: string) {
  if (!deviceCode) throw new OAuthError('invalid_request', 'device_code is required.');
  const now = deps.now();
  const row = await deps.db.selectFrom('oauth_device_codes').selectAll().where('device_code_hash', '=', sha256Hex(deviceCode)).executeTakeFirst();
  if (!row || row.client_id !== client.id) throw new OAuthError('invalid_grant', 'Unknown device_code for this client.');
  // Checked before anything is spent: a wrong resource must not burn an approved code.
  if (resource !== undefined && checkResource(deps, resource) !== row.resource) throw new OAuthError('invalid_target', 'resource differs from the device authorization request.');
  if (row.status === 'consumed') throw new OAuthError('invalid_grant', 'This device_code was already exchanged.');
  if (row.status === 'denied') throw new OAuthError('access_denied', 'The person denied this connection.');
  if (row.status === 'pending' && Date.parse(row.expires_at) <= now.getTime()) throw new OAuthError('expired_token', 'The device code expired; start again.');
  if (row.status === 'pending') {
    const tooSoon = row.last_polled_at !== null && now.getTime() - Date.parse(row.last_polled_at) < row.interval_seconds * 1000;
    const interval = tooSoon ? row.interval_seconds + 5 : row.interval_seconds;
    await deps.db.updateTable('oauth_device_codes').set({ last_polled_at: iso(now), interval_seconds: interval }).where('id', '=', row.id).execute();
    if (tooSoon) throw new OAuthError('slow_down', `Polling too fast; wait ${interval} seconds between requests.`);
    throw new OAuthError('authorization_pending', 'Waiting for the person to approve in the browser.');
  }
  // Approved but never collected within the code's lifetime: the code is dead (RFC 8628 §3.5),
  // and so is the connection made for it, which nobody holds.
  if (row.status === 'approved' && Date.parse(row.expires_at) <= now.getTime()) {
    const spent = await deps.db.updateTable('oauth_device_codes').set({ status: 'consumed', last_polled_at: iso(now) }).where('id', '=', row.id).where('status', '=', 'approved').executeTakeFirst();
    if (Number(spent.numUpdatedRows) === 1 && row.connection_id) await revokeConnection(deps.db, row.connection_id, 'device_code_expired', now);
    throw new OAuthError('expired_token', 'The device code expired before it was exchanged; start again.');
  }
  // Approved: exchange exactly once.
  const res = await deps.db.updateTable('oauth_device_codes').set({ status: 'consumed', last_polled_at: iso(now) }).where('id', '=', row.id).where('status', '=', 'approved').executeTakeFirst();
  if (Number(res.numUpdatedRows) !== 1 || !row.connection_id) throw new OAuthError('invalid_grant', 'This device_code was already exchanged.');
  return { connectionId: row.connection_id, scope: row.scope, resource: row.resource, wantApiKey: row.want_api_key === 1 };
}
