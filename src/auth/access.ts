import type { Kysely } from 'kysely';
import type { AccountsTable, DB, MembershipRole, Scope } from '../db/schema.ts';
import { AppError } from '../errors.ts';
import type { Credential } from './credential.ts';
import { compiledListQuery } from '../db/compiled-query.ts';

// Tenancy is decided here and only here: which accounts a credential reaches,
// with which role, and what it may do there. Every adapter goes through it.

export interface Permissions {
  read: boolean;
  write: boolean;
  admin: boolean;
}

export interface AccountAccess {
  account: AccountsTable;
  role: MembershipRole;
  /** Account-level permissions: the key's scope capped by the person's role. */
  permissions: Permissions;
  /** True when the person is an owner or administrator of the account (or owns its agency). */
  isAccountAdmin: boolean;
  /** A collaborator limited to chosen mailboxes (membership_mailboxes): their ids; null for all. */
  mailboxLimit: string[] | null;
}

export interface Reachable {
  account: AccountsTable;
  role: MembershipRole;
  mailboxLimit: string[] | null;
}

const ID_SHAPE = /^acct_[A-Za-z0-9]{1,64}$/;

function scopePermissions(scope: Scope): Permissions {
  return { read: true, write: scope !== 'mailbox_read', admin: scope === 'mailbox_admin' };
}

function capByRole(p: Permissions, role: MembershipRole): Permissions {
  // Collaborators work with mailboxes but never administer them.
  return role === 'collaborator' ? { ...p, admin: false } : p;
}

/**
 * Collaborators may be limited to chosen mailboxes of an account (set when invited, changed on
 * the members page): for each of `collaboratingIn` (accounts where the person is a collaborator)
 * with such a limit, its mailbox ids. Accounts without an entry are not limited.
 */
export async function collaboratorLimits(db: Kysely<DB>, userId: string, collaboratingIn: string[]): Promise<Map<string, string[]>> {
  const limits = new Map<string, string[]>();
  if (!collaboratingIn.length) return limits;
  const rows = await db.selectFrom('membership_mailboxes').select(['account_id', 'mailbox_id']).where('user_id', '=', userId).where('account_id', 'in', collaboratingIn).execute();
  for (const r of rows) limits.set(r.account_id, [...(limits.get(r.account_id) ?? []), r.mailbox_id]);
  return limits;
}

/**
 * For a person choosing among mailboxes (dashboard forms): per account, the mailbox ids they are
 * limited to, or no entry for every mailbox. Memberships decide, as in reachableAccounts.
 */
export async function personMailboxLimits(db: Kysely<DB>, userId: string, accountIds: string[]): Promise<Map<string, string[]>> {
  if (!accountIds.length) return new Map();
  const collaborating = await db.selectFrom('memberships').select('account_id').where('user_id', '=', userId).where('role', '=', 'collaborator').where('account_id', 'in', accountIds).execute();
  return collaboratorLimits(db, userId, collaborating.map((m) => m.account_id));
}

// Run for every request that selects an account (all but a few): built once per number of granted
// accounts (src/db/compiled-query.ts).
const GRANTED_ACCOUNTS = compiledListQuery(
  (db, ids: string[], userId: string) =>
    db
      .selectFrom('accounts')
      .innerJoin('memberships', (j) => j.onRef('memberships.account_id', '=', 'accounts.id').on('memberships.user_id', '=', userId))
      .selectAll('accounts')
      .select('memberships.role as role')
      .where('accounts.id', 'in', ids),
  1,
);

/**
 * Every account the credential can select, with the person's role there.
 * Granted accounts need a live membership; client accounts of a granted agency are
 * reached only by whole-account keys of the agency's owners.
 */
export async function reachableAccounts(db: Kysely<DB>, cred: Credential): Promise<Map<string, Reachable>> {
  const out = new Map<string, Reachable>();
  if (cred.grantedAccountIds.length === 0) return out;
  const granted = await GRANTED_ACCOUNTS.execute(db, cred.grantedAccountIds, cred.user.id);
  const limits = await collaboratorLimits(db, cred.user.id, granted.filter((a) => a.role === 'collaborator').map((a) => a.id));
  for (const { role, ...account } of granted) out.set(account.id, { account, role, mailboxLimit: limits.get(account.id) ?? null });

  const selectedOnly = cred.mailboxAccess === 'selected';
  if (cred.includeClientAccounts && !selectedOnly) {
    const ownedAgencies = granted.filter((a) => a.kind === 'agency' && a.role === 'owner').map((a) => a.id);
    if (ownedAgencies.length) {
      const clients = await db.selectFrom('accounts').selectAll().where('parent_account_id', 'in', ownedAgencies).execute();
      for (const c of clients) if (!out.has(c.id)) out.set(c.id, { account: c, role: 'owner', mailboxLimit: null });
    }
  }
  // A selected-mailbox key never leaves its own account.
  if (selectedOnly) for (const id of [...out.keys()]) if (id !== cred.defaultAccountId) out.delete(id);
  return out;
}

/**
 * Resolves the account a request acts on. An invalid, unknown or ungranted selector is
 * 403 and never falls back to the default account.
 */
export async function selectAccount(db: Kysely<DB>, cred: Credential, selector: string | undefined | null): Promise<AccountAccess> {
  if (selector !== undefined && selector !== null && !ID_SHAPE.test(selector)) {
    throw new AppError('ACCOUNT_ACCESS_DENIED', 'account_id is not an account this credential can use.', { account_id: selector });
  }
  const wanted = selector ?? cred.defaultAccountId;
  const reachable = await reachableAccounts(db, cred);
  const hit = reachable.get(wanted);
  if (!hit) throw new AppError('ACCOUNT_ACCESS_DENIED', 'account_id is not an account this credential can use.', { account_id: wanted });
  return toAccess(cred, hit.account, hit.role, hit.mailboxLimit);
}

export function toAccess(cred: Credential, account: AccountsTable, role: MembershipRole, mailboxLimit: string[] | null = null): AccountAccess {
  return {
    account,
    role,
    permissions: capByRole(scopePermissions(cred.scope), role),
    isAccountAdmin: role === 'owner' || role === 'administrator',
    mailboxLimit: role === 'collaborator' ? mailboxLimit : null,
  };
}

/** Refuses changes to suspended and read-only accounts. Call before every mutation. */
export function assertMutable(access: AccountAccess): void {
  assertAccountMutable(access.account);
}

/** The same rule for an account row reached without a credential's access (a person's dashboard action). */
export function assertAccountMutable(account: { id: string; suspended_at: string | null; status: string }): void {
  if (account.suspended_at) {
    throw new AppError('ACCOUNT_SUSPENDED', undefined, { account_id: account.id });
  }
  if (account.status === 'read_only') {
    throw new AppError('ACCOUNT_READ_ONLY', undefined, { account_id: account.id, read_only: true }, { read_only: true });
  }
}

export function requirePermission(access: AccountAccess, needed: keyof Permissions): void {
  if (!access.permissions[needed]) {
    throw new AppError('PERMISSION_DENIED', `This credential needs ${needed} permission for this operation.`, { required: needed });
  }
}

/** Can the credential reach every mailbox of the account (not only selected ones)? */
export function hasAllMailboxes(cred: Credential): boolean {
  return cred.mailboxAccess === 'all';
}

/**
 * The credential's permissions on one mailbox of the selected account, or null when the
 * mailbox is outside what the credential may see (answered exactly like a missing one).
 */
export function mailboxPermissions(cred: Credential, access: AccountAccess, mailboxId: string): Permissions | null {
  if (access.mailboxLimit && !access.mailboxLimit.includes(mailboxId)) return null;
  if (cred.mailboxAccess === 'all') return access.permissions;
  const granted = cred.mailboxPermissions[mailboxId];
  if (!granted) return null;
  const write = granted === 'write' && access.permissions.write;
  return { read: true, write, admin: write && access.permissions.admin };
}

/**
 * Mailbox ids the credential is limited to in the selected account (a selected-access key, a
 * collaborator limited to chosen mailboxes, or both), or null for all mailboxes.
 */
export function visibleMailboxIds(cred: Credential, access?: AccountAccess): string[] | null {
  const byKey = cred.mailboxAccess === 'all' ? null : Object.keys(cred.mailboxPermissions);
  const byRole = access?.mailboxLimit ?? null;
  if (byKey === null) return byRole;
  return byRole === null ? byKey : byKey.filter((id) => byRole.includes(id));
}

/**
 * Mailbox ids the credential may see across several reachable accounts (search over everything),
 * or null for every mailbox of them all. A collaborator limited in one account must not find the
 * other mailboxes of that account, while every mailbox of their other accounts stays in reach.
 */
export async function visibleMailboxIdsAcross(db: Kysely<DB>, cred: Credential, reachable: Map<string, Reachable>): Promise<string[] | null> {
  const byKey = visibleMailboxIds(cred);
  const limited = [...reachable.values()].filter((r) => r.role === 'collaborator' && r.mailboxLimit);
  if (!limited.length) return byKey;
  const open = [...reachable.values()].filter((r) => !(r.role === 'collaborator' && r.mailboxLimit)).map((r) => r.account.id);
  const ids = limited.flatMap((r) => r.mailboxLimit!);
  if (open.length) ids.push(...(await db.selectFrom('mailboxes').select('id').where('account_id', 'in', open).where('deleted_at', 'is', null).execute()).map((m) => m.id));
  if (byKey === null) return ids;
  const seen = new Set(ids);
  return byKey.filter((id) => seen.has(id));
}
