import type { RequestCtx } from '../context.ts';
import type { AccountAccess } from '../auth/access.ts';
import type { AccountsTable } from '../db/schema.ts';
import { AppError, invalidArgument } from '../errors.ts';
import { assertMutable, selectAccount } from '../auth/access.ts';
import { limitsFor } from '../accounts/limits.service.ts';
import { billingGroupId } from '../accounts/accounts.service.ts';
import { recordActivity } from '../activity/activity.service.ts';
import { isUniqueViolation } from '../db/database.ts';
import { decodeCursor, toPage } from '../http/cursor.ts';
import { newId, randomToken } from '../ids.ts';
import { iso } from '../time.ts';
import { lockBillingGroup } from '../addresses/addresses.repo.ts';
import { DnsUnavailable, dnsUnavailableError, domainResolver, mxExchanges, zoneOf } from './dns.ts';
import { normalizeHostname, rootGuidance, suggestedSubdomain } from './hostnames.ts';
import { hitSetupLimit } from './setup-limit.ts';
import { assignedMailboxes, countGroupDomains, findClaim, findDomain, lockClaim, pendingAssignmentsOn, type DomainRow } from './domains.repo.ts';

// Custom receiving domains: claim, check, read, list, verify (queued) and remove. Every
// operation needs a full-account owner or administrator credential; changes need mailbox_admin.

export const SETUP_WINDOW_MS = 7 * 24 * 60 * 60 * 1000;
export const VERIFY_TASK = 'domains.verify';
export const REMOVE_TASK = 'domains.remove';

export function domainsEnabled(account: Pick<AccountsTable, 'plan'>): boolean {
  return limitsFor(account).max_email_domains !== 0;
}

async function domainAccess(ctx: RequestCtx, accountId: string | undefined | null, change: boolean): Promise<AccountAccess> {
  const access = await selectAccount(ctx.db, ctx.credential, accountId);
  if (!access.isAccountAdmin || ctx.credential.mailboxAccess !== 'all') {
    throw new AppError('PERMISSION_DENIED', 'Email domains need a full-account owner or administrator credential.', { required: 'account_admin' });
  }
  if (change) {
    if (!access.permissions.admin) throw new AppError('PERMISSION_DENIED', 'Changing email domains needs the mailbox_admin scope.', { required: 'admin' });
    assertMutable(access);
  }
  return access;
}

function requireEnabled(access: AccountAccess): void {
  if (!domainsEnabled(access.account)) throw new AppError('EMAIL_DOMAINS_NOT_ENABLED', undefined, { account_id: access.account.id });
}

async function withDns<T>(run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (err) {
    if (err instanceof DnsUnavailable) throw dnsUnavailableError(err);
    throw err;
  }
}

/** MX hosts at the hostname other than ours: mail for it goes elsewhere today. */
async function foreignMx(ctx: RequestCtx, hostname: string): Promise<string[]> {
  return (await mxExchanges(domainResolver(ctx), hostname)).filter((x) => x !== ctx.config.mxHost);
}

/**
 * A claim another account may take over: one whose setup failed (its window passed without the
 * records being published). Without this, anyone could claim a hostname they do not own and keep
 * its real owner out for ever; a failed claim never had an address on it (addresses need ready).
 */
function releasable(claim: DomainRow, accountId: string): boolean {
  return claim.account_id !== accountId && claim.status === 'failed';
}

export interface DomainView {
  domain: DomainRow;
  assigned: { id: string; email: string }[];
}

async function view(ctx: RequestCtx, d: DomainRow): Promise<DomainView> {
  return { domain: d, assigned: d.status === 'removed' ? [] : await assignedMailboxes(ctx.db, d.hostname) };
}

export async function listDomains(ctx: RequestCtx, input: { accountId?: string | null; limit: number; cursor?: string }) {
  const access = await domainAccess(ctx, input.accountId, false);
  const filters = { account: access.account.id };
  const after = input.cursor ? (decodeCursor(ctx.secret, input.cursor, 'email_domains', filters)[0] as string) : null;
  let q = ctx.db.selectFrom('email_domains').selectAll().where('account_id', '=', access.account.id).where('status', '!=', 'removed');
  if (after) q = q.where('id', '>', after);
  const rows = await q.orderBy('id').limit(input.limit + 1).execute();
  const page = toPage(rows, input.limit, (r) => [r.id], { secret: ctx.secret, list: 'email_domains', filters });
  const views = await Promise.all(page.items.map((d) => view(ctx, d)));
  return { enabled: domainsEnabled(access.account), views, pagination: page.pagination };
}

export async function getDomain(ctx: RequestCtx, id: string, input: { accountId?: string | null }): Promise<DomainView> {
  const access = await domainAccess(ctx, input.accountId, false);
  const d = await findDomain(ctx.db, access.account.id, id);
  if (!d) throw new AppError('EMAIL_DOMAIN_NOT_FOUND', undefined, { domain_id: id });
  return view(ctx, d);
}

/** Root domain or subdomain, and what to claim instead; claims nothing and changes no DNS. */
export async function checkHostname(ctx: RequestCtx, input: { accountId?: string | null; hostname: string }) {
  const access = await domainAccess(ctx, input.accountId, false);
  requireEnabled(access);
  const host = normalizeHostname(input.hostname, ctx.config.mailDomain);
  await hitSetupLimit(ctx, access.account.id);
  const [zone, foreign] = await withDns(async () => [await zoneOf(domainResolver(ctx), host), await foreignMx(ctx, host)] as const);
  const found = await findClaim(ctx.db, host);
  const claim = found && !releasable(found, access.account.id) ? found : undefined;
  const root = zone === host;
  return {
    hostname: host,
    root_domain: root,
    suggested_subdomain: root ? suggestedSubdomain(host) : null,
    root_guidance: root ? rootGuidance(host) : null,
    zone,
    available: !claim && foreign.length === 0,
    unavailable_reason: claim ? 'already_claimed' : foreign.length ? 'existing_mx' : null,
  };
}

export async function claimDomain(ctx: RequestCtx, input: { accountId?: string | null; hostname: string; reason?: string | null }): Promise<DomainView> {
  const access = await domainAccess(ctx, input.accountId, true);
  requireEnabled(access);
  const host = normalizeHostname(input.hostname, ctx.config.mailDomain);
  await hitSetupLimit(ctx, access.account.id);
  const claimed = () => {
    return new AppError('EMAIL_DOMAIN_CONFLICT', `${host} is claimed already.`, { reason: 'already_claimed', hostname: host });
  };
  const existing = await findClaim(ctx.db, host);
  if (existing && !releasable(existing, access.account.id)) throw claimed();
  const [zone, foreign] = await withDns(async () => [await zoneOf(domainResolver(ctx), host), await foreignMx(ctx, host)] as const);
  if (foreign.length) {
    throw new AppError('EMAIL_DOMAIN_CONFLICT', `${host} already has MX records, so its mail goes elsewhere; claim a subdomain such as ${suggestedSubdomain(host)}.`, {
      reason: 'existing_mx',
      hostname: host,
      mx: foreign,
      suggested_subdomain: suggestedSubdomain(host),
    });
  }
  const limits = limitsFor(access.account);
  const groupId = billingGroupId(access.account);
  const now = ctx.now();
  const row: DomainRow = {
    id: newId('dom'),
    account_id: access.account.id,
    hostname: host,
    claim_key: host,
    zone,
    status: 'pending_ownership',
    ownership_token: randomToken(32),
    provider_token: randomToken(32),
    error: null,
    pause_reason: null,
    paused_at: null,
    last_checked_at: null,
    ownership_verified_at: null,
    setup_expires_at: iso(now.getTime() + SETUP_WINDOW_MS),
    ready_at: null,
    removed_at: null,
    created_at: iso(now),
    updated_at: iso(now),
  };
  try {
    await ctx.db.transaction().execute(async (trx) => {
      await lockBillingGroup(trx, ctx.dialect, groupId);
      const max = limits.max_email_domains;
      if (max !== null && (await countGroupDomains(trx, groupId)) >= max) {
        throw new AppError('EMAIL_DOMAIN_LIMIT_REACHED', `The plan allows ${max} custom email domains.`, { limit: 'max_email_domains', max });
      }
      const held = await lockClaim(trx, ctx.dialect, host);
      if (held && !releasable(held, access.account.id)) throw claimed();
      if (held) {
        await trx.updateTable('email_domains').set({ status: 'removed', claim_key: null, removed_at: iso(now), updated_at: iso(now) }).where('id', '=', held.id).where('status', '=', 'failed').execute();
      }
      await trx.insertInto('email_domains').values(row).execute();
      await recordActivity(trx, ctx.actor, now, { accountId: access.account.id, action: 'email_domain.claim', targetType: 'email_domain', targetId: row.id, reason: input.reason });
    });
  } catch (err) {
    if (isUniqueViolation(err)) throw claimed();
    throw err;
  }
  return { domain: row, assigned: [] };
}

/** Queues a DNS check (ownership, provider record, MX); a failed setup gets a new window. */
export async function requestVerify(ctx: RequestCtx, id: string, input: { accountId?: string | null; reason?: string | null }): Promise<DomainView> {
  const access = await domainAccess(ctx, input.accountId, true);
  requireEnabled(access);
  const d = await findDomain(ctx.db, access.account.id, id);
  if (!d || d.status === 'removing') throw new AppError('EMAIL_DOMAIN_NOT_FOUND', undefined, { domain_id: id });
  await hitSetupLimit(ctx, access.account.id);
  const now = ctx.now();
  await ctx.db.transaction().execute(async (trx) => {
    if (d.status === 'failed') {
      await trx
        .updateTable('email_domains')
        .set({ status: 'pending_ownership', error: null, setup_expires_at: iso(now.getTime() + SETUP_WINDOW_MS), updated_at: iso(now) })
        .where('id', '=', d.id)
        .where('status', '=', 'failed')
        .execute();
    }
    await ctx.jobs.enqueue(trx, VERIFY_TASK, { domain_id: d.id }, { uniqueKey: `${VERIFY_TASK}:${d.id}`, maxAttempts: 5 });
    await recordActivity(trx, ctx.actor, now, { accountId: access.account.id, action: 'email_domain.verify', targetType: 'email_domain', targetId: d.id, reason: input.reason });
  });
  // Taken over by another account meanwhile (its setup had failed): gone, like a missing id.
  const after = await findDomain(ctx.db, access.account.id, id);
  if (!after) throw new AppError('EMAIL_DOMAIN_NOT_FOUND', undefined, { domain_id: id });
  return view(ctx, after);
}

/**
 * Removes a domain that no address uses. `queued` (surface A): the domain turns `removing` at
 * once (no new address can use it) and a job finishes the removal.
 */
export async function deleteDomain(
  ctx: RequestCtx,
  id: string,
  input: { accountId?: string | null; hostname: string | undefined; confirm: unknown; queued: boolean; reason?: string | null },
): Promise<DomainView> {
  const access = await domainAccess(ctx, input.accountId, true);
  const d = await findDomain(ctx.db, access.account.id, id);
  if (!d) throw new AppError('EMAIL_DOMAIN_NOT_FOUND', undefined, { domain_id: id });
  if (input.hostname === undefined || input.hostname.trim().toLowerCase().replace(/\.$/, '') !== d.hostname) {
    throw invalidArgument('hostname', "must be given and equal the domain's hostname", { hostname: d.hostname });
  }
  if (input.confirm !== true && input.confirm !== 'true') throw invalidArgument('confirm', 'must be true');
  if (d.status === 'removing') return view(ctx, d);
  const now = ctx.now();
  await ctx.db.transaction().execute(async (trx) => {
    await lockClaim(trx, ctx.dialect, d.hostname);
    const assigned = await assignedMailboxes(trx, d.hostname);
    const pending = await pendingAssignmentsOn(trx, d.hostname);
    if (assigned.length || pending) {
      throw new AppError('EMAIL_DOMAIN_IN_USE', undefined, { domain_id: d.id, hostname: d.hostname, assigned_mailboxes: assigned, pending_assignments: pending });
    }
    if (input.queued) {
      await trx.updateTable('email_domains').set({ status: 'removing', updated_at: iso(now) }).where('id', '=', d.id).execute();
      await ctx.jobs.enqueue(trx, REMOVE_TASK, { domain_id: d.id }, { uniqueKey: `${REMOVE_TASK}:${d.id}` });
    } else {
      await trx.updateTable('email_domains').set({ status: 'removed', claim_key: null, removed_at: iso(now), updated_at: iso(now) }).where('id', '=', d.id).execute();
    }
    await recordActivity(trx, ctx.actor, now, { accountId: access.account.id, action: 'email_domain.delete', targetType: 'email_domain', targetId: d.id, reason: input.reason });
  });
  return { domain: (await ctx.db.selectFrom('email_domains').selectAll().where('id', '=', d.id).executeTakeFirstOrThrow()), assigned: [] };
}
