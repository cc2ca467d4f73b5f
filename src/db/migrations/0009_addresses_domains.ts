import type { Kysely } from 'kysely';

// Addresses beyond the first (rotation, aliases) and custom receiving domains.
export async function up(db: Kysely<any>): Promise<void> {
  // Custom receiving domains claimed by an account. `claim_key` is the hostname while the claim
  // stands and null once removed, so that one hostname has at most one live claim (a unique
  // index allows many nulls on both databases) while removed rows stay for history.
  await db.schema
    .createTable('email_domains')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id'))
    .addColumn('hostname', 'text', (c) => c.notNull())
    .addColumn('claim_key', 'text', (c) => c.unique())
    // The DNS zone the records are published in (the hostname itself for a root domain).
    .addColumn('zone', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('ownership_token', 'text', (c) => c.notNull())
    .addColumn('provider_token', 'text', (c) => c.notNull())
    .addColumn('error', 'text')
    .addColumn('pause_reason', 'text')
    .addColumn('paused_at', 'text')
    .addColumn('last_checked_at', 'text')
    .addColumn('ownership_verified_at', 'text')
    .addColumn('setup_expires_at', 'text')
    .addColumn('ready_at', 'text')
    .addColumn('removed_at', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('email_domains_account').on('email_domains').columns(['account_id', 'id']).execute();
  await db.schema.createIndex('email_domains_status').on('email_domains').columns(['status', 'last_checked_at']).execute();

  // Address changes that activate in the background (custom-domain rotations and every alias
  // add). The candidate address lives only here until activation: it never routes mail and is
  // never shown. `reserve_key` holds it while pending so two requests cannot both take it.
  await db.schema
    .createTable('address_assignments')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('mailbox_id', 'text', (c) => c.notNull().references('mailboxes.id'))
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('hostname', 'text', (c) => c.notNull())
    .addColumn('local_part', 'text', (c) => c.notNull())
    .addColumn('username', 'text', (c) => c.notNull())
    .addColumn('address', 'text', (c) => c.notNull())
    .addColumn('reserve_key', 'text', (c) => c.unique())
    // Primary changes: the address current when asked (activation fails if it changed since).
    .addColumn('old_address', 'text')
    .addColumn('keep_old_as_alias', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('error', 'text')
    .addColumn('created_by_user_id', 'text')
    .addColumn('created_by_api_key_id', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addColumn('finished_at', 'text')
    .execute();
  await db.schema.createIndex('address_assignments_mailbox').on('address_assignments').columns(['mailbox_id', 'created_at']).execute();

  // One row per committed rotation: the monthly allowance is shared by the billing group.
  await db.schema
    .createTable('address_rotations')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('billing_group_id', 'text', (c) => c.notNull())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('mailbox_id', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('address_rotations_group').on('address_rotations').columns(['billing_group_id', 'created_at']).execute();

  // Domain setup requests (claim, check, verify) for the setup rate limit; swept after a day.
  await db.schema
    .createTable('email_domain_setup_requests')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('email_domain_setup_requests_account').on('email_domain_setup_requests').columns(['account_id', 'created_at']).execute();

  // "Is this one of our domains?" and "is this domain still in use?" look addresses up by domain.
  await db.schema.createIndex('email_addresses_domain').on('email_addresses').columns(['domain', 'role']).execute();
}
