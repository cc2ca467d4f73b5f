import type { Kysely } from 'kysely';
import type { DB, MailboxesTable } from '../db/schema.ts';
import { usagePeriod } from '../inbound/usage.ts';
import { compiledQuery } from '../db/compiled-query.ts';
import type { GitSyncColumns } from '../gitsync/gitsync.present.ts';

export interface MailboxRow extends MailboxesTable, GitSyncColumns {
  address: string | null;
  email_username: string | null;
  /** Messages received this UTC month (surface A `received_count`). */
  received_this_month: number | null;
  /** Status of the custom domain of the primary address (src/domains); null on the platform domain. */
  domain_status: string | null;
}

/** Mailboxes with their current primary address. Deleted mailboxes are never returned. */
export function mailboxQuery(db: Kysely<DB>, at: Date = new Date()) {
  return mailboxQueryIn(db, usagePeriod(at));
}

/** mailboxQuery with this month's usage period (`YYYY-MM`) given, e.g. as a placeholder of a compiled statement. */
function mailboxQueryIn(db: Kysely<DB>, period: string) {
  return db
    .selectFrom('mailboxes')
    .leftJoin('email_addresses', (j) => j.onRef('email_addresses.mailbox_id', '=', 'mailboxes.id').on('email_addresses.role', '=', 'primary'))
    .leftJoin('received_usage', (j) => j.onRef('received_usage.scope_id', '=', 'mailboxes.id').on('received_usage.period', '=', period))
    .leftJoin('email_domains', 'email_domains.claim_key', 'email_addresses.domain')
    .leftJoin('git_syncs', 'git_syncs.mailbox_id', 'mailboxes.id')
    .selectAll('mailboxes')
    .select(['email_addresses.address as address', 'email_addresses.username as email_username', 'received_usage.count as received_this_month', 'email_domains.status as domain_status'])
    // The bucket's git connection in brief (src/gitsync): surface A's github_sync.
    .select([
      'git_syncs.repository_url as git_repository_url',
      'git_syncs.branch as git_branch',
      'git_syncs.sync_state as git_sync_state',
      'git_syncs.auto_publish as git_auto_publish',
      'git_syncs.last_synced_at as git_last_synced_at',
      'git_syncs.last_checked_at as git_last_checked_at',
      'git_syncs.last_commit as git_last_commit',
      'git_syncs.error_code as git_error_code',
      'git_syncs.error_message as git_error_message',
    ])
    .where('mailboxes.deleted_at', 'is', null);
}

// Every request on a mailbox loads it (src/mailboxes/mailboxes.service.ts loadMailbox): built once
// (src/db/compiled-query.ts).
const FIND_MAILBOX = compiledQuery(
  (db, period: string, accountId: string, mailboxId: string) => mailboxQueryIn(db, period).where('mailboxes.account_id', '=', accountId).where('mailboxes.id', '=', mailboxId),
  3,
);

export function findMailbox(db: Kysely<DB>, accountId: string, mailboxId: string): Promise<MailboxRow | undefined> {
  return FIND_MAILBOX.executeTakeFirst(db, usagePeriod(new Date()), accountId, mailboxId) as Promise<MailboxRow | undefined>;
}

export async function titleTaken(db: Kysely<DB>, accountId: string, titleKey: string, exceptId?: string): Promise<boolean> {
  let q = db
    .selectFrom('mailboxes')
    .select('id')
    .where('account_id', '=', accountId)
    .where('title_key', '=', titleKey)
    .where('deleted_at', 'is', null);
  if (exceptId) q = q.where('id', '!=', exceptId);
  return (await q.executeTakeFirst()) !== undefined;
}

export async function addressTaken(db: Kysely<DB>, address: string): Promise<boolean> {
  return (await db.selectFrom('email_addresses').select('id').where('address', '=', address).executeTakeFirst()) !== undefined;
}

/** Live (not deleted) mailboxes in a billing group. */
export async function countGroupMailboxes(db: Kysely<DB>, groupId: string): Promise<number> {
  const row = await db
    .selectFrom('mailboxes')
    .innerJoin('accounts', 'accounts.id', 'mailboxes.account_id')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('mailboxes.deleted_at', 'is', null)
    .where((eb) => eb.or([eb('accounts.id', '=', groupId), eb('accounts.parent_account_id', '=', groupId)]))
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

export async function countGroupCreationsSince(db: Kysely<DB>, groupId: string, since: string): Promise<number> {
  const row = await db
    .selectFrom('mailbox_creations')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('billing_group_id', '=', groupId)
    .where('created_at', '>=', since)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}
