import type { Kysely } from 'kysely';
import { personMailboxLimits } from '../auth/access.ts';
import type { AccountKind, AccountStatus, DB, MembershipRole, PlanName } from '../db/schema.ts';

// Queries behind the dashboard pages.

export interface MembershipView {
  accountId: string;
  name: string;
  kind: AccountKind;
  plan: PlanName;
  status: AccountStatus;
  suspended: boolean;
  role: MembershipRole;
  /** A client account the person reaches as the owner of its agency (not as a member of it). */
  viaAgency?: boolean;
}

export async function listMemberships(db: Kysely<DB>, userId: string): Promise<MembershipView[]> {
  const rows = await db
    .selectFrom('memberships')
    .innerJoin('accounts', 'accounts.id', 'memberships.account_id')
    .select(['accounts.id', 'accounts.name', 'accounts.kind', 'accounts.plan', 'accounts.status', 'accounts.suspended_at', 'memberships.role'])
    .where('memberships.user_id', '=', userId)
    .orderBy('memberships.created_at')
    .orderBy('accounts.id')
    .execute();
  return rows.map((r) => ({ accountId: r.id, name: r.name, kind: r.kind, plan: r.plan, status: r.status, suspended: r.suspended_at !== null, role: r.role }));
}

export interface MailboxOption {
  id: string;
  accountId: string;
  title: string | null;
  archived: boolean;
}

export interface MailboxList {
  /** False while the mailboxes table does not exist yet (older schema). */
  available: boolean;
  mailboxes: MailboxOption[];
}

function isMissingTable(err: unknown): boolean {
  const e = err as { code?: string; message?: string };
  return e?.code === '42P01' || /no such table/i.test(e?.message ?? '');
}

/**
 * Mailboxes (not deleted) of the given accounts that the person may reach, for choosing among them
 * (a key's selected mailboxes, filters): a collaborator limited to chosen mailboxes sees only those
 * (the rule of src/auth/access.ts, so a list never offers what opening would answer 404 to).
 */
export async function listMailboxes(db: Kysely<DB>, accountIds: string[], person: { userId: string }): Promise<MailboxList> {
  if (accountIds.length === 0) return { available: true, mailboxes: [] };
  const limits = await personMailboxLimits(db, person.userId, accountIds);
  const allowed = (m: { account_id: string; id: string }) => !limits.has(m.account_id) || limits.get(m.account_id)!.includes(m.id);
  // The mailboxes table belongs to another feature; it is queried untyped and may be absent.
  const anyDb = db as unknown as Kysely<any>;
  try {
    const rows: { id: string; account_id: string; title: string | null; archived_at: string | null }[] = await anyDb
      .selectFrom('mailboxes')
      .select(['id', 'account_id', 'title', 'archived_at'])
      .where('account_id', 'in', accountIds)
      .where('deleted_at', 'is', null)
      .orderBy('title')
      .orderBy('id')
      .limit(1000)
      .execute();
    return { available: true, mailboxes: rows.filter(allowed).map((r) => ({ id: r.id, accountId: r.account_id, title: r.title, archived: r.archived_at !== null })) };
  } catch (err) {
    if (isMissingTable(err)) return { available: false, mailboxes: [] };
    throw err;
  }
}

/** For each of the user's keys with selected access: how many mailboxes it reaches. */
export async function selectedMailboxCounts(db: Kysely<DB>, userId: string): Promise<Map<string, number>> {
  const rows = await db
    .selectFrom('api_key_mailboxes')
    .innerJoin('api_keys', 'api_keys.id', 'api_key_mailboxes.api_key_id')
    .select(['api_key_mailboxes.api_key_id as id', (eb) => eb.fn.countAll<number>().as('n')])
    .where('api_keys.user_id', '=', userId)
    .groupBy('api_key_mailboxes.api_key_id')
    .execute();
  return new Map(rows.map((r) => [r.id, Number(r.n)]));
}
