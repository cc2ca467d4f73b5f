import type { RequestCtx } from '../context.ts';
import type { AccountAccess, Permissions } from '../auth/access.ts';
import type { LoadedMailbox } from '../mailboxes/mailboxes.service.ts';
import type { MailboxRow } from '../mailboxes/mailboxes.repo.ts';
import { mailboxEmail, presentInboundEmail } from '../mailboxes/mailboxes.present.ts';
import { limitsFor } from '../accounts/limits.service.ts';
import { billingGroupId } from '../accounts/accounts.service.ts';
import { isPaidPlan } from '../accounts/plans.ts';
import { nextUtcMonthStart, utcMonthStart } from '../time.ts';
import { readyDomainsOf } from '../domains/domains.repo.ts';
import { domainsEnabled } from '../domains/domains.service.ts';
import { aliasesOf, countGroupRotationsSince, latestAssignment, primaryAddress, type AssignmentRow } from './addresses.repo.ts';

// The email settings object (surface R read, rotate, alias add) and surface A's full
// BucketInboundEmail: the MailboxEmail fields plus addresses, domains, assignment and allowlist.

export const MAX_ALLOWLIST_ENTRIES = 100;
/** The allowlist version before its first update (the column is null until then). */
export const INITIAL_ALLOWLIST_VERSION = '0';

function accountBlock(access: AccountAccess): string | null {
  if (access.account.suspended_at) return 'account_suspended';
  if (access.account.status === 'read_only') return 'account_read_only';
  return null;
}

/** Can this caller change the address (rotate) of this mailbox, and if not, why not. */
export function customization(ctx: RequestCtx, m: MailboxRow, perms: Permissions, access: AccountAccess) {
  const blocked = accountBlock(access) ?? (m.archived_at ? 'mailbox_archived' : !isPaidPlan(access.account.plan) ? 'paid_plan_required' : !perms.admin ? 'admin_required' : null);
  return { allowed: blocked === null, blocked_reason: blocked, settings_url: access.isAccountAdmin ? `${ctx.publicUrl()}/settings` : null };
}

export function presentAllowlist(m: MailboxRow, perms: Permissions, access: AccountAccess) {
  return {
    enabled: m.allowlist_enabled === 1,
    entries: JSON.parse(m.allowlist_entries) as string[],
    version: m.allowlist_version ?? INITIAL_ALLOWLIST_VERSION,
    max_entries: MAX_ALLOWLIST_ENTRIES,
    editable: access.isAccountAdmin && perms.admin && accountBlock(access) === null && m.archived_at === null,
  };
}

/** Assignment: no candidate address is ever shown, only the domain it is for. */
export function presentAssignment(a: AssignmentRow | undefined) {
  if (!a) return null;
  return { id: a.id, kind: a.kind, status: a.status, hostname: a.hostname, error: a.error ? JSON.parse(a.error) : null, created_at: a.created_at, finished_at: a.finished_at };
}

async function rotationUsage(ctx: RequestCtx, access: AccountAccess) {
  const now = ctx.now();
  const monthly_limit = limitsFor(access.account).max_email_address_rotations_per_month;
  const used = await countGroupRotationsSince(ctx.db, billingGroupId(access.account), utcMonthStart(now));
  return { monthly_limit, used, remaining: monthly_limit === null ? null : Math.max(0, monthly_limit - used), resets_at: nextUtcMonthStart(now) };
}

async function addressFacts(ctx: RequestCtx, loaded: LoadedMailbox) {
  const { mailbox: m, access } = loaded;
  const maxAliases = limitsFor(access.account).max_email_aliases_per_mailbox;
  const [primary, aliases, assignment, custom, rotations] = await Promise.all([
    primaryAddress(ctx.db, m.id),
    aliasesOf(ctx.db, m.id),
    latestAssignment(ctx.db, m.id),
    domainsEnabled(access.account) ? readyDomainsOf(ctx.db, access.account.id) : Promise.resolve([]),
    rotationUsage(ctx, access),
  ]);
  return {
    primary,
    fields: {
      username: primary?.local_part ?? null,
      aliases: aliases.map((a, i) => ({ id: a.id, address: a.address, active: i < maxAliases })),
      available_domains: [{ hostname: ctx.config.mailDomain, kind: 'platform' as const }, ...custom.map((d) => ({ hostname: d.hostname, kind: 'custom' as const }))],
      assignment: presentAssignment(assignment),
      customization: customization(ctx, m, loaded.perms, access),
      rotations,
    },
  };
}

/** The surface R settings object. The caller has write permission (the address is shown). */
export async function emailSettings(ctx: RequestCtx, loaded: LoadedMailbox) {
  const { mailbox: m, perms, access } = loaded;
  const facts = await addressFacts(ctx, loaded);
  return {
    ...mailboxEmail(m, perms, access),
    ...facts.fields,
    ...(access.isAccountAdmin && perms.admin ? { sender_allowlist: presentAllowlist(m, perms, access) } : {}),
  };
}

/** Surface A's BucketInboundEmail on authorized reads: address, state, activity, and the same address facts. */
export async function inboundEmailSettings(ctx: RequestCtx, loaded: LoadedMailbox) {
  const { mailbox: m, access } = loaded;
  const facts = await addressFacts(ctx, loaded);
  const { username: _username, ...fields } = facts.fields;
  return { ...presentInboundEmail(m, access, true), ...fields };
}
