import type { RequestCtx } from '../context.ts';
import { iso } from '../time.ts';

// The honest part of status.connection for agent credentials: when renewal is due and what
// to do then. An OAuth access token lives an hour: renew it in its last five minutes by
// refreshing (when the connection holds a live refresh token) or by authorizing again.
// Keys from agent flows never expire by themselves; if one carries an expiry, renew it in its
// last week by running the flow that made it again.

const ACCESS_RENEW_MS = 5 * 60_000;
const KEY_RENEW_MS = 7 * 86_400_000;

const AGAIN: Record<string, string> = {
  oauth_device: 'device_login',
  oauth_code: 'authorize_again',
  email_code: 'request_code',
  grant: 'exchange_grant',
};

export interface ConnectionDetails {
  renewal: { recommended: boolean; next_action: string; browser_url: string };
  connection_id: string;
  issued_via: string;
}

/** Null for dashboard API keys (their renewal is the API keys page). */
export async function connectionDetails(ctx: RequestCtx): Promise<ConnectionDetails | null> {
  const cred = ctx.credential;
  if (!cred.connection) return null;
  const now = ctx.now().getTime();
  const browserUrl = `${ctx.publicUrl()}/settings/connections`;
  const left = cred.expiresAt ? Date.parse(cred.expiresAt) - now : Infinity;
  let nextAction: string;
  let recommended: boolean;
  if (cred.authMethod === 'oauth') {
    recommended = left < ACCESS_RENEW_MS;
    const refresh = await ctx.db
      .selectFrom('oauth_tokens')
      .select('id')
      .where('connection_id', '=', cred.connection.id)
      .where('kind', '=', 'refresh')
      .where('rotated_at', 'is', null)
      .where('revoked_at', 'is', null)
      .where('expires_at', '>', iso(now))
      .executeTakeFirst();
    nextAction = refresh ? 'refresh_token' : 'authorize_again';
  } else {
    recommended = left < KEY_RENEW_MS;
    nextAction = AGAIN[cred.connection.kind] ?? 'authorize_again';
  }
  return {
    renewal: { recommended, next_action: recommended ? nextAction : 'none', browser_url: browserUrl },
    connection_id: cred.connection.id,
    issued_via: cred.connection.kind,
  };
}
