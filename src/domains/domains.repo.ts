import type { Kysely } from 'kysely';
import type { DB } from '../db/schema.ts';
import type { Dialect } from '../db/database.ts';
import type { EmailDomainsTable } from './domains.schema.ts';

export type DomainRow = EmailDomainsTable;

/** A domain of the account that is not removed. */
export function findDomain(db: Kysely<DB>, accountId: string, id: string): Promise<DomainRow | undefined> {
  return db.selectFrom('email_domains').selectAll().where('account_id', '=', accountId).where('id', '=', id).where('status', '!=', 'removed').executeTakeFirst();
}

export function findDomainById(db: Kysely<DB>, id: string): Promise<DomainRow | undefined> {
  return db.selectFrom('email_domains').selectAll().where('id', '=', id).executeTakeFirst();
}

/** The live claim on a hostname (by any account), if any. */
export function findClaim(db: Kysely<DB>, hostname: string): Promise<DomainRow | undefined> {
  return db.selectFrom('email_domains').selectAll().where('claim_key', '=', hostname).executeTakeFirst();
}

/**
 * Locks the live claim on a hostname for the rest of the transaction (Postgres; SQLite
 * transactions are serial): address writes and domain removal take it, so an address can
 * never land on a domain being removed.
 */
export async function lockClaim(trx: Kysely<DB>, dialect: Dialect, hostname: string): Promise<DomainRow | undefined> {
  let q = trx.selectFrom('email_domains').selectAll().where('claim_key', '=', hostname);
  if (dialect === 'postgres') q = q.forUpdate();
  return q.executeTakeFirst();
}

/** A ready domain of exactly this account (tenant ownership is exact: not an agency's or a client's). */
export async function readyDomainOf(db: Kysely<DB>, accountId: string, hostname: string): Promise<DomainRow | undefined> {
  const d = await findClaim(db, hostname);
  return d && d.account_id === accountId && d.status === 'ready' ? d : undefined;
}

export function readyDomainsOf(db: Kysely<DB>, accountId: string): Promise<DomainRow[]> {
  return db.selectFrom('email_domains').selectAll().where('account_id', '=', accountId).where('status', '=', 'ready').orderBy('hostname').execute();
}

export async function countGroupDomains(db: Kysely<DB>, groupId: string): Promise<number> {
  const row = await db
    .selectFrom('email_domains')
    .innerJoin('accounts', 'accounts.id', 'email_domains.account_id')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('email_domains.status', '!=', 'removed')
    .where((eb) => eb.or([eb('accounts.id', '=', groupId), eb('accounts.parent_account_id', '=', groupId)]))
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/** Mailboxes with a current (primary or alias) address on the hostname: [{id, email}]. */
export async function assignedMailboxes(db: Kysely<DB>, hostname: string, limit = 100): Promise<{ id: string; email: string }[]> {
  const rows = await db
    .selectFrom('email_addresses')
    .innerJoin('mailboxes', 'mailboxes.id', 'email_addresses.mailbox_id')
    .select(['email_addresses.mailbox_id as id', 'email_addresses.address as email'])
    .where('email_addresses.domain', '=', hostname)
    .where('email_addresses.role', 'in', ['primary', 'alias'])
    .where('mailboxes.deleted_at', 'is', null)
    .orderBy('email_addresses.address')
    .limit(limit)
    .execute();
  return rows;
}

/** Address changes onto the hostname that are still activating. */
export async function pendingAssignmentsOn(db: Kysely<DB>, hostname: string): Promise<number> {
  const row = await db
    .selectFrom('address_assignments')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('hostname', '=', hostname)
    .where('status', '=', 'pending')
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/** For RCPT: is this a claimed custom domain that has been verified (ready, or paused for now)? */
export async function isVerifiedCustomDomain(db: Kysely<DB>, hostname: string): Promise<boolean> {
  const d = await db.selectFrom('email_domains').select('status').where('claim_key', '=', hostname).executeTakeFirst();
  return d?.status === 'ready' || d?.status === 'paused';
}

/** For RCPT: null when mail for the custom domain is received now, else the reason it is not. */
export async function customDomainBlock(db: Kysely<DB>, hostname: string): Promise<string | null> {
  const d = await db.selectFrom('email_domains').select('status').where('claim_key', '=', hostname).executeTakeFirst();
  if (d?.status === 'ready') return null;
  return d?.status === 'paused' ? 'domain_paused' : 'domain_not_receiving';
}
