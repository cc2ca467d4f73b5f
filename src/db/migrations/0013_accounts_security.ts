import { sql, type Kysely } from 'kysely';

// Accounts, teams and sign-in security: email verification, TOTP two-factor with recovery codes,
// one-time tokens (email verification, password reset, the pending second factor), invitations
// and collaborators' per-mailbox access. Every secret is stored hashed (the TOTP seed sealed).
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('users').addColumn('email_verified_at', 'text').execute();
  await db.schema.alterTable('users').addColumn('totp_secret', 'text').execute();
  await db.schema.alterTable('users').addColumn('totp_last_step', 'bigint').execute();
  await db.schema.alterTable('users').addColumn('password_changed_at', 'text').execute();
  // Shown on the security page's list of active sessions.
  await db.schema.alterTable('sessions').addColumn('user_agent', 'text').execute();
  await db.schema.alterTable('sessions').addColumn('ip', 'text').execute();
  // People who existed before verification was asked for keep what they could do.
  await sql`UPDATE users SET email_verified_at = created_at`.execute(db);

  await db.schema
    .createTable('user_tokens')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('user_id', 'text', (c) => c.notNull().references('users.id'))
    // verify_email, password_reset, two_factor (a password checked, the second factor pending)
    .addColumn('purpose', 'text', (c) => c.notNull())
    .addColumn('token_hash', 'text', (c) => c.notNull().unique())
    .addColumn('data', 'text')
    .addColumn('expires_at', 'text', (c) => c.notNull())
    .addColumn('used_at', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('user_tokens_user').on('user_tokens').columns(['user_id', 'purpose']).execute();

  await db.schema
    .createTable('recovery_codes')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('user_id', 'text', (c) => c.notNull().references('users.id'))
    .addColumn('code_hash', 'text', (c) => c.notNull())
    .addColumn('used_at', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('recovery_codes_user').on('recovery_codes').column('user_id').execute();

  await db.schema
    .createTable('invitations')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id'))
    .addColumn('email', 'text', (c) => c.notNull())
    .addColumn('role', 'text', (c) => c.notNull())
    // JSON array of mailbox ids a collaborator may reach; null means every mailbox.
    .addColumn('mailbox_ids', 'text')
    .addColumn('token_hash', 'text', (c) => c.notNull().unique())
    .addColumn('invited_by', 'text')
    .addColumn('expires_at', 'text', (c) => c.notNull())
    .addColumn('accepted_at', 'text')
    .addColumn('accepted_by', 'text')
    .addColumn('revoked_at', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('invitations_account').on('invitations').columns(['account_id', 'created_at']).execute();

  await db.schema
    .createTable('membership_mailboxes')
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('user_id', 'text', (c) => c.notNull())
    .addColumn('mailbox_id', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('membership_mailboxes_pk', ['account_id', 'user_id', 'mailbox_id'])
    .execute();
}
