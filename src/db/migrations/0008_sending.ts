import type { Kysely } from 'kysely';

// Sending email: the outbound queue (one row per message and one per recipient), the monthly
// recipient allowance, per-domain DKIM keys, and an index for the per-mailbox send rate.
export async function up(db: Kysely<any>): Promise<void> {
  // A message to deliver: a sent email of a mailbox (id = the email id; bytes = its message.eml
  // blob) or mail the service sends itself (sign-in codes, notices: bytes sealed with AES-GCM and
  // dropped once every recipient is final, so codes do not linger in plain text).
  await db.schema
    .createTable('outbound_messages')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('mailbox_id', 'text')
    .addColumn('account_id', 'text')
    .addColumn('envelope_from', 'text', (c) => c.notNull())
    .addColumn('message_id', 'text', (c) => c.notNull())
    .addColumn('raw_sha256', 'text')
    .addColumn('sealed_raw', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();

  // Per-recipient delivery state: queued → sending → sent | deferred | failed | bounced.
  // `sending` is written (committed) before the remote transaction starts: a recipient found in it
  // later was interrupted mid-delivery (see docs/sending.md, "Exactly once").
  await db.schema
    .createTable('outbound_recipients')
    .addColumn('message_id', 'text', (c) => c.notNull().references('outbound_messages.id'))
    .addColumn('address', 'text', (c) => c.notNull())
    .addColumn('position', 'integer', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('attempts', 'integer', (c) => c.notNull())
    .addColumn('last_reply', 'text')
    .addColumn('route', 'text')
    .addColumn('attempt_started_at', 'text')
    .addColumn('sent_at', 'text')
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('outbound_recipients_pk', ['message_id', 'address'])
    .execute();

  // Monthly recipient allowance: one row per distinct recipient per billing group and UTC month.
  await db.schema
    .createTable('sent_recipients_usage')
    .addColumn('scope_id', 'text', (c) => c.notNull())
    .addColumn('period', 'text', (c) => c.notNull())
    .addColumn('address', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('sent_recipients_usage_pk', ['scope_id', 'period', 'address'])
    .execute();

  // DKIM keys per sending domain (PEM private key sealed with the service secret).
  await db.schema
    .createTable('dkim_keys')
    .addColumn('domain', 'text', (c) => c.primaryKey())
    .addColumn('selector', 'text', (c) => c.notNull())
    .addColumn('sealed_private_key', 'text', (c) => c.notNull())
    .addColumn('public_key', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();

  // The send rate counts a mailbox's recent sent emails.
  await db.schema.createIndex('emails_direction_time').on('emails').columns(['mailbox_id', 'direction', 'received_at']).execute();
}
