import { sql, type Kysely } from 'kysely';
import type { DB } from '../db/schema.ts';
import type { Dialect } from '../db/database.ts';
import type { PlanLimits } from '../accounts/plans.ts';
import { AppError } from '../errors.ts';
import { iso, nextUtcMonthStart } from '../time.ts';
import { usagePeriod } from '../inbound/usage.ts';

/**
 * The monthly recipient allowance (max_sent_emails_per_month): each distinct recipient counts once
 * per billing period (UTC month), shared by the billing group. Runs in the send transaction with the
 * group's account row locked (Postgres), so concurrent sends of one group cannot both take the last
 * places. Refuses the whole send when its new recipients do not fit.
 */
export async function takeRecipientAllowance(trx: Kysely<DB>, dialect: Dialect, groupId: string, limits: PlanLimits, addresses: string[], now: Date): Promise<void> {
  if (dialect === 'postgres') await sql`select id from accounts where id = ${groupId} for update`.execute(trx);
  const period = usagePeriod(now);
  const known = new Set(
    (await trx.selectFrom('sent_recipients_usage').select('address').where('scope_id', '=', groupId).where('period', '=', period).where('address', 'in', addresses).execute()).map((r) => r.address),
  );
  const fresh = addresses.filter((a) => !known.has(a));
  if (!fresh.length) return;
  const max = limits.max_sent_emails_per_month;
  if (max !== null) {
    const used = await sentRecipientCount(trx, groupId, now);
    if (used + fresh.length > max) {
      throw new AppError('EMAIL_SEND_LIMIT_REACHED', undefined, { limit: 'max_sent_emails_per_month', max, used, new_recipients: fresh.length, resets_at: nextUtcMonthStart(now) });
    }
  }
  await trx
    .insertInto('sent_recipients_usage')
    .values(fresh.map((address) => ({ scope_id: groupId, period, address, created_at: iso(now) })))
    .onConflict((oc) => oc.columns(['scope_id', 'period', 'address']).doNothing())
    .execute();
}

export async function sentRecipientCount(db: Kysely<DB>, groupId: string, now: Date): Promise<number> {
  const row = await db
    .selectFrom('sent_recipients_usage')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('scope_id', '=', groupId)
    .where('period', '=', usagePeriod(now))
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/**
 * Per-mailbox send rate: at most `perHour` sent emails in any trailing hour. Checked in the send
 * transaction after the mailbox row is locked. 429 without Retry-After (spec): the client waits
 * and sends later; it must not retry in a loop.
 */
export async function assertSendRate(trx: Kysely<DB>, mailboxId: string, perHour: number, now: Date): Promise<void> {
  const row = await trx
    .selectFrom('emails')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('mailbox_id', '=', mailboxId)
    .where('direction', '=', 'sent')
    .where('received_at', '>', iso(now.getTime() - 3_600_000))
    .executeTakeFirstOrThrow();
  if (Number(row.n) >= perHour) throw new AppError('EMAIL_SEND_RATE_LIMITED', undefined, { limit: perHour, window_seconds: 3600 });
}
