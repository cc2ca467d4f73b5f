export type AssignmentKind = 'primary' | 'alias';
export type AssignmentStatus = 'pending' | 'active' | 'failed';

export interface AddressAssignmentsTable {
  id: string;
  mailbox_id: string;
  account_id: string;
  kind: AssignmentKind;
  status: AssignmentStatus;
  hostname: string;
  local_part: string;
  username: string;
  /** The candidate address: never routed, never shown while pending. */
  address: string;
  reserve_key: string | null;
  old_address: string | null;
  keep_old_as_alias: number;
  /** JSON {code, message, retryable} when failed. */
  error: string | null;
  created_by_user_id: string | null;
  created_by_api_key_id: string | null;
  created_at: string;
  updated_at: string;
  finished_at: string | null;
}

export interface AddressRotationsTable {
  id: string;
  billing_group_id: string;
  account_id: string;
  mailbox_id: string;
  created_at: string;
}

declare module '../db/schema.ts' {
  interface DB {
    address_assignments: AddressAssignmentsTable;
    address_rotations: AddressRotationsTable;
  }
}
