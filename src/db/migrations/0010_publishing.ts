import type { Kysely } from 'kysely';

// Publishing a bucket as a static website (src/sites). A publication is the request and its state;
// a bundle is an immutable snapshot of the bucket's files (a manifest of path → blob, no copied
// bytes); the sites server serves a publication's current bundle on the publication's own origin.
export async function up(db: Kysely<any>): Promise<void> {
  // One slug per bucket, reserved for life: the main site and the preview (`preview-<slug>`) share it.
  await db.schema
    .createTable('site_slugs')
    .addColumn('slug', 'text', (c) => c.primaryKey())
    .addColumn('mailbox_id', 'text', (c) => c.notNull().unique())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();

  await db.schema
    .createTable('publications')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('mailbox_id', 'text', (c) => c.notNull().references('mailboxes.id'))
    // main | preview: at most one of each per bucket, reused by every later request.
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('public_slug', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('publish_state', 'text', (c) => c.notNull())
    .addColumn('site_mode', 'text', (c) => c.notNull())
    .addColumn('access_mode', 'text', (c) => c.notNull())
    .addColumn('root_directory', 'text', (c) => c.notNull())
    // AES-GCM sealed with a key derived from the service secret: shown to the owner, never logged.
    .addColumn('password_sealed', 'text')
    // Bumped when access settings change: visitors' site cookies name the epoch they were made in.
    .addColumn('access_epoch', 'integer', (c) => c.notNull().defaultTo(0))
    // The saved request (JSON), rebuilt by retry.
    .addColumn('request', 'text', (c) => c.notNull())
    // Every request bumps it; a build commits only if it built the latest request.
    .addColumn('request_seq', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('build_job_id', 'text')
    .addColumn('bundle_id', 'text')
    .addColumn('publish_error', 'text')
    .addColumn('publish_enqueued_at', 'text')
    .addColumn('publish_started_at', 'text')
    .addColumn('publish_completed_at', 'text')
    .addColumn('expires_at', 'text')
    .addColumn('unpublished_at', 'text')
    .addColumn('created_by_user_id', 'text')
    .addColumn('created_by_api_key_id', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addUniqueConstraint('publications_mailbox_kind', ['mailbox_id', 'kind'])
    .addUniqueConstraint('publications_kind_slug', ['kind', 'public_slug'])
    .execute();
  await db.schema.createIndex('publications_account').on('publications').columns(['account_id', 'id']).execute();
  await db.schema.createIndex('publications_state').on('publications').columns(['publish_state', 'updated_at']).execute();

  await db.schema
    .createTable('site_bundles')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('publication_id', 'text', (c) => c.notNull())
    .addColumn('mailbox_id', 'text', (c) => c.notNull())
    // Hash of everything the bundle's bytes depend on: a request with the same key reuses the bundle.
    .addColumn('content_key', 'text', (c) => c.notNull())
    .addColumn('root_directory', 'text', (c) => c.notNull())
    // index | lone | auto (the home-page rule that applied) and the file served at `/`.
    .addColumn('home_kind', 'text', (c) => c.notNull())
    .addColumn('entry_path', 'text', (c) => c.notNull())
    .addColumn('file_count', 'integer', (c) => c.notNull())
    .addColumn('excluded_count', 'integer', (c) => c.notNull())
    .addColumn('total_bytes', 'bigint', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('site_bundles_publication').on('site_bundles').columns(['publication_id']).execute();

  // The manifest: site path → blob (and its precompressed variants and viewer page).
  await db.schema
    .createTable('site_files')
    .addColumn('bundle_id', 'text', (c) => c.notNull())
    .addColumn('path', 'text', (c) => c.notNull())
    .addColumn('sha256', 'text', (c) => c.notNull())
    .addColumn('byte_size', 'bigint', (c) => c.notNull())
    .addColumn('content_type', 'text', (c) => c.notNull())
    .addColumn('generated', 'integer', (c) => c.notNull())
    .addColumn('gzip_sha256', 'text')
    .addColumn('gzip_size', 'bigint')
    .addColumn('br_sha256', 'text')
    .addColumn('br_size', 'bigint')
    .addColumn('viewer_sha256', 'text')
    .addColumn('viewer_size', 'bigint')
    .addPrimaryKeyConstraint('site_files_pk', ['bundle_id', 'path'])
    .execute();
  await db.schema.createIndex('site_files_sha256').on('site_files').columns(['sha256']).execute();

  // Every blob a bundle refers to, so that blob garbage collection keeps them (one indexed lookup).
  await db.schema
    .createTable('site_bundle_blobs')
    .addColumn('bundle_id', 'text', (c) => c.notNull())
    .addColumn('sha256', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('site_bundle_blobs_pk', ['bundle_id', 'sha256'])
    .execute();
  await db.schema.createIndex('site_bundle_blobs_sha256').on('site_bundle_blobs').columns(['sha256']).execute();

  // Password attempts and code requests of protected sites, counted across nodes.
  await db.schema
    .createTable('site_access_attempts')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('publication_id', 'text', (c) => c.notNull())
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('client_key', 'text', (c) => c.notNull())
    .addColumn('email', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('site_access_attempts_lookup').on('site_access_attempts').columns(['publication_id', 'kind', 'created_at']).execute();

  // One-time codes for require-email sites (hashed).
  await db.schema
    .createTable('site_email_codes')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('publication_id', 'text', (c) => c.notNull())
    .addColumn('email', 'text', (c) => c.notNull())
    .addColumn('code_hash', 'text', (c) => c.notNull())
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('expires_at', 'text', (c) => c.notNull())
    .addColumn('consumed_at', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('site_email_codes_lookup').on('site_email_codes').columns(['publication_id', 'email', 'created_at']).execute();

  // What the bucket presenter needs without a join: the slug and whether the main site is up.
  await db.schema.alterTable('mailboxes').addColumn('site_slug', 'text').execute();
  // null | published | unpublishing (archiving waits until it is null again).
  await db.schema.alterTable('mailboxes').addColumn('site_state', 'text').execute();
}
