import type { Transaction } from 'kysely';
import type { DB } from '../db/schema.ts';
import type { RequestCtx } from '../context.ts';
import { AppError, invalidArgument, type ErrorCode } from '../errors.ts';
import { assertMutable } from '../auth/access.ts';
import { limitsFor } from '../accounts/limits.service.ts';
import { billingGroupId } from '../accounts/accounts.service.ts';
import { isPaidPlan } from '../accounts/plans.ts';
import { recordActivity } from '../activity/activity.service.ts';
import { isUniqueViolation } from '../db/database.ts';
import { findMailbox } from '../mailboxes/mailboxes.repo.ts';
import { loadMailbox, type LoadedMailbox } from '../mailboxes/mailboxes.service.ts';
import { aliasesOf, lockBillingGroup, lockMailbox, pendingAssignments, primaryAddress } from './addresses.repo.ts';
import { aliasLimitError, commitPrimaryChange, rotationAllowed, rotationLimitError } from './commit.ts';
import { domainReceives, freeAddress, resolveTargetDomain } from './targets.ts';
import { queueAssignment } from './activation.ts';

// Address rotation on both surfaces. A platform-domain target commits at once (200); a custom
// domain target is recorded as a pending assignment and activated by a job (202). The old address
// stays current until the commit, which charges one rotation of the monthly allowance.

export type Surface = 'R' | 'A';

export interface RotateInput {
  accountId?: string | null;
  confirm: unknown;
  expectedAddress: string | undefined;
  username?: string | null;
  domain?: string | null;
  keepOldAsAlias?: boolean;
  reason?: string | null;
  surface: Surface;
  /** Records an idempotency key in the committing transaction (surface A). */
  record?: (trx: Transaction<DB>, resourceId: string) => Promise<void>;
}

export interface RotateResult {
  loaded: LoadedMailbox;
  /** True when a custom-domain change was queued (HTTP 202). */
  pending: boolean;
}

/** Surface A names the rotation conflicts differently; the meaning is the same. */
const SURFACE_A: Partial<Record<ErrorCode, ErrorCode>> = {
  EMAIL_ADDRESS_CHANGED: 'INBOUND_EMAIL_ADDRESS_CHANGED',
  EMAIL_ADDRESS_CHANGE_PENDING: 'INBOUND_EMAIL_ROTATION_UNAVAILABLE',
  EMAIL_DOMAIN_NOT_AVAILABLE: 'INBOUND_EMAIL_ROTATION_UNAVAILABLE',
  EMAIL_ADDRESS_TAKEN: 'INBOUND_EMAIL_ROTATION_UNAVAILABLE',
  MAILBOX_ARCHIVED: 'INBOUND_EMAIL_ROTATION_UNAVAILABLE',
};

export function forSurface(err: unknown, surface: Surface): unknown {
  if (surface !== 'A' || !(err instanceof AppError)) return err;
  const code = SURFACE_A[err.code];
  return code ? new AppError(code, undefined, { ...err.details, reason: err.code }) : err;
}

export async function rotateAddress(ctx: RequestCtx, mailboxId: string, input: RotateInput): Promise<RotateResult> {
  try {
    return await rotate(ctx, mailboxId, input);
  } catch (err) {
    throw forSurface(err, input.surface);
  }
}

async function rotate(ctx: RequestCtx, mailboxId: string, input: RotateInput): Promise<RotateResult> {
  const a = input.surface === 'A';
  const loaded = await loadMailbox(ctx, input.accountId, mailboxId, a ? 'write' : 'admin');
  const { mailbox: m, access } = loaded;
  const expectedField = a ? 'current_address' : 'expected_address';
  if (input.confirm !== true && input.confirm !== 'true') throw invalidArgument('confirm', 'must be true: rotation retires or replaces the current address');
  if (!input.expectedAddress?.trim()) throw invalidArgument(expectedField, 'is required: send the current address');
  assertMutable(access);
  if (m.archived_at) throw new AppError('MAILBOX_ARCHIVED', undefined, { mailbox_id: m.id });
  // Surface R rotation is a paid-plan feature; surface A's free allowance is one a month.
  if (!a && !isPaidPlan(access.account.plan)) throw new AppError('EMAIL_CUSTOMIZATION_UNAVAILABLE', undefined, { blocked_reason: 'paid_plan_required' });
  const current = await primaryAddress(ctx.db, m.id);
  if (!current || current.address !== input.expectedAddress.trim().toLowerCase()) {
    throw new AppError('EMAIL_ADDRESS_CHANGED', undefined, { mailbox_id: m.id, field: expectedField });
  }
  if ((await pendingAssignments(ctx.db, m.id)).some((p) => p.kind === 'primary')) throw new AppError('EMAIL_ADDRESS_CHANGE_PENDING', undefined, { mailbox_id: m.id });
  const limits = limitsFor(access.account);
  const groupId = billingGroupId(access.account);
  const now = ctx.now();
  if (!(await rotationAllowed(ctx.db, groupId, limits, now))) throw rotationLimitError(limits, now);

  const target = await resolveTargetDomain(ctx, access, input.domain, current.domain);
  const next = await freeAddress(ctx.db, target, a ? null : input.username, m.title, 'username');
  // Surface A has no keep_old_as_alias: a rotation there retires the old address.
  const keepDefault = !a && access.isAccountAdmin && (await domainReceives(ctx, access, current.domain));
  const keep = a ? false : (input.keepOldAsAlias ?? keepDefault);
  if (keep) {
    if (!access.isAccountAdmin) throw new AppError('PERMISSION_DENIED', 'Keeping the old address as an alias needs an account owner or administrator.', { field: 'keep_old_as_alias' });
    const slots = limits.max_email_aliases_per_mailbox;
    const held = (await aliasesOf(ctx.db, m.id)).length + (await pendingAssignments(ctx.db, m.id)).filter((p) => p.kind === 'alias').length;
    if (held >= slots) throw aliasLimitError(slots);
  }

  const activity = { accountId: m.account_id, action: 'mailbox.email.rotate', targetType: 'mailbox', targetId: m.id, reason: input.reason };
  if (!target.custom) {
    await ctx.db.transaction().execute(async (trx) => {
      await lockBillingGroup(trx, ctx.dialect, groupId);
      await lockMailbox(trx, ctx.dialect, m.id);
      await commitPrimaryChange(trx, { mailboxId: m.id, accountId: m.account_id, groupId, limits, oldAddress: current.address, next, keepOldAsAlias: keep, mailDomain: ctx.config.mailDomain, dialect: ctx.dialect, now });
      await input.record?.(trx, m.id);
      await recordActivity(trx, ctx.actor, now, activity);
    });
    return { loaded: { ...loaded, mailbox: (await findMailbox(ctx.db, m.account_id, m.id))! }, pending: false };
  }

  try {
    await ctx.db.transaction().execute(async (trx) => {
      await lockMailbox(trx, ctx.dialect, m.id);
      if ((await pendingAssignments(trx, m.id)).some((p) => p.kind === 'primary')) throw new AppError('EMAIL_ADDRESS_CHANGE_PENDING', undefined, { mailbox_id: m.id });
      await queueAssignment(ctx, trx, { mailboxId: m.id, accountId: m.account_id, kind: 'primary', next, oldAddress: current.address, keepOldAsAlias: keep, now });
      await input.record?.(trx, m.id);
      await recordActivity(trx, ctx.actor, now, activity);
    });
  } catch (err) {
    if (isUniqueViolation(err)) throw new AppError('EMAIL_ADDRESS_TAKEN', undefined, { field: 'username', domain: next.hostname });
    throw err;
  }
  return { loaded, pending: true };
}
