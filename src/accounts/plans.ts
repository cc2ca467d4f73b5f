import type { PlanName } from '../db/schema.ts';

// Every limit key of the spec's "Limits" section, per plan, in one table.
// Zero means no allowance; null means no cap. Storage, mailbox and email traffic
// allowances are shared by a billing group (an agency and its client accounts).
export interface PlanLimits {
  max_mailboxes: number | null;
  max_mailbox_creations_per_month: number | null;
  max_files_per_mailbox: number | null;
  max_current_files: number | null;
  max_storage_bytes: number | null;
  max_file_size_bytes: number | null;
  max_pdf_size_bytes: number | null;
  max_file_versions_per_file: number | null;
  max_email_domains: number | null;
  max_received_emails_per_month: number | null;
  max_received_email_bytes_per_month: number | null;
  max_received_email_message_bytes: number | null;
  max_sent_emails_per_month: number | null;
  max_email_address_rotations_per_month: number | null;
  max_account_members: number | null;
  max_api_keys: number | null;
  max_agent_connections: number | null;
  api_rate_limit_requests_per_minute: number | null;
  audit_retention_days: number | null;
  /** Never null; zero means no aliases. */
  max_email_aliases_per_mailbox: number;
}

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;

export const PLANS: Readonly<Record<PlanName, Readonly<PlanLimits>>> = Object.freeze({
  free: {
    max_mailboxes: 5,
    max_mailbox_creations_per_month: 20,
    max_files_per_mailbox: 5_000,
    max_current_files: 20_000,
    max_storage_bytes: 2 * GiB,
    max_file_size_bytes: 100 * MiB,
    max_pdf_size_bytes: 50 * MiB,
    max_file_versions_per_file: 25,
    max_email_domains: 0,
    max_received_emails_per_month: 2_000,
    max_received_email_bytes_per_month: 2 * GiB,
    max_received_email_message_bytes: 25 * MiB,
    max_sent_emails_per_month: 100,
    max_email_address_rotations_per_month: 1,
    max_account_members: 3,
    max_api_keys: 20,
    max_agent_connections: 10,
    api_rate_limit_requests_per_minute: 600,
    audit_retention_days: 30,
    max_email_aliases_per_mailbox: 0,
  },
  paid: {
    max_mailboxes: 100,
    max_mailbox_creations_per_month: 500,
    max_files_per_mailbox: 100_000,
    max_current_files: 1_000_000,
    max_storage_bytes: 100 * GiB,
    max_file_size_bytes: 5 * GiB,
    max_pdf_size_bytes: 500 * MiB,
    max_file_versions_per_file: 100,
    max_email_domains: 0,
    max_received_emails_per_month: 50_000,
    max_received_email_bytes_per_month: 50 * GiB,
    max_received_email_message_bytes: 50 * MiB,
    max_sent_emails_per_month: 5_000,
    max_email_address_rotations_per_month: 10,
    max_account_members: 25,
    max_api_keys: 100,
    max_agent_connections: 50,
    api_rate_limit_requests_per_minute: 3_000,
    audit_retention_days: 365,
    max_email_aliases_per_mailbox: 5,
  },
  pilot: {
    max_mailboxes: 250,
    max_mailbox_creations_per_month: 1_000,
    max_files_per_mailbox: 100_000,
    max_current_files: 2_000_000,
    max_storage_bytes: 250 * GiB,
    max_file_size_bytes: 5 * GiB,
    max_pdf_size_bytes: 500 * MiB,
    max_file_versions_per_file: 100,
    max_email_domains: 10,
    max_received_emails_per_month: 100_000,
    max_received_email_bytes_per_month: 100 * GiB,
    max_received_email_message_bytes: 50 * MiB,
    max_sent_emails_per_month: 10_000,
    max_email_address_rotations_per_month: 10,
    max_account_members: 50,
    max_api_keys: 200,
    max_agent_connections: 100,
    api_rate_limit_requests_per_minute: 6_000,
    audit_retention_days: 365,
    max_email_aliases_per_mailbox: 10,
  },
  agency: {
    max_mailboxes: 500,
    max_mailbox_creations_per_month: 2_000,
    max_files_per_mailbox: 100_000,
    max_current_files: 2_000_000,
    max_storage_bytes: 500 * GiB,
    max_file_size_bytes: 5 * GiB,
    max_pdf_size_bytes: 500 * MiB,
    max_file_versions_per_file: 100,
    max_email_domains: 10,
    max_received_emails_per_month: 200_000,
    max_received_email_bytes_per_month: 200 * GiB,
    max_received_email_message_bytes: 50 * MiB,
    max_sent_emails_per_month: 20_000,
    max_email_address_rotations_per_month: 10,
    max_account_members: 15,
    max_api_keys: 200,
    max_agent_connections: 100,
    api_rate_limit_requests_per_minute: 6_000,
    audit_retention_days: 365,
    max_email_aliases_per_mailbox: 10,
  },
});

/** An agency and its clients: ten accounts in all, 15 unique people (owner counted once). */
export const AGENCY_MAX_ACCOUNTS = 10;
export const AGENCY_MAX_PEOPLE = 15;

export function isPaidPlan(plan: PlanName): boolean {
  return plan !== 'free';
}
