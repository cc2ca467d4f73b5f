import type { Kysely } from 'kysely';

// Custom domains of published sites (docs/sites.md, "Custom domains"). A bucket's site answers on
// a hostname once DNS proves the owner controls it (TXT) and routes it here (CNAME, A or AAAA).
// `verified_key` is the hostname while the domain is verified and null otherwise: a unique index
// (which allows many nulls on both databases) lets one bucket hold a verified hostname, while
// any number of pending claims may wait (nobody can squat a hostname they cannot verify).
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('site_domains')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('mailbox_id', 'text', (c) => c.notNull())
    .addColumn('hostname', 'text', (c) => c.notNull())
    .addColumn('verified_key', 'text', (c) => c.unique())
    .addColumn('zone', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('is_primary', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('ownership_token', 'text', (c) => c.notNull())
    // Last check's findings (1 found, 0 missing, null not checked yet) and error, if any.
    .addColumn('ownership_found', 'integer')
    .addColumn('routing_found', 'integer')
    .addColumn('error', 'text')
    .addColumn('last_checked_at', 'text')
    .addColumn('verified_at', 'text')
    // The last check that found every record: a verified domain whose records stay missing for
    // a day after it is failed (and stops serving).
    .addColumn('last_passed_at', 'text')
    .addColumn('setup_expires_at', 'text')
    // TLS from an ACME server (CUBBY_ACME_DIRECTORY): the certificate chain, its private key
    // sealed with the service secret, and the HTTP-01 challenge being answered.
    .addColumn('cert_status', 'text', (c) => c.notNull().defaultTo('none'))
    .addColumn('cert_pem', 'text')
    .addColumn('cert_key_sealed', 'text')
    .addColumn('cert_expires_at', 'text')
    .addColumn('cert_error', 'text')
    .addColumn('cert_attempted_at', 'text')
    .addColumn('acme_token', 'text')
    .addColumn('acme_key_authorization', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('site_domains_mailbox_host').on('site_domains').columns(['mailbox_id', 'hostname']).unique().execute();
  await db.schema.createIndex('site_domains_hostname').on('site_domains').column('hostname').execute();
  await db.schema.createIndex('site_domains_status').on('site_domains').columns(['status', 'last_checked_at']).execute();
  await db.schema.createIndex('site_domains_acme_token').on('site_domains').column('acme_token').execute();

  // One ACME account per directory URL (its key sealed with the service secret).
  await db.schema
    .createTable('site_acme_accounts')
    .addColumn('directory_url', 'text', (c) => c.primaryKey())
    .addColumn('key_sealed', 'text', (c) => c.notNull())
    .addColumn('account_url', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();

  // The hostname a bucket's site is at when its primary custom domain is verified (else null):
  // public_url and the slug host's redirect follow it without a join.
  await db.schema.alterTable('mailboxes').addColumn('site_domain', 'text').execute();
  await db.schema.alterTable('publications').addColumn('site_domain', 'text').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('publications').dropColumn('site_domain').execute();
  await db.schema.alterTable('mailboxes').dropColumn('site_domain').execute();
  await db.schema.dropTable('site_acme_accounts').execute();
  await db.schema.dropTable('site_domains').execute();
}
