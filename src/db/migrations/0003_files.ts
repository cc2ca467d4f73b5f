import type { Kysely } from 'kysely';

export async function up(db: Kysely<any>): Promise<void> {
  // Content known to the blob store, with how many file versions point at it (for collection).
  await db.schema
    .createTable('blobs')
    .addColumn('sha256', 'text', (c) => c.primaryKey())
    .addColumn('byte_size', 'bigint', (c) => c.notNull())
    .addColumn('md5', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();

  await db.schema
    .createTable('mailbox_versions')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('mailbox_id', 'text', (c) => c.notNull().references('mailboxes.id'))
    .addColumn('version_number', 'integer', (c) => c.notNull())
    .addColumn('action', 'text', (c) => c.notNull())
    .addColumn('files_changed', 'integer', (c) => c.notNull())
    .addColumn('created_by_user_id', 'text')
    .addColumn('created_by_api_key_id', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addUniqueConstraint('mailbox_versions_number', ['mailbox_id', 'version_number'])
    .execute();

  await db.schema
    .createTable('files')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('mailbox_id', 'text', (c) => c.notNull().references('mailboxes.id'))
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('path', 'text', (c) => c.notNull())
    // The path while the file exists; null once deleted, so the unique index below
    // holds one live file per path on both databases.
    .addColumn('live_path', 'text')
    .addColumn('folder', 'text', (c) => c.notNull())
    .addColumn('basename', 'text', (c) => c.notNull())
    .addColumn('role', 'text', (c) => c.notNull())
    .addColumn('created_by_system', 'text', (c) => c.notNull())
    .addColumn('current_version_id', 'text')
    .addColumn('version_count', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('read_at', 'text')
    .addColumn('read_by_user_id', 'text')
    .addColumn('read_by_api_key_id', 'text')
    .addColumn('created_by_user_id', 'text')
    .addColumn('created_by_api_key_id', 'text')
    .addColumn('created_by_agent', 'text')
    .addColumn('updated_by_user_id', 'text')
    .addColumn('updated_by_api_key_id', 'text')
    .addColumn('updated_by_agent', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addColumn('deleted_at', 'text')
    .execute();
  await db.schema.createIndex('files_live_path').unique().on('files').columns(['mailbox_id', 'live_path']).execute();
  await db.schema.createIndex('files_folder').on('files').columns(['mailbox_id', 'folder', 'path']).execute();

  await db.schema
    .createTable('file_versions')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('file_id', 'text', (c) => c.notNull().references('files.id'))
    .addColumn('mailbox_id', 'text', (c) => c.notNull())
    .addColumn('version_number', 'integer', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('path', 'text', (c) => c.notNull())
    .addColumn('mime_type', 'text', (c) => c.notNull())
    .addColumn('sha256', 'text')
    .addColumn('byte_size', 'bigint', (c) => c.notNull())
    .addColumn('reason', 'text')
    .addColumn('created_by_system', 'text', (c) => c.notNull())
    .addColumn('deleted', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('mailbox_version_id', 'text')
    .addColumn('read_at', 'text')
    .addColumn('read_by_user_id', 'text')
    .addColumn('read_by_api_key_id', 'text')
    .addColumn('created_by_user_id', 'text')
    .addColumn('created_by_api_key_id', 'text')
    .addColumn('created_by_agent', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addUniqueConstraint('file_versions_number', ['file_id', 'version_number'])
    .execute();
  await db.schema.createIndex('file_versions_sha').on('file_versions').column('sha256').execute();

  // A client's declared upload: the signed id it PUTs bytes for and later saves.
  await db.schema
    .createTable('direct_uploads')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('mailbox_id', 'text', (c) => c.notNull())
    .addColumn('path', 'text', (c) => c.notNull())
    .addColumn('filename', 'text', (c) => c.notNull())
    .addColumn('byte_size', 'bigint', (c) => c.notNull())
    .addColumn('checksum', 'text', (c) => c.notNull())
    .addColumn('sha256', 'text', (c) => c.notNull())
    .addColumn('content_type', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('upload_session_id', 'text')
    .addColumn('expires_at', 'text', (c) => c.notNull())
    .addColumn('uploaded_at', 'text')
    .addColumn('created_by_user_id', 'text')
    .addColumn('created_by_api_key_id', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('direct_uploads_session').on('direct_uploads').columns(['upload_session_id', 'status']).execute();
}
