import type { Kysely } from 'kysely';
import type { DB } from '../db/schema.ts';
import type { Actor } from '../context.ts';
import { AppError, invalidArgument } from '../errors.ts';
import { newId } from '../ids.ts';
import { iso } from '../time.ts';
import { PLANS } from '../accounts/plans.ts';

export const MAX_REASON_LENGTH = 500;

// Patterns of credentials people paste by mistake; a reason holding one is refused
// so that activity history never stores a secret.
const SECRET_PATTERNS = [
  /cubby_[A-Za-z0-9]{16,}/,
  /whsec_[A-Za-z0-9+/=]{8,}/,
  /gitwh_[A-Za-z0-9_-]{16,}/,
  /\bBearer\s+[A-Za-z0-9._~+/-]{16,}/i,
  /\bsk-[A-Za-z0-9_-]{16,}/,
  /\b(AKIA|ASIA)[A-Z0-9]{16}\b/,
  /-----BEGIN [A-Z ]*PRIVATE KEY-----/,
  /\bgh[pousr]_[A-Za-z0-9]{20,}/,
  /\bxox[abpr]-[A-Za-z0-9-]{10,}/,
  /\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}/,
];

/** Validates an optional `reason`; returns the value to store. */
export function checkReason(reason: unknown): string | null {
  if (reason === undefined || reason === null) return null;
  if (typeof reason !== 'string') throw invalidArgument('reason', 'must be a string or null');
  if (reason.length > MAX_REASON_LENGTH) throw invalidArgument('reason', `must be at most ${MAX_REASON_LENGTH} characters`, { max_length: MAX_REASON_LENGTH });
  if (SECRET_PATTERNS.some((p) => p.test(reason))) throw new AppError('REASON_CONTAINS_SECRET', undefined, { field: 'reason' });
  return reason.trim() || null;
}

export interface ActivityInput {
  accountId: string;
  action: string;
  targetType: string;
  targetId: string | null;
  reason?: string | null;
}

/** Records one mutation; call inside the mutation's transaction. */
export async function recordActivity(db: Kysely<DB>, actor: Actor, now: Date, input: ActivityInput): Promise<void> {
  await db
    .insertInto('activity')
    .values({
      id: newId('act'),
      account_id: input.accountId,
      user_id: actor.userId,
      api_key_id: actor.apiKeyId,
      agent: actor.agent ? JSON.stringify(actor.agent) : null,
      action: input.action,
      target_type: input.targetType,
      target_id: input.targetId,
      reason: input.reason ?? null,
      request_id: actor.requestId,
      created_at: iso(now),
    })
    .execute();
}

/** Deletes activity older than each account's plan retention. Returns rows removed. */
export async function sweepActivity(db: Kysely<DB>, now: Date): Promise<number> {
  let removed = 0;
  for (const [plan, limits] of Object.entries(PLANS)) {
    if (limits.audit_retention_days === null) continue;
    const cutoff = iso(now.getTime() - limits.audit_retention_days * 86_400_000);
    const res = await db
      .deleteFrom('activity')
      .where('created_at', '<', cutoff)
      .where('account_id', 'in', db.selectFrom('accounts').select('id').where('plan', '=', plan as any))
      .executeTakeFirst();
    removed += Number(res.numDeletedRows ?? 0);
  }
  return removed;
}
