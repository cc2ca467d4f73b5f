import type { Kysely } from 'kysely';
import type { DB, EmailAddressesTable } from '../db/schema.ts';
import type { Dialect } from '../db/database.ts';
import type { AddressAssignmentsTable } from './addresses.schema.ts';

export type AddressRow = EmailAddressesTable;
export type AssignmentRow = AddressAssignmentsTable;

/**
 * Serialises allowance-counted changes of one billing group (rotations, domain claims) so that
 * limits hold under concurrency. SQLite transactions are already serial.
 */
export async function lockBillingGroup(trx: Kysely<DB>, dialect: Dialect, groupId: string): Promise<void> {
  if (dialect === 'postgres') await trx.selectFrom('accounts').select('id').where('id', '=', groupId).forUpdate().execute();
}

/** Serialises address changes of one mailbox (Postgres; SQLite transactions are serial). */
export async function lockMailbox(trx: Kysely<DB>, dialect: Dialect, mailboxId: string): Promise<void> {
  if (dialect === 'postgres') await trx.selectFrom('mailboxes').select('id').where('id', '=', mailboxId).forUpdate().execute();
}

export function primaryAddress(db: Kysely<DB>, mailboxId: string): Promise<AddressRow | undefined> {
  return db.selectFrom('email_addresses').selectAll().where('mailbox_id', '=', mailboxId).where('role', '=', 'primary').executeTakeFirst();
}

/** Current aliases, oldest first: the first `max_email_aliases_per_mailbox` of them are active. */
export function aliasesOf(db: Kysely<DB>, mailboxId: string): Promise<AddressRow[]> {
  return db.selectFrom('email_addresses').selectAll().where('mailbox_id', '=', mailboxId).where('role', '=', 'alias').orderBy('created_at').orderBy('id').execute();
}

export function latestAssignment(db: Kysely<DB>, mailboxId: string): Promise<AssignmentRow | undefined> {
  return db.selectFrom('address_assignments').selectAll().where('mailbox_id', '=', mailboxId).orderBy('created_at', 'desc').orderBy('id', 'desc').limit(1).executeTakeFirst();
}

export function pendingAssignments(db: Kysely<DB>, mailboxId: string): Promise<AssignmentRow[]> {
  return db.selectFrom('address_assignments').selectAll().where('mailbox_id', '=', mailboxId).where('status', '=', 'pending').execute();
}

/** Taken: used by any mailbox ever (retired addresses stay reserved) or held by a pending change. */
export async function addressUnavailable(db: Kysely<DB>, address: string): Promise<boolean> {
  const used = await db.selectFrom('email_addresses').select('id').where('address', '=', address).executeTakeFirst();
  if (used) return true;
  const held = await db.selectFrom('address_assignments').select('id').where('reserve_key', '=', address).executeTakeFirst();
  return held !== undefined;
}

export async function countGroupRotationsSince(db: Kysely<DB>, groupId: string, since: string): Promise<number> {
  const row = await db
    .selectFrom('address_rotations')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('billing_group_id', '=', groupId)
    .where('created_at', '>=', since)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/**
 * Is this alias within the mailbox's alias allowance (active)? Aliases beyond it (after a plan
 * change) stay reserved but do not receive.
 */
export async function aliasActive(db: Kysely<DB>, mailboxId: string, addressId: string, maxAliases: number): Promise<boolean> {
  if (maxAliases <= 0) return false;
  const first = await db
    .selectFrom('email_addresses')
    .select('id')
    .where('mailbox_id', '=', mailboxId)
    .where('role', '=', 'alias')
    .orderBy('created_at')
    .orderBy('id')
    .limit(maxAliases)
    .execute();
  return first.some((r) => r.id === addressId);
}
