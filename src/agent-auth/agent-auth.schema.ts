// Row types of the agent-access tables (migration 0011), merged into the DB interface.

export type ConnectionKind = 'oauth_device' | 'oauth_code' | 'email_code' | 'grant';

export interface AgentConnectionsTable {
  id: string;
  user_id: string;
  account_id: string;
  /** The api_keys row that carries the connection's scope and mailbox permissions. */
  api_key_id: string;
  kind: ConnectionKind;
  client_id: string | null;
  client_name: string | null;
  resource: string | null;
  oauth_scope: string | null;
  created_at: string;
  revoked_at: string | null;
  revoked_reason: string | null;
}

export interface OAuthClientsTable {
  id: string;
  client_name: string;
  /** JSON arrays. */
  redirect_uris: string;
  grant_types: string;
  response_types: string;
  token_endpoint_auth_method: 'none' | 'client_secret_post' | 'client_secret_basic';
  client_secret_hash: string | null;
  /** JSON: the other registered metadata, echoed back. */
  metadata: string;
  created_ip: string | null;
  created_at: string;
}

export type DeviceCodeStatus = 'pending' | 'approved' | 'denied' | 'consumed';
export interface OAuthDeviceCodesTable {
  id: string;
  device_code_hash: string;
  user_code: string;
  client_id: string;
  scope: string;
  resource: string;
  want_api_key: number;
  status: DeviceCodeStatus;
  interval_seconds: number;
  last_polled_at: string | null;
  expires_at: string;
  user_id: string | null;
  connection_id: string | null;
  decided_at: string | null;
  created_at: string;
}

export interface OAuthAuthCodesTable {
  id: string;
  code_hash: string;
  client_id: string;
  connection_id: string;
  redirect_uri: string;
  code_challenge: string;
  scope: string;
  resource: string;
  want_api_key: number;
  expires_at: string;
  used_at: string | null;
  created_at: string;
}

export interface OAuthPendingAuthorizationsTable {
  id: string;
  client_id: string;
  redirect_uri: string;
  state: string | null;
  code_challenge: string;
  scope: string;
  resource: string;
  want_api_key: number;
  expires_at: string;
  created_at: string;
}

export interface OAuthTokensTable {
  id: string;
  token_hash: string;
  connection_id: string;
  kind: 'access' | 'refresh';
  scope: string;
  resource: string;
  expires_at: string;
  rotated_at: string | null;
  revoked_at: string | null;
  created_at: string;
}

export interface AgentSignInCodesTable {
  id: string;
  email: string;
  user_id: string;
  code_hmac: string;
  account_id: string | null;
  failed_attempts: number;
  expires_at: string;
  consumed_at: string | null;
  created_at: string;
}

export interface AgentGrantsTable {
  id: string;
  token_hash: string;
  user_id: string;
  account_id: string;
  scope: string;
  mailbox_access: string;
  /** JSON: mailbox id → read|write. */
  mailbox_permissions: string;
  label: string | null;
  expires_at: string;
  consumed_at: string | null;
  connection_id: string | null;
  created_at: string;
}

export interface BrowserLoginLinksTable {
  id: string;
  token_hash: string;
  user_id: string;
  api_key_id: string;
  redirect_path: string;
  expires_at: string;
  used_at: string | null;
  created_at: string;
}

export interface AgentAuthAttemptsTable {
  id: string;
  kind: string;
  subject: string;
  created_at: string;
}

declare module '../db/schema.ts' {
  interface DB {
    agent_connections: AgentConnectionsTable;
    oauth_clients: OAuthClientsTable;
    oauth_device_codes: OAuthDeviceCodesTable;
    oauth_auth_codes: OAuthAuthCodesTable;
    oauth_pending_authorizations: OAuthPendingAuthorizationsTable;
    oauth_tokens: OAuthTokensTable;
    agent_sign_in_codes: AgentSignInCodesTable;
    agent_grants: AgentGrantsTable;
    browser_login_links: BrowserLoginLinksTable;
    agent_auth_attempts: AgentAuthAttemptsTable;
  }
}
