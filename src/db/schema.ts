// Row types as stored. Dialect-neutral: booleans are 0/1 integers, times are
// ISO-8601 UTC strings with milliseconds (they sort as text), JSON is text.
export interface UsersTable {
  id: string;
  email: string;
  name: string;
  password_hash: string;
  two_factor_enabled: number;
  created_at: string;
  updated_at: string;
}

export type AccountKind = 'standard' | 'agency' | 'client';
export type AccountStatus = 'active' | 'read_only';
export type PlanName = 'free' | 'paid' | 'pilot' | 'agency';

export interface AccountsTable {
  id: string;
  name: string;
  kind: AccountKind;
  client_name: string | null;
  parent_account_id: string | null;
  plan: PlanName;
  region: string | null;
  status: AccountStatus;
  previous_status: AccountStatus | null;
  status_reason: string | null;
  status_updated_at: string | null;
  suspended_at: string | null;
  website_publishing_enabled: number;
  created_at: string;
  updated_at: string;
}

export type MembershipRole = 'owner' | 'administrator' | 'collaborator';
export interface MembershipsTable {
  id: string;
  account_id: string;
  user_id: string;
  role: MembershipRole;
  created_at: string;
}

export type Scope = 'mailbox_read' | 'mailbox_write' | 'mailbox_admin';
export type MailboxAccess = 'all' | 'selected';
export interface ApiKeysTable {
  id: string;
  user_id: string;
  token_hash: string;
  token_hint: string;
  label: string | null;
  token_type: string;
  scope: Scope;
  mailbox_access: MailboxAccess;
  default_account_id: string;
  include_client_accounts: number;
  transport: string;
  expires_at: string | null;
  revoked_at: string | null;
  last_used_at: string | null;
  last_used_agent: string | null;
  created_at: string;
}

export interface ApiKeyAccountsTable {
  api_key_id: string;
  account_id: string;
}

export interface ApiKeyMailboxesTable {
  api_key_id: string;
  mailbox_id: string;
  permission: 'read' | 'write';
}

export interface ActivityTable {
  id: string;
  account_id: string;
  user_id: string | null;
  api_key_id: string | null;
  agent: string | null;
  action: string;
  target_type: string;
  target_id: string | null;
  reason: string | null;
  request_id: string | null;
  created_at: string;
}

export interface SessionsTable {
  id: string;
  token_hash: string;
  user_id: string;
  created_at: string;
  expires_at: string;
  last_seen_at: string;
}

export interface SignInAttemptsTable {
  id: string;
  email: string;
  ip: string;
  succeeded: number;
  created_at: string;
}

export interface DB {
  users: UsersTable;
  accounts: AccountsTable;
  memberships: MembershipsTable;
  api_keys: ApiKeysTable;
  api_key_accounts: ApiKeyAccountsTable;
  api_key_mailboxes: ApiKeyMailboxesTable;
  activity: ActivityTable;
  sessions: SessionsTable;
  sign_in_attempts: SignInAttemptsTable;
}
