import type { Kysely } from 'kysely';

// Received (and later sent) email. The stored message lives as files under `_email/…`; a row here
// holds every summary field so that lists never open a blob.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('emails')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('mailbox_id', 'text', (c) => c.notNull().references('mailboxes.id'))
    .addColumn('account_id', 'text', (c) => c.notNull())
    // Per-mailbox arrival order, assigned under the mailbox row lock: polling cursors key on it, so a
    // message that commits late can never land behind a cursor already handed out.
    .addColumn('seq', 'bigint', (c) => c.notNull())
    .addColumn('direction', 'text', (c) => c.notNull())
    .addColumn('conversation_id', 'text', (c) => c.notNull())
    // Root Message-ID of the thread as the sender saw it (first References id, else In-Reply-To, else
    // own Message-ID): two replies to a message we never received still meet here.
    .addColumn('thread_key', 'text')
    .addColumn('subject', 'text')
    .addColumn('subject_search', 'text')
    .addColumn('from_addresses', 'text', (c) => c.notNull())
    .addColumn('sender_address', 'text')
    .addColumn('to_addresses', 'text', (c) => c.notNull())
    .addColumn('cc_addresses', 'text', (c) => c.notNull())
    .addColumn('reply_to_addresses', 'text', (c) => c.notNull())
    .addColumn('message_id', 'text')
    .addColumn('in_reply_to', 'text', (c) => c.notNull())
    .addColumn('reference_ids', 'text', (c) => c.notNull())
    .addColumn('delivered_to', 'text', (c) => c.notNull())
    .addColumn('received_at', 'text', (c) => c.notNull())
    .addColumn('body_status', 'text', (c) => c.notNull())
    .addColumn('body_text', 'text')
    .addColumn('attachment_count', 'integer', (c) => c.notNull())
    .addColumn('omitted_attachment_count', 'integer', (c) => c.notNull())
    .addColumn('attachments', 'text', (c) => c.notNull())
    .addColumn('size_bytes', 'bigint', (c) => c.notNull())
    .addColumn('raw_sha256', 'text')
    .addColumn('directory', 'text')
    .addColumn('raw_file_id', 'text')
    .addColumn('raw_version_id', 'text')
    .addColumn('json_file_id', 'text')
    // Envelope and authentication facts (later used by reply rules).
    .addColumn('mail_from', 'text')
    .addColumn('client_ip', 'text')
    .addColumn('helo', 'text')
    .addColumn('auth_results', 'text')
    .addColumn('spam_flags', 'text')
    // Labeling: pending until the labeler ran; `label` is the category name (null = none).
    .addColumn('labeling', 'text', (c) => c.notNull())
    .addColumn('label', 'text')
    .addColumn('labeled_at', 'text')
    .addColumn('read_at', 'text')
    .addColumn('read_by_user_id', 'text')
    .addColumn('read_by_api_key_id', 'text')
    .addColumn('delivery', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addUniqueConstraint('emails_mailbox_seq', ['mailbox_id', 'seq'])
    .execute();
  await db.schema.createIndex('emails_message_id').on('emails').columns(['mailbox_id', 'message_id']).execute();
  await db.schema.createIndex('emails_thread_key').on('emails').columns(['mailbox_id', 'thread_key']).execute();
  // The labeler's sweep finds pending emails (few at any time) without scanning.
  await db.schema.createIndex('emails_labeling').on('emails').columns(['labeling', 'created_at']).execute();
  await db.schema.createIndex('emails_conversation').on('emails').columns(['mailbox_id', 'conversation_id', 'seq']).execute();

  await db.schema.alterTable('mailboxes').addColumn('email_seq', 'bigint', (c) => c.notNull().defaultTo(0)).execute();
  // Sender allowlist (its settings endpoint comes with the addresses issue).
  await db.schema.alterTable('mailboxes').addColumn('allowlist_enabled', 'integer', (c) => c.notNull().defaultTo(0)).execute();
  await db.schema.alterTable('mailboxes').addColumn('allowlist_entries', 'text', (c) => c.notNull().defaultTo('[]')).execute();
  await db.schema.alterTable('mailboxes').addColumn('allowlist_version', 'text').execute();
  await db.schema.alterTable('mailboxes').addColumn('receiving_blocked_reason', 'text').execute();

  // Received mail per UTC month, per mailbox and per billing group (the monthly allowances).
  await db.schema
    .createTable('received_usage')
    .addColumn('scope_id', 'text', (c) => c.notNull())
    .addColumn('period', 'text', (c) => c.notNull())
    .addColumn('count', 'bigint', (c) => c.notNull())
    .addColumn('bytes', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('received_usage_pk', ['scope_id', 'period'])
    .execute();

  // Events for webhooks and the live channel (the outbox), written in the change's transaction.
  await db.schema
    .createTable('events')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('type', 'text', (c) => c.notNull())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('mailbox_id', 'text', (c) => c.notNull())
    .addColumn('payload', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('events_mailbox').on('events').columns(['mailbox_id', 'created_at']).execute();
}
