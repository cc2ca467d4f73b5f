// Tables of migration 0013: one-time tokens, recovery codes, invitations and collaborators'
// per-mailbox access. Times are ISO strings; JSON is text.

export type UserTokenPurpose = 'verify_email' | 'password_reset' | 'two_factor' | 'totp_setup';

export interface UserTokensTable {
  id: string;
  user_id: string;
  purpose: UserTokenPurpose;
  token_hash: string;
  data: string | null;
  expires_at: string;
  used_at: string | null;
  created_at: string;
}

export interface RecoveryCodesTable {
  id: string;
  user_id: string;
  code_hash: string;
  used_at: string | null;
  created_at: string;
}

export interface InvitationsTable {
  id: string;
  account_id: string;
  email: string;
  role: 'owner' | 'administrator' | 'collaborator';
  mailbox_ids: string | null;
  token_hash: string;
  invited_by: string | null;
  expires_at: string;
  accepted_at: string | null;
  accepted_by: string | null;
  revoked_at: string | null;
  created_at: string;
}

export interface MembershipMailboxesTable {
  account_id: string;
  user_id: string;
  mailbox_id: string;
}

declare module '../db/schema.ts' {
  interface DB {
    user_tokens: UserTokensTable;
    recovery_codes: RecoveryCodesTable;
    invitations: InvitationsTable;
    membership_mailboxes: MembershipMailboxesTable;
  }
}
