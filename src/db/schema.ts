// Row types as stored. Dialect-neutral: booleans are 0/1 integers, times are
// ISO-8601 UTC strings with milliseconds (they sort as text), JSON is text.
export interface UsersTable {
  id: string;
  email: string;
  name: string;
  password_hash: string;
  two_factor_enabled: number;
  /** Null until the address is verified: sending mail and publishing wait for it. */
  email_verified_at?: string | null;
  /** The TOTP seed, sealed with the service secret; null without two-factor. */
  totp_secret?: string | null;
  /** The last TOTP time step accepted, so that a code is never accepted twice. */
  totp_last_step?: number | null;
  password_changed_at?: string | null;
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
  /** The account's logo (src/accounts/logo.service.ts): its blob and sniffed image type, or null. */
  logo_sha256: string | null;
  logo_content_type: string | null;
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
  user_agent?: string | null;
  ip?: string | null;
}

export interface SignInAttemptsTable {
  id: string;
  email: string;
  ip: string;
  succeeded: number;
  created_at: string;
}

export interface MailboxesTable {
  id: string;
  account_id: string;
  title: string | null;
  title_key: string | null;
  description: string | null;
  metadata: string;
  metadata_version: string;
  tag_paths: string;
  receiving_enabled: number;
  sending_enabled: number;
  storage_bytes: number;
  files_count: number;
  version_id: string | null;
  version_number: number;
  lock_kind: string | null;
  lock_message: string | null;
  locked_until: string | null;
  locked_by_user_id: string | null;
  locked_by_api_key_id: string | null;
  lock_progress: string | null;
  message_count: number;
  unread_count: number;
  last_received_at: string | null;
  last_received_path: string | null;
  email_seq: number;
  allowlist_enabled: number;
  /** JSON array of lower-cased addresses or `@domain` entries. */
  allowlist_entries: string;
  allowlist_version: string | null;
  receiving_blocked_reason: string | null;
  created_by_user_id: string | null;
  created_by_api_key_id: string | null;
  archived_at: string | null;
  deleted_at: string | null;
  created_at: string;
  updated_at: string;
}

export type AddressRole = 'primary' | 'alias' | 'retired';
export interface EmailAddressesTable {
  id: string;
  mailbox_id: string;
  account_id: string;
  local_part: string;
  domain: string;
  address: string;
  username: string;
  role: AddressRole;
  created_at: string;
  retired_at: string | null;
}

export interface MailboxCreationsTable {
  id: string;
  billing_group_id: string;
  account_id: string;
  mailbox_id: string;
  created_at: string;
}

export interface IdempotencyKeysTable {
  scope: string;
  key: string;
  request_hash: string;
  resource_id: string;
  created_at: string;
}

export interface BlobsTable {
  sha256: string;
  byte_size: number;
  md5: string;
  created_at: string;
  /** The bytes themselves, for a small blob stored with its row (src/blobs/inline-blobs.ts); null: in the blob store. */
  inline_bytes?: Buffer | null;
}

export interface MailboxVersionsTable {
  id: string;
  mailbox_id: string;
  version_number: number;
  action: string;
  files_changed: number;
  created_by_user_id: string | null;
  created_by_api_key_id: string | null;
  created_at: string;
}

export type FileRole = 'source' | 'reference' | 'generated' | 'agent_output' | 'export' | 'artifact';
export interface FilesTable {
  id: string;
  mailbox_id: string;
  account_id: string;
  path: string;
  live_path: string | null;
  folder: string;
  basename: string;
  role: FileRole;
  created_by_system: string;
  current_version_id: string | null;
  version_count: number;
  read_at: string | null;
  read_by_user_id: string | null;
  read_by_api_key_id: string | null;
  created_by_user_id: string | null;
  created_by_api_key_id: string | null;
  created_by_agent: string | null;
  updated_by_user_id: string | null;
  updated_by_api_key_id: string | null;
  updated_by_agent: string | null;
  created_at: string;
  updated_at: string;
  deleted_at: string | null;
}

export interface FileVersionsTable {
  id: string;
  file_id: string;
  mailbox_id: string;
  version_number: number;
  name: string;
  path: string;
  mime_type: string;
  sha256: string | null;
  byte_size: number;
  reason: string | null;
  created_by_system: string;
  deleted: number;
  mailbox_version_id: string | null;
  read_at: string | null;
  read_by_user_id: string | null;
  read_by_api_key_id: string | null;
  created_by_user_id: string | null;
  created_by_api_key_id: string | null;
  created_by_agent: string | null;
  created_at: string;
}

export type DirectUploadStatus = 'pending' | 'uploaded' | 'consumed';
export interface DirectUploadsTable {
  id: string;
  account_id: string;
  mailbox_id: string;
  path: string;
  filename: string;
  byte_size: number;
  checksum: string;
  sha256: string;
  content_type: string;
  status: DirectUploadStatus;
  upload_session_id: string | null;
  expires_at: string;
  uploaded_at: string | null;
  created_by_user_id: string | null;
  created_by_api_key_id: string | null;
  created_at: string;
}

export type UploadSessionStatus = 'pending' | 'finalized' | 'expired' | 'failed';
export interface UploadSessionsTable {
  id: string;
  account_id: string;
  mailbox_id: string;
  status: UploadSessionStatus;
  pending_slot: string | null;
  client_session_key: string | null;
  delete_missing: number;
  expected_file_count: number | null;
  base_mailbox_version_id: string | null;
  reserved_version_id: string;
  target_mailbox_version_id: string | null;
  pruned_files_count: number;
  uploads_expire_at: string;
  session_closed_at: string | null;
  created_by_user_id: string | null;
  created_by_api_key_id: string | null;
  created_at: string;
  updated_at: string;
}

/** pending: declared (bytes may or may not be there); saved: in the tree; failed: discarded unsaved. */
export type UploadSessionFileStatus = 'pending' | 'saved' | 'skipped' | 'superseded' | 'failed';
export interface UploadSessionFilesTable {
  id: string;
  session_id: string;
  path: string;
  name: string | null;
  input_index: number;
  direct_upload_id: string | null;
  sha256: string;
  byte_size: number;
  content_type: string;
  status: UploadSessionFileStatus;
  skip_code: string | null;
  skip_reason: string | null;
  file_id: string | null;
  file_version_id: string | null;
  created: number;
  created_at: string;
  saved_at: string | null;
}

export type JobStatus = 'queued' | 'running' | 'done' | 'failed' | 'cancelled';
export interface JobsTable {
  id: string;
  task: string;
  payload: string;
  status: JobStatus;
  run_at: string;
  attempts: number;
  max_attempts: number;
  locked_until: string | null;
  locked_by: string | null;
  last_error: string | null;
  unique_key: string | null;
  created_at: string;
  updated_at: string;
  finished_at: string | null;
}

export type EmailDirection = 'received' | 'sent';
export type LabelingState = 'pending' | 'done';
export interface EmailsTable {
  id: string;
  mailbox_id: string;
  account_id: string;
  seq: number;
  direction: EmailDirection;
  conversation_id: string;
  thread_key: string | null;
  subject: string | null;
  /** Lower-cased subject for case-insensitive search on both databases. */
  subject_search: string | null;
  /** JSON arrays of {address, name}. */
  from_addresses: string;
  /** Lower-cased first From address (the `sender` filter). */
  sender_address: string | null;
  to_addresses: string;
  cc_addresses: string;
  reply_to_addresses: string;
  message_id: string | null;
  /** JSON arrays of Message-IDs. */
  in_reply_to: string;
  reference_ids: string;
  delivered_to: string;
  received_at: string;
  body_status: string;
  body_text: string | null;
  attachment_count: number;
  omitted_attachment_count: number;
  /** JSON array of {id, filename, content_type, size_bytes, version_id, origin, content_id}. */
  attachments: string;
  size_bytes: number;
  raw_sha256: string | null;
  directory: string | null;
  raw_file_id: string | null;
  raw_version_id: string | null;
  json_file_id: string | null;
  mail_from: string | null;
  client_ip: string | null;
  helo: string | null;
  /** JSON: {spf, dkim, dmarc, arc} summaries. */
  auth_results: string | null;
  /** JSON array of deterministic spam signals seen at receipt (e.g. `gtube`). */
  spam_flags: string | null;
  labeling: LabelingState;
  label: string | null;
  labeled_at: string | null;
  read_at: string | null;
  read_by_user_id: string | null;
  read_by_api_key_id: string | null;
  /** JSON: {status, recipients} for sent email. */
  delivery: string | null;
  created_at: string;
}

export interface ReceivedUsageTable {
  scope_id: string;
  period: string;
  count: number;
  bytes: number;
}

export interface EventsTable {
  id: string;
  type: string;
  account_id: string;
  mailbox_id: string;
  payload: string;
  created_at: string;
}

export interface DB {
  emails: EmailsTable;
  received_usage: ReceivedUsageTable;
  events: EventsTable;
  jobs: JobsTable;
  blobs: BlobsTable;
  mailbox_versions: MailboxVersionsTable;
  files: FilesTable;
  file_versions: FileVersionsTable;
  direct_uploads: DirectUploadsTable;
  upload_sessions: UploadSessionsTable;
  upload_session_files: UploadSessionFilesTable;
  mailboxes: MailboxesTable;
  email_addresses: EmailAddressesTable;
  mailbox_creations: MailboxCreationsTable;
  idempotency_keys: IdempotencyKeysTable;
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
