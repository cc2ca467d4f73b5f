import type { AccountsTable, MailboxesTable } from '../db/schema.ts';
import { limitsFor } from '../accounts/limits.service.ts';

/**
 * Why a mailbox cannot send now, or null when it can. One rule for the settings object
 * (`sending_enabled` / `sending_blocked_reason`) and for the send operation, so the two never
 * disagree. Reasons: `mailbox_archived`, `account_suspended`, `account_read_only`,
 * `plan_disallows_sending` (the plan's max_sent_emails_per_month is 0), `no_address`,
 * `sending_disabled` (turned off for this mailbox).
 */
export function sendingBlockedReason(
  m: Pick<MailboxesTable, 'archived_at' | 'sending_enabled'> & { address: string | null },
  account: Pick<AccountsTable, 'plan' | 'status' | 'suspended_at'>,
): string | null {
  if (m.archived_at !== null) return 'mailbox_archived';
  if (account.suspended_at) return 'account_suspended';
  if (account.status === 'read_only') return 'account_read_only';
  if (limitsFor(account).max_sent_emails_per_month === 0) return 'plan_disallows_sending';
  if (!m.address) return 'no_address';
  if (m.sending_enabled !== 1) return 'sending_disabled';
  return null;
}
