import type { Kysely } from 'kysely';

// Agent access: connections (each backed by one api_keys row that carries its scope and
// mailbox permissions), OAuth clients, device and authorization codes, OAuth tokens, email
// sign-in codes, one-time connection grants, browser login links and the throttle log.
// Every secret is stored as a SHA-256 hash (sign-in codes as an HMAC: six digits hash too easily).
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('agent_connections')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('user_id', 'text', (c) => c.notNull().references('users.id'))
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id'))
    .addColumn('api_key_id', 'text', (c) => c.notNull().unique().references('api_keys.id'))
    // oauth_device, oauth_code, email_code, grant
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('client_id', 'text')
    .addColumn('client_name', 'text')
    .addColumn('resource', 'text')
    .addColumn('oauth_scope', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('revoked_at', 'text')
    .addColumn('revoked_reason', 'text')
    .execute();
  await db.schema.createIndex('agent_connections_member').on('agent_connections').columns(['account_id', 'user_id']).execute();
  await db.schema.createIndex('agent_connections_user').on('agent_connections').column('user_id').execute();

  await db.schema
    .createTable('oauth_clients')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('client_name', 'text', (c) => c.notNull())
    .addColumn('redirect_uris', 'text', (c) => c.notNull())
    .addColumn('grant_types', 'text', (c) => c.notNull())
    .addColumn('response_types', 'text', (c) => c.notNull())
    .addColumn('token_endpoint_auth_method', 'text', (c) => c.notNull())
    .addColumn('client_secret_hash', 'text')
    .addColumn('metadata', 'text', (c) => c.notNull())
    .addColumn('created_ip', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();

  await db.schema
    .createTable('oauth_device_codes')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('device_code_hash', 'text', (c) => c.notNull().unique())
    .addColumn('user_code', 'text', (c) => c.notNull().unique())
    .addColumn('client_id', 'text', (c) => c.notNull().references('oauth_clients.id'))
    .addColumn('scope', 'text', (c) => c.notNull())
    .addColumn('resource', 'text', (c) => c.notNull())
    .addColumn('want_api_key', 'integer', (c) => c.notNull())
    // pending, approved, denied, consumed
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('interval_seconds', 'integer', (c) => c.notNull())
    .addColumn('last_polled_at', 'text')
    .addColumn('expires_at', 'text', (c) => c.notNull())
    .addColumn('user_id', 'text')
    .addColumn('connection_id', 'text')
    .addColumn('decided_at', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();

  await db.schema
    .createTable('oauth_auth_codes')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('code_hash', 'text', (c) => c.notNull().unique())
    .addColumn('client_id', 'text', (c) => c.notNull().references('oauth_clients.id'))
    .addColumn('connection_id', 'text', (c) => c.notNull().references('agent_connections.id'))
    .addColumn('redirect_uri', 'text', (c) => c.notNull())
    .addColumn('code_challenge', 'text', (c) => c.notNull())
    .addColumn('scope', 'text', (c) => c.notNull())
    .addColumn('resource', 'text', (c) => c.notNull())
    .addColumn('want_api_key', 'integer', (c) => c.notNull())
    .addColumn('expires_at', 'text', (c) => c.notNull())
    .addColumn('used_at', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();

  // An authorization request waiting for the person's decision (and perhaps their sign-in):
  // the consent page and its form refer to it by id instead of carrying every parameter.
  await db.schema
    .createTable('oauth_pending_authorizations')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('client_id', 'text', (c) => c.notNull().references('oauth_clients.id'))
    .addColumn('redirect_uri', 'text', (c) => c.notNull())
    .addColumn('state', 'text')
    .addColumn('code_challenge', 'text', (c) => c.notNull())
    .addColumn('scope', 'text', (c) => c.notNull())
    .addColumn('resource', 'text', (c) => c.notNull())
    .addColumn('want_api_key', 'integer', (c) => c.notNull())
    .addColumn('expires_at', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();

  await db.schema
    .createTable('oauth_tokens')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('token_hash', 'text', (c) => c.notNull().unique())
    .addColumn('connection_id', 'text', (c) => c.notNull().references('agent_connections.id'))
    // access or refresh
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('scope', 'text', (c) => c.notNull())
    .addColumn('resource', 'text', (c) => c.notNull())
    .addColumn('expires_at', 'text', (c) => c.notNull())
    // refresh tokens: set when exchanged for a new pair; a second exchange is reuse
    .addColumn('rotated_at', 'text')
    .addColumn('revoked_at', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('oauth_tokens_connection').on('oauth_tokens').columns(['connection_id', 'kind']).execute();

  await db.schema
    .createTable('agent_sign_in_codes')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('email', 'text', (c) => c.notNull())
    .addColumn('user_id', 'text', (c) => c.notNull().references('users.id'))
    .addColumn('code_hmac', 'text', (c) => c.notNull())
    .addColumn('account_id', 'text')
    .addColumn('failed_attempts', 'integer', (c) => c.notNull())
    .addColumn('expires_at', 'text', (c) => c.notNull())
    .addColumn('consumed_at', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('agent_sign_in_codes_email').on('agent_sign_in_codes').columns(['email', 'created_at']).execute();

  await db.schema
    .createTable('agent_grants')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('token_hash', 'text', (c) => c.notNull().unique())
    .addColumn('user_id', 'text', (c) => c.notNull().references('users.id'))
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id'))
    .addColumn('scope', 'text', (c) => c.notNull())
    .addColumn('mailbox_access', 'text', (c) => c.notNull())
    .addColumn('mailbox_permissions', 'text', (c) => c.notNull())
    .addColumn('label', 'text')
    .addColumn('expires_at', 'text', (c) => c.notNull())
    .addColumn('consumed_at', 'text')
    .addColumn('connection_id', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();

  await db.schema
    .createTable('browser_login_links')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('token_hash', 'text', (c) => c.notNull().unique())
    .addColumn('user_id', 'text', (c) => c.notNull().references('users.id'))
    .addColumn('api_key_id', 'text', (c) => c.notNull())
    .addColumn('redirect_path', 'text', (c) => c.notNull())
    .addColumn('expires_at', 'text', (c) => c.notNull())
    .addColumn('used_at', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();

  // One log for every agent-access throttle (codes requested and failed, registrations,
  // device authorizations), so that all nodes count the same attempts.
  await db.schema
    .createTable('agent_auth_attempts')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('subject', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('agent_auth_attempts_subject').on('agent_auth_attempts').columns(['kind', 'subject', 'created_at']).execute();
}
