import type { Kysely } from 'kysely';

// Renamed site slugs: the old slug (and its preview-<slug>) redirects with 301 to the bucket's
// current address until expires_at (30 days after the rename), unless another bucket takes it.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('site_slug_redirects')
    .addColumn('old_slug', 'text', (c) => c.primaryKey())
    .addColumn('mailbox_id', 'text', (c) => c.notNull())
    .addColumn('expires_at', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('site_slug_redirects_mailbox').on('site_slug_redirects').column('mailbox_id').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('site_slug_redirects').execute();
}
