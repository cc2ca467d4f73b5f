import type { Kysely } from 'kysely';
import type { DB } from '../db/schema.ts';
import { AppError } from '../errors.ts';
import { iso } from '../time.ts';
import { clientKey } from '../web/throttle.ts';
import { agentId } from './connections.service.ts';

// Throttles for agent access, counted in `agent_auth_attempts` so that every node sees the same
// attempts: sign-in codes requested per address and per client, failed verifications,
// client registrations and device authorizations per client. Refused attempts are not
// recorded, so a blocked client's window ends on time.

export interface Limit {
  kind: string;
  max: number;
  windowMs: number;
}

const HOUR = 3600_000;
const QUARTER = 15 * 60_000;

export const LIMITS = {
  codeRequestPerEmail: { kind: 'code_request_email', max: 5, windowMs: HOUR },
  codeRequestPerIp: { kind: 'code_request_ip', max: 20, windowMs: HOUR },
  codeFailurePerEmail: { kind: 'code_failure_email', max: 10, windowMs: QUARTER },
  codeFailurePerIp: { kind: 'code_failure_ip', max: 30, windowMs: QUARTER },
  grantFailurePerIp: { kind: 'grant_failure_ip', max: 30, windowMs: QUARTER },
  registrationPerIp: { kind: 'oauth_register_ip', max: 30, windowMs: HOUR },
  deviceAuthorizationPerIp: { kind: 'oauth_device_ip', max: 60, windowMs: HOUR },
} satisfies Record<string, Limit>;

export { clientKey };

/** Throws RATE_LIMITED (with retry_after) when `subject` already has `max` attempts in the window. */
export async function assertUnderLimit(db: Kysely<DB>, limit: Limit, subject: string, now: Date): Promise<void> {
  const rows = await db
    .selectFrom('agent_auth_attempts')
    .select('created_at')
    .where('kind', '=', limit.kind)
    .where('subject', '=', subject)
    .where('created_at', '>', iso(now.getTime() - limit.windowMs))
    .orderBy('created_at', 'desc')
    .limit(limit.max)
    .execute();
  if (rows.length < limit.max) return;
  const retryAfter = Math.max(1, Math.ceil((Date.parse(rows[limit.max - 1]!.created_at) + limit.windowMs - now.getTime()) / 1000));
  throw new AppError('RATE_LIMITED', `Too many attempts; retry after ${retryAfter} seconds.`, { retry_after: retryAfter, limit: limit.kind, max: limit.max });
}

export async function recordAttempt(db: Kysely<DB>, limit: Limit, subject: string, now: Date): Promise<void> {
  await db.insertInto('agent_auth_attempts').values({ id: agentId('aat'), kind: limit.kind, subject, created_at: iso(now) }).execute();
}

/** Deletes spent agent-access rows: old attempts, used or expired codes, links and OAuth tokens. */
export async function sweepAgentAccess(db: Kysely<DB>, now: Date): Promise<void> {
  const dayAgo = iso(now.getTime() - 24 * HOUR);
  await db.deleteFrom('agent_auth_attempts').where('created_at', '<', dayAgo).execute();
  await db.deleteFrom('agent_sign_in_codes').where('expires_at', '<', dayAgo).execute();
  await db.deleteFrom('agent_grants').where('expires_at', '<', dayAgo).execute();
  await db.deleteFrom('browser_login_links').where('expires_at', '<', dayAgo).execute();
  await db.deleteFrom('oauth_device_codes').where('expires_at', '<', dayAgo).execute();
  await db.deleteFrom('oauth_auth_codes').where('expires_at', '<', dayAgo).execute();
  await db.deleteFrom('oauth_pending_authorizations').where('expires_at', '<', dayAgo).execute();
  // Rotated refresh tokens stay until they expire: a replay of one is how reuse is detected.
  await db.deleteFrom('oauth_tokens').where('expires_at', '<', dayAgo).execute();
}
