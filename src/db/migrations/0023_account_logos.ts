import type { Kysely } from 'kysely';

// Account logos (branding shown as {{account_logo}} on published auto-index sites): the logo's
// blob (content-addressed, in the blob store) and the image type sniffed from its bytes when it
// was uploaded. Both null: no logo, the account's initial is shown.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('accounts').addColumn('logo_sha256', 'text').execute();
  await db.schema.alterTable('accounts').addColumn('logo_content_type', 'text').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('accounts').dropColumn('logo_content_type').execute();
  await db.schema.alterTable('accounts').dropColumn('logo_sha256').execute();
}
