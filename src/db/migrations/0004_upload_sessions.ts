import type { Kysely } from 'kysely';

export async function up(db: Kysely<any>): Promise<void> {
  // A batch upload into one mailbox: holds the mailbox write lock while pending and ends
  // in one mailbox version (src/uploads, docs/uploads.md).
  await db.schema
    .createTable('upload_sessions')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('mailbox_id', 'text', (c) => c.notNull().references('mailboxes.id'))
    .addColumn('status', 'text', (c) => c.notNull())
    // The mailbox id while pending, null once closed: the unique index below allows one
    // pending session per mailbox on both databases.
    .addColumn('pending_slot', 'text')
    .addColumn('client_session_key', 'text')
    .addColumn('delete_missing', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('expected_file_count', 'integer')
    .addColumn('base_mailbox_version_id', 'text')
    // Id given to every file version the session writes; becomes a mailbox version when the session closes.
    .addColumn('reserved_version_id', 'text', (c) => c.notNull())
    .addColumn('target_mailbox_version_id', 'text')
    .addColumn('pruned_files_count', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('uploads_expire_at', 'text', (c) => c.notNull())
    .addColumn('session_closed_at', 'text')
    .addColumn('created_by_user_id', 'text')
    .addColumn('created_by_api_key_id', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('upload_sessions_pending_slot').unique().on('upload_sessions').column('pending_slot').execute();
  await db.schema.createIndex('upload_sessions_key').on('upload_sessions').columns(['mailbox_id', 'client_session_key']).execute();
  await db.schema.createIndex('upload_sessions_due').on('upload_sessions').columns(['status', 'uploads_expire_at']).execute();

  // One declared file of a session: its upload target, then what saving it did.
  await db.schema
    .createTable('upload_session_files')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('session_id', 'text', (c) => c.notNull().references('upload_sessions.id'))
    .addColumn('path', 'text', (c) => c.notNull())
    .addColumn('name', 'text')
    .addColumn('input_index', 'integer', (c) => c.notNull())
    .addColumn('direct_upload_id', 'text')
    .addColumn('sha256', 'text', (c) => c.notNull())
    .addColumn('byte_size', 'bigint', (c) => c.notNull())
    .addColumn('content_type', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('skip_code', 'text')
    .addColumn('skip_reason', 'text')
    .addColumn('file_id', 'text')
    .addColumn('file_version_id', 'text')
    .addColumn('created', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('saved_at', 'text')
    .execute();
  await db.schema.createIndex('upload_session_files_status').on('upload_session_files').columns(['session_id', 'status', 'id']).execute();
  await db.schema.createIndex('upload_session_files_path').on('upload_session_files').columns(['session_id', 'path']).execute();
}
