import type { Kysely } from 'kysely';
import type { DB } from '../db/schema.ts';
import type { AppDeps } from '../context.ts';
import { AppError } from '../errors.ts';
import { newId } from '../ids.ts';
import { iso } from '../time.ts';
import './domains.schema.ts';

// The domain setup rate limit: claim, check and verify each cost one request (site domains'
// add and verify share the same allowance); an account may
// make CUBBY_DOMAIN_SETUP_LIMIT of them in any sliding hour. Counted in the database so that
// every API node sees the same window.

const WINDOW_MS = 60 * 60 * 1000;

/** Counts one setup request, or throws 429 with the seconds until the oldest one leaves the window. */
export async function hitSetupLimit(deps: AppDeps, accountId: string, code: 'EMAIL_DOMAIN_SETUP_RATE_LIMITED' | 'SITE_DOMAIN_SETUP_RATE_LIMITED' = 'EMAIL_DOMAIN_SETUP_RATE_LIMITED'): Promise<void> {
  const now = deps.now();
  const since = iso(now.getTime() - WINDOW_MS);
  const limit = deps.config.domainSetupLimitPerHour;
  const recent = await deps.db
    .selectFrom('email_domain_setup_requests')
    .select('created_at')
    .where('account_id', '=', accountId)
    .where('created_at', '>', since)
    .orderBy('created_at', 'desc')
    .limit(limit)
    .execute();
  if (recent.length >= limit) {
    const oldest = Date.parse(recent.at(-1)!.created_at);
    const retryAfter = Math.max(1, Math.ceil((oldest + WINDOW_MS - now.getTime()) / 1000));
    throw new AppError(code, undefined, { retry_after: retryAfter, limit: code === 'SITE_DOMAIN_SETUP_RATE_LIMITED' ? 'domain_setup_requests_per_hour' : 'email_domain_setup_requests_per_hour', max: limit });
  }
  await deps.db.insertInto('email_domain_setup_requests').values({ id: newId('dsr'), account_id: accountId, created_at: iso(now) }).execute();
}

/** Drops requests older than a day (the window is an hour). */
export async function sweepSetupRequests(db: Kysely<DB>, now: Date): Promise<void> {
  await db.deleteFrom('email_domain_setup_requests').where('created_at', '<', iso(now.getTime() - 24 * WINDOW_MS)).execute();
}
