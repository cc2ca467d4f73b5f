import type { Kysely } from 'kysely';
import type { AccountsTable, DB } from '../db/schema.ts';
import { utcMonthStart } from '../time.ts';
import { groupUsage } from '../files/files.repo.ts';
import { countGroupMailboxes, countGroupCreationsSince } from '../mailboxes/mailboxes.repo.ts';
import { countGroupRotationsSince } from '../addresses/addresses.repo.ts';
import { receivedUsage } from '../inbound/usage.ts';
import { sentRecipientCount } from '../outbound/allowance.ts';
import { activeConnectionCount } from '../agent-auth/connections.service.ts';
import { billingGroupId } from './accounts.service.ts';
import { limitsFor } from './limits.service.ts';
import type { PlanLimits } from './plans.ts';

// What an account uses against each limit of GET /v1/account/limits, for the account page.
// Each figure is counted where the limit is enforced (the billing group for shared allowances).

export interface UsageLine {
  key: keyof PlanLimits;
  label: string;
  used: number;
  limit: number | null;
  bytes?: boolean;
}

export async function accountUsage(db: Kysely<DB>, account: AccountsTable, now: Date): Promise<UsageLine[]> {
  const limits = limitsFor(account);
  const group = billingGroupId(account);
  const month = utcMonthStart(now);
  const [mailboxes, creations, storage, received, sent, rotations, members, keys, connections] = await Promise.all([
    countGroupMailboxes(db, group),
    countGroupCreationsSince(db, group, month),
    groupUsage(db, group),
    receivedUsage(db, group, now),
    sentRecipientCount(db, group, now),
    countGroupRotationsSince(db, group, month),
    db.selectFrom('memberships').select((eb) => eb.fn.countAll<number>().as('n')).where('account_id', '=', account.id).executeTakeFirstOrThrow(),
    db.selectFrom('api_keys').select((eb) => eb.fn.countAll<number>().as('n')).where('default_account_id', '=', account.id).where('revoked_at', 'is', null).executeTakeFirstOrThrow(),
    activeConnectionCount(db, account.id),
  ]);
  return [
    { key: 'max_mailboxes', label: 'Mailboxes', used: mailboxes, limit: limits.max_mailboxes },
    { key: 'max_mailbox_creations_per_month', label: 'Mailboxes created this month', used: creations, limit: limits.max_mailbox_creations_per_month },
    { key: 'max_storage_bytes', label: 'Storage', used: storage.storage, limit: limits.max_storage_bytes, bytes: true },
    { key: 'max_received_emails_per_month', label: 'Mail received this month', used: received.count, limit: limits.max_received_emails_per_month },
    { key: 'max_sent_emails_per_month', label: 'Mail sent this month (recipients)', used: sent, limit: limits.max_sent_emails_per_month },
    { key: 'max_email_address_rotations_per_month', label: 'Address rotations this month', used: rotations, limit: limits.max_email_address_rotations_per_month },
    { key: 'max_account_members', label: 'Members', used: Number(members.n), limit: limits.max_account_members },
    { key: 'max_api_keys', label: 'API keys', used: Number(keys.n), limit: limits.max_api_keys },
    { key: 'max_agent_connections', label: 'AI connections', used: connections, limit: limits.max_agent_connections },
  ];
}
