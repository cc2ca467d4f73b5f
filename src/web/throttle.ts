import { randomUUID } from 'node:crypto';
import { isIPv6 } from 'node:net';
import type { Kysely } from 'kysely';
import type { DB } from '../db/schema.ts';
import { normalizeEmail } from '../users/users.service.ts';
import { iso } from '../time.ts';

// Sign-in and sign-up throttling, kept in `sign_in_attempts` so that every node counts the
// same attempts. A refused attempt is not recorded (and checks no password), so a blocked
// client's window ends on time instead of sliding forward.
//
// Refusals are keyed by the client: failures per (email, client address) and per client
// address. Failures for an email from everywhere only slow sign-in down (a progressive delay
// before the password is checked), never refuse it: otherwise anyone could lock the owner
// of an address out from every network by sending five wrong passwords.
//
// An attempt is recorded (as a failure) before its password is checked and the limits are
// checked again with it counted (`claimSignIn`): otherwise guesses sent at once all pass the
// first check while the earlier ones are still being hashed.
//
// Sign-up attempts share the table: their `email` is SIGN_UP_MARKER, which no real address
// can equal (a colon is not allowed in the addresses we accept).

export const THROTTLE_WINDOW_MS = 15 * 60 * 1000;
/** Failures for one email from one client before that client is refused for that email. */
export const MAX_FAILURES_PER_EMAIL = 5;
export const MAX_FAILURES_PER_IP = 20;
export const MAX_SIGN_UPS_PER_IP = 10;
/** Failures for one email from all clients before each further attempt is delayed. */
export const EMAIL_DELAY_AFTER = 5;
const EMAIL_DELAY_BASE_MS = 250;
export const EMAIL_DELAY_MAX_MS = 5_000;
const SIGN_UP_MARKER = 'signup:';
// Rows are kept a day for investigation, then swept.
const KEEP_MS = 24 * 60 * 60 * 1000;

/** The client key for an address: IPv6 clients are grouped by /64, since one host usually holds a whole /64. */
export function clientKey(ip: string): string {
  const mapped = ip.match(/^::ffff:(\d+\.\d+\.\d+\.\d+)$/i);
  if (mapped) return mapped[1]!;
  if (!isIPv6(ip)) return ip;
  const [head = '', tail = ''] = ip.split('%')[0]!.split('::');
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  const groups = ip.includes('::') ? [...left, ...Array(8 - left.length - right.length).fill('0'), ...right] : left;
  return `${groups.slice(0, 4).map((g) => parseInt(g, 16).toString(16)).join(':')}::/64`;
}

/** Seconds until the `limit`-th most recent counted attempt leaves the window; null when under the limit. */
function retryAfter(newestFirst: string[], limit: number, now: Date): number | null {
  if (newestFirst.length < limit) return null;
  const ms = Date.parse(newestFirst[limit - 1]!) + THROTTLE_WINDOW_MS - now.getTime();
  return Math.max(1, Math.ceil(ms / 1000));
}

/** Failures in `newestFirst` (newest first) since the most recent success. */
function failuresSinceSuccess<T extends { created_at: string; succeeded: number }>(newestFirst: T[]): string[] {
  const lastSuccess = newestFirst.findIndex((r) => r.succeeded === 1);
  return (lastSuccess === -1 ? newestFirst : newestFirst.slice(0, lastSuccess)).map((r) => r.created_at);
}

/**
 * Seconds to wait before another sign-in attempt for this email from this client, or null.
 * Per (email, client), failures since the last successful sign-in from that client count; per
 * client, all failures. Failures from other clients never refuse (see `emailDelayMs`).
 */
export async function signInRetryAfter(db: Kysely<DB>, email: string, ip: string, now: Date, own = 0): Promise<number | null> {
  const since = iso(now.getTime() - THROTTLE_WINDOW_MS);
  const client = clientKey(ip);
  const [byPair, byIp] = await Promise.all([
    db
      .selectFrom('sign_in_attempts')
      .select(['created_at', 'succeeded'])
      .where('email', '=', normalizeEmail(email))
      .where('ip', '=', client)
      .where('created_at', '>', since)
      .orderBy('created_at', 'desc')
      .limit(MAX_FAILURES_PER_EMAIL * 4 + own)
      .execute(),
    db
      .selectFrom('sign_in_attempts')
      .select('created_at')
      .where('ip', '=', client)
      .where('succeeded', '=', 0)
      .where('email', '<>', SIGN_UP_MARKER)
      .where('created_at', '>', since)
      .orderBy('created_at', 'desc')
      .limit(MAX_FAILURES_PER_IP + own)
      .execute(),
  ]);
  const waits = [retryAfter(failuresSinceSuccess(byPair), MAX_FAILURES_PER_EMAIL + own, now), retryAfter(byIp.map((r) => r.created_at), MAX_FAILURES_PER_IP + own, now)];
  const blocked = waits.filter((w): w is number => w !== null);
  return blocked.length ? Math.max(...blocked) : null;
}

/**
 * How long to hold a sign-in for this email before checking its password: nothing until
 * EMAIL_DELAY_AFTER failures from all clients since the last success, then doubling with each
 * failure up to EMAIL_DELAY_MAX_MS. A slowdown, never a refusal.
 */
export async function emailDelayMs(db: Kysely<DB>, email: string, now: Date): Promise<number> {
  const rows = await db
    .selectFrom('sign_in_attempts')
    .select(['created_at', 'succeeded'])
    .where('email', '=', normalizeEmail(email))
    .where('created_at', '>', iso(now.getTime() - THROTTLE_WINDOW_MS))
    .orderBy('created_at', 'desc')
    .limit(EMAIL_DELAY_AFTER + 16)
    .execute();
  const over = failuresSinceSuccess(rows).length - EMAIL_DELAY_AFTER;
  return over < 0 ? 0 : Math.min(EMAIL_DELAY_MAX_MS, EMAIL_DELAY_BASE_MS * 2 ** over);
}

/**
 * Records a sign-in attempt as failed before its password is checked, then checks the limits
 * with it counted. Returns the attempt's id to settle with `attemptSucceeded` and the delay to
 * hold before checking the password, or the seconds to wait (the attempt is then removed
 * again, as if never made). Attempts racing for the last places may all be refused, never all
 * admitted.
 */
export async function claimSignIn(db: Kysely<DB>, email: string, ip: string, now: Date): Promise<{ id: string; delayMs: number } | { wait: number }> {
  const wait = await signInRetryAfter(db, email, ip, now);
  if (wait !== null) return { wait };
  // Measured before this attempt is counted: the first failure past the threshold is delayed.
  const delayMs = await emailDelayMs(db, email, now);
  const id = randomUUID();
  await db.insertInto('sign_in_attempts').values({ id, email: normalizeEmail(email), ip: clientKey(ip), succeeded: 0, created_at: iso(now) }).execute();
  const over = await signInRetryAfter(db, email, ip, now, 1);
  if (over === null) return { id, delayMs };
  await db.deleteFrom('sign_in_attempts').where('id', '=', id).execute();
  return { wait: over };
}

/** Records a failed second-factor code as a failed sign-in of that email from that client. */
export async function recordSignInFailure(db: Kysely<DB>, email: string, ip: string, now: Date): Promise<void> {
  await db.insertInto('sign_in_attempts').values({ id: randomUUID(), email: normalizeEmail(email), ip: clientKey(ip), succeeded: 0, created_at: iso(now) }).execute();
}

/** Marks a claimed sign-in (or sign-up) attempt as successful. */
export async function attemptSucceeded(db: Kysely<DB>, attemptId: string): Promise<void> {
  await db.updateTable('sign_in_attempts').set({ succeeded: 1 }).where('id', '=', attemptId).execute();
}

/** Seconds to wait before another sign-up from this client, or null. Every attempt counts. */
export async function signUpRetryAfter(db: Kysely<DB>, ip: string, now: Date, own = 0): Promise<number | null> {
  const rows = await db
    .selectFrom('sign_in_attempts')
    .select('created_at')
    .where('ip', '=', clientKey(ip))
    .where('email', '=', SIGN_UP_MARKER)
    .where('created_at', '>', iso(now.getTime() - THROTTLE_WINDOW_MS))
    .orderBy('created_at', 'desc')
    .limit(MAX_SIGN_UPS_PER_IP + own)
    .execute();
  return retryAfter(
    rows.map((r) => r.created_at),
    MAX_SIGN_UPS_PER_IP + own,
    now,
  );
}

/** As claimSignIn, for sign-ups: the attempt counts before the account is made. */
export async function claimSignUp(db: Kysely<DB>, ip: string, now: Date): Promise<{ id: string } | { wait: number }> {
  const wait = await signUpRetryAfter(db, ip, now);
  if (wait !== null) return { wait };
  const id = randomUUID();
  await db.insertInto('sign_in_attempts').values({ id, email: SIGN_UP_MARKER, ip: clientKey(ip), succeeded: 0, created_at: iso(now) }).execute();
  const over = await signUpRetryAfter(db, ip, now, 1);
  if (over === null) return { id };
  await db.deleteFrom('sign_in_attempts').where('id', '=', id).execute();
  return { wait: over };
}

/** Deletes attempts older than a day; for the worker's periodic sweep. */
export async function sweepSignInAttempts(db: Kysely<DB>, now: Date): Promise<number> {
  const res = await db.deleteFrom('sign_in_attempts').where('created_at', '<', iso(now.getTime() - KEEP_MS)).executeTakeFirst();
  return Number(res.numDeletedRows);
}
