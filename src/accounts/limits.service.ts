import type { Kysely } from 'kysely';
import type { AccountsTable, DB } from '../db/schema.ts';
import { PLANS, type PlanLimits } from './plans.ts';
import { nextUtcMonthStart, utcMonthStart } from '../time.ts';
import { countGroupCreationsSince } from '../mailboxes/mailboxes.repo.ts';
import { billingGroupId } from './accounts.service.ts';

export function limitsFor(account: Pick<AccountsTable, 'plan'>): PlanLimits {
  return { ...PLANS[account.plan] };
}

/** Mailbox creations this UTC month, shared by the billing group. */
export async function mailboxCreationUsage(db: Kysely<DB>, account: AccountsTable, now: Date) {
  const monthly_limit = limitsFor(account).max_mailbox_creations_per_month;
  const used = await countGroupCreationsSince(db, billingGroupId(account), utcMonthStart(now));
  return {
    monthly_limit,
    used,
    remaining: monthly_limit === null ? null : Math.max(0, monthly_limit - used),
    resets_at: nextUtcMonthStart(now),
  };
}
