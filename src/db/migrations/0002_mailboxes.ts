import type { Kysely } from 'kysely';

export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('mailboxes')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id'))
    .addColumn('title', 'text')
    // Lower-cased title while active; null when archived or untitled, so that the
    // unique index below enforces "unique among active mailboxes" on both databases.
    .addColumn('title_key', 'text')
    .addColumn('description', 'text')
    .addColumn('metadata', 'text', (c) => c.notNull())
    .addColumn('metadata_version', 'text', (c) => c.notNull())
    .addColumn('tag_paths', 'text', (c) => c.notNull())
    .addColumn('receiving_enabled', 'integer', (c) => c.notNull().defaultTo(1))
    .addColumn('sending_enabled', 'integer', (c) => c.notNull().defaultTo(1))
    .addColumn('storage_bytes', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('files_count', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('version_id', 'text')
    .addColumn('version_number', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('lock_kind', 'text')
    .addColumn('lock_message', 'text')
    .addColumn('locked_until', 'text')
    .addColumn('locked_by_user_id', 'text')
    .addColumn('locked_by_api_key_id', 'text')
    .addColumn('lock_progress', 'text')
    .addColumn('message_count', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('unread_count', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('last_received_at', 'text')
    .addColumn('last_received_path', 'text')
    .addColumn('created_by_user_id', 'text')
    .addColumn('created_by_api_key_id', 'text')
    .addColumn('archived_at', 'text')
    .addColumn('deleted_at', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('mailboxes_title_key').unique().on('mailboxes').columns(['account_id', 'title_key']).execute();
  await db.schema.createIndex('mailboxes_account').on('mailboxes').columns(['account_id', 'id']).execute();

  // Every address a mailbox receives on (primary now; aliases later). Addresses are
  // never reused: a retired row keeps its address reserved.
  await db.schema
    .createTable('email_addresses')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('mailbox_id', 'text', (c) => c.notNull().references('mailboxes.id'))
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('local_part', 'text', (c) => c.notNull())
    .addColumn('domain', 'text', (c) => c.notNull())
    .addColumn('address', 'text', (c) => c.notNull().unique())
    .addColumn('username', 'text', (c) => c.notNull())
    .addColumn('role', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('retired_at', 'text')
    .execute();
  await db.schema.createIndex('email_addresses_mailbox').on('email_addresses').columns(['mailbox_id', 'role']).execute();

  // One row per creation, kept after deletion: the monthly allowance counts creations.
  await db.schema
    .createTable('mailbox_creations')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('billing_group_id', 'text', (c) => c.notNull())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('mailbox_id', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('mailbox_creations_group').on('mailbox_creations').columns(['billing_group_id', 'created_at']).execute();

  // Replays of surface A creates keyed by the Idempotency-Key header.
  await db.schema
    .createTable('idempotency_keys')
    .addColumn('scope', 'text', (c) => c.notNull())
    .addColumn('key', 'text', (c) => c.notNull())
    .addColumn('request_hash', 'text', (c) => c.notNull())
    .addColumn('resource_id', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('idempotency_keys_pk', ['scope', 'key'])
    .execute();
}
