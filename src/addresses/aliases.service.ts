import type { RequestCtx } from '../context.ts';
import { AppError, invalidArgument } from '../errors.ts';
import { assertMutable } from '../auth/access.ts';
import { limitsFor } from '../accounts/limits.service.ts';
import { isPaidPlan } from '../accounts/plans.ts';
import { recordActivity } from '../activity/activity.service.ts';
import { isUniqueViolation } from '../db/database.ts';
import { iso } from '../time.ts';
import { loadMailbox, type LoadedMailbox } from '../mailboxes/mailboxes.service.ts';
import { aliasesOf, lockMailbox, pendingAssignments, primaryAddress } from './addresses.repo.ts';
import { aliasLimitError } from './commit.ts';
import { freeAddress, resolveTargetDomain } from './targets.ts';
import { queueAssignment } from './activation.ts';

// Aliases: more addresses that deliver to the same mailbox. Adding one is accepted (202) as a
// pending assignment that a job activates; deleting one retires it at once (the address stays
// reserved, saved emails stay).

export async function addAlias(ctx: RequestCtx, mailboxId: string, input: { accountId?: string | null; username: string; domain?: string | null; reason?: string | null }): Promise<LoadedMailbox> {
  const loaded = await loadMailbox(ctx, input.accountId, mailboxId, 'admin');
  const { mailbox: m, access } = loaded;
  assertMutable(access);
  if (!access.isAccountAdmin || ctx.credential.mailboxAccess !== 'all') {
    throw new AppError('PERMISSION_DENIED', 'Adding aliases needs a full-account owner or administrator credential.', { required: 'account_admin' });
  }
  if (m.archived_at) throw new AppError('MAILBOX_ARCHIVED', undefined, { mailbox_id: m.id });
  if (!isPaidPlan(access.account.plan)) throw new AppError('EMAIL_CUSTOMIZATION_UNAVAILABLE', undefined, { blocked_reason: 'paid_plan_required' });
  if (!input.username?.trim()) throw invalidArgument('username', 'is required');
  const primary = await primaryAddress(ctx.db, m.id);
  const target = await resolveTargetDomain(ctx, access, input.domain, primary?.domain ?? ctx.config.mailDomain);
  const next = await freeAddress(ctx.db, target, input.username, m.title, 'username');
  const max = limitsFor(access.account).max_email_aliases_per_mailbox;
  const now = ctx.now();
  try {
    await ctx.db.transaction().execute(async (trx) => {
      await lockMailbox(trx, ctx.dialect, m.id);
      // Pending adds hold their slot: the allowance cannot be overrun by adding many at once.
      const held = (await aliasesOf(trx, m.id)).length + (await pendingAssignments(trx, m.id)).filter((p) => p.kind === 'alias').length;
      if (held >= max) throw aliasLimitError(max);
      await queueAssignment(ctx, trx, { mailboxId: m.id, accountId: m.account_id, kind: 'alias', next, oldAddress: null, keepOldAsAlias: false, now });
      await recordActivity(trx, ctx.actor, now, { accountId: m.account_id, action: 'mailbox.email.alias_add', targetType: 'mailbox', targetId: m.id, reason: input.reason });
    });
  } catch (err) {
    if (isUniqueViolation(err)) throw new AppError('EMAIL_ADDRESS_TAKEN', undefined, { field: 'username', domain: next.hostname });
    throw err;
  }
  return loaded;
}

/** Retires an alias: RCPT answers 550 for it from now on. */
export async function deleteAlias(ctx: RequestCtx, mailboxId: string, aliasId: string, input: { accountId?: string | null; reason?: string | null }) {
  const { mailbox: m, access } = await loadMailbox(ctx, input.accountId, mailboxId, 'admin');
  assertMutable(access);
  const now = ctx.now();
  await ctx.db.transaction().execute(async (trx) => {
    const res = await trx
      .updateTable('email_addresses')
      .set({ role: 'retired', retired_at: iso(now) })
      .where('id', '=', aliasId)
      .where('mailbox_id', '=', m.id)
      .where('role', '=', 'alias')
      .executeTakeFirst();
    if (Number(res.numUpdatedRows) === 0) throw new AppError('EMAIL_ALIAS_NOT_FOUND', undefined, { alias_id: aliasId });
    await recordActivity(trx, ctx.actor, now, { accountId: m.account_id, action: 'mailbox.email.alias_delete', targetType: 'mailbox', targetId: m.id, reason: input.reason });
  });
  return { deleted: true as const, id: aliasId };
}
