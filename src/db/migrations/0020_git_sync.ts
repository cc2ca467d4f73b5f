import type { Kysely } from 'kysely';

// Git sync (src/gitsync): at most one repository connection per bucket. The token and the push
// webhook secret are stored encrypted; `manifest` remembers what the last sync wrote (path → git
// blob id and SHA-256) so that the next one deletes only what it put there and leaves other files be.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('git_syncs')
    .addColumn('mailbox_id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('repository_url', 'text', (c) => c.notNull())
    .addColumn('branch', 'text', (c) => c.notNull())
    .addColumn('subdirectory', 'text', (c) => c.notNull())
    .addColumn('token_ciphertext', 'text')
    .addColumn('webhook_secret_ciphertext', 'text', (c) => c.notNull())
    .addColumn('auto_publish', 'integer', (c) => c.notNull())
    .addColumn('sync_state', 'text', (c) => c.notNull())
    .addColumn('last_commit', 'text')
    .addColumn('last_synced_at', 'text')
    .addColumn('last_checked_at', 'text')
    .addColumn('last_trigger', 'text')
    .addColumn('last_version_id', 'text')
    .addColumn('error_code', 'text')
    .addColumn('error_message', 'text')
    .addColumn('manifest', 'text', (c) => c.notNull())
    .addColumn('skipped', 'text', (c) => c.notNull())
    .addColumn('created_by_user_id', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
  // The scheduler's "connections not checked for a while".
  await db.schema.createIndex('git_syncs_checked').on('git_syncs').column('last_checked_at').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('git_syncs').execute();
}
