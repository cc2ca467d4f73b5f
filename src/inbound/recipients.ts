import type { Expression, ExpressionBuilder, Kysely, SqlBool } from 'kysely';
import type { AppDeps } from '../context.ts';
import type { DB } from '../db/schema.ts';
import type { PlanLimits } from '../accounts/plans.ts';
import { limitsFor } from '../accounts/limits.service.ts';
import { billingGroupId } from '../accounts/accounts.service.ts';
import { AppError } from '../errors.ts';
import { compiledQuery } from '../db/compiled-query.ts';
import { receivedUsage, usagePeriod } from './usage.ts';
import { senderAllowed } from './allowlist.ts';
import { customDomainBlock, isVerifiedCustomDomain } from '../domains/domains.repo.ts';
import { aliasActive } from '../addresses/addresses.repo.ts';

/** A recipient accepted at RCPT time: where the message goes and what caps apply. */
export interface Recipient {
  /** The RCPT address as routed (lower-case). */
  address: string;
  mailboxId: string;
  accountId: string;
  groupId: string;
  limits: PlanLimits;
  /** Largest message this mailbox accepts. */
  maxMessageBytes: number;
  /** The billing group's received usage this month as read at RCPT (for the end-of-DATA check). */
  usedAtRcpt: ReceivedUsage;
}

export interface ReceivedUsage {
  count: number;
  bytes: number;
  /** The month read (usagePeriod). */
  period: string;
}

/** The cap when a plan sets none: the SMTP server's own size limit. */
export const SERVER_MAX_MESSAGE_BYTES = 64 * 1024 * 1024;

const ADDRESS = /^[^\s@<>()\[\],;:"\\]{1,64}@[a-z0-9.-]{1,253}$/;

/**
 * The RCPT lookup: the address's mailbox and account, and the account's billing group's received
 * usage this month (one query per RCPT; built once, src/db/compiled-query.ts).
 */
const RECIPIENT_LOOKUP = compiledQuery(
  (db, address: string, period: string) =>
    db
      .selectFrom('email_addresses')
      .innerJoin('mailboxes', 'mailboxes.id', 'email_addresses.mailbox_id')
      .innerJoin('accounts', 'accounts.id', 'mailboxes.account_id')
      // The group is the parent account, else the account itself (billingGroupId).
      .leftJoin('received_usage', (join) =>
        join.on((eb) => eb.and([eb('received_usage.scope_id', '=', eb.fn.coalesce('accounts.parent_account_id', 'accounts.id')), eb('received_usage.period', '=', period)])),
      )
      .select([
        'email_addresses.role', 'email_addresses.id as address_id', 'email_addresses.domain as address_domain', 'mailboxes.id as mailbox_id', 'mailboxes.archived_at', 'mailboxes.deleted_at', 'mailboxes.receiving_enabled',
        'mailboxes.receiving_blocked_reason', 'mailboxes.allowlist_enabled', 'mailboxes.allowlist_entries',
        'accounts.id as account_id', 'accounts.parent_account_id', 'accounts.plan', 'accounts.status', 'accounts.suspended_at',
        'received_usage.count as used_count', 'received_usage.bytes as used_bytes',
      ])
      .where('email_addresses.address', '=', address),
  2,
);

/**
 * Decides RCPT TO for one address: our mailbox (550 5.1.1 when unknown on our domains, 550 5.7.1
 * for other domains: never an open relay), receiving state, account state, sender allowlist, and
 * the monthly received allowances (452 count, 552 bytes). Throws AppError with an `smtp` reply.
 */
export async function resolveRecipient(deps: AppDeps, rcpt: string, mailFrom: string | null, declaredSize: number | null): Promise<Recipient> {
  const address = rcpt.trim().toLowerCase();
  if (!ADDRESS.test(address)) throw new AppError('RECIPIENT_UNKNOWN', `${rcpt.slice(0, 100)}: not a valid mailbox address`);
  const domain = address.slice(address.lastIndexOf('@') + 1);
  const period = usagePeriod(deps.now());
  const row = await RECIPIENT_LOOKUP.executeTakeFirst(deps.db, address, period);
  if (!row) {
    if (!(await isOurDomain(deps, domain))) throw new AppError('RECIPIENT_NOT_LOCAL', `${address}: relay access denied`);
    throw new AppError('RECIPIENT_UNKNOWN', `${address}: no such mailbox`);
  }
  // A custom domain is ours only while a verified claim holds it. Addresses left on a domain that was
  // removed (retired ones, those of deleted mailboxes) must not keep it local: its mail may go
  // elsewhere now, and our own senders must reach it there rather than bounce here.
  if (row.address_domain !== deps.config.mailDomain && !(await isVerifiedCustomDomain(deps.db, row.address_domain))) {
    throw new AppError('RECIPIENT_NOT_LOCAL', `${address}: relay access denied`);
  }
  if (row.role === 'retired' || row.deleted_at) throw new AppError('RECIPIENT_UNKNOWN', `${address}: no such mailbox`);
  if (row.archived_at) throw new AppError('MAILBOX_NOT_RECEIVING', `${address}: mailbox is archived`, { reason: 'archived' });
  if (!row.receiving_enabled) throw new AppError('MAILBOX_NOT_RECEIVING', `${address}: receiving is disabled${row.receiving_blocked_reason ? ` (${row.receiving_blocked_reason})` : ''}`, { reason: row.receiving_blocked_reason ?? 'disabled' });
  if (row.suspended_at) throw new AppError('MAILBOX_NOT_RECEIVING', `${address}: account is suspended`, { reason: 'account_suspended' });
  if (row.status === 'read_only') throw new AppError('MAILBOX_NOT_RECEIVING', `${address}: account is read-only`, { reason: 'account_read_only' });
  // A custom domain receives only while ready (src/domains): paused when its records went missing.
  if (row.address_domain !== deps.config.mailDomain) {
    const block = await customDomainBlock(deps.db, row.address_domain);
    if (block) throw new AppError('MAILBOX_NOT_RECEIVING', `${address}: the domain is not receiving (${block})`, { reason: block });
  }
  if (row.allowlist_enabled && !senderAllowed(JSON.parse(row.allowlist_entries) as string[], mailFrom)) {
    throw new AppError('SENDER_NOT_ALLOWED', `${address}: sender is not on this mailbox's allowlist`);
  }
  const limits = limitsFor(row);
  // Aliases beyond the plan's alias allowance (after a downgrade) stay reserved but do not receive.
  if (row.role === 'alias' && !(await aliasActive(deps.db, row.mailbox_id, row.address_id, limits.max_email_aliases_per_mailbox))) {
    throw new AppError('MAILBOX_NOT_RECEIVING', `${address}: this alias is beyond the plan's alias allowance`, { reason: 'alias_inactive' });
  }
  const groupId = billingGroupId({ id: row.account_id, parent_account_id: row.parent_account_id });
  const maxMessageBytes = Math.min(limits.max_received_email_message_bytes ?? SERVER_MAX_MESSAGE_BYTES, SERVER_MAX_MESSAGE_BYTES);
  if (declaredSize !== null && declaredSize > maxMessageBytes) throw new AppError('MESSAGE_TOO_LARGE', `${address}: message size ${declaredSize} exceeds the limit of ${maxMessageBytes} bytes`);
  const usedAtRcpt = { count: Number(row.used_count ?? 0), bytes: Number(row.used_bytes ?? 0), period };
  checkAllowance(limits, usedAtRcpt, declaredSize ?? 0, address);
  return { address, mailboxId: row.mailbox_id, accountId: row.account_id, groupId, limits, maxMessageBytes, usedAtRcpt };
}

/** Addresses (`where`) still routed to a live mailbox that receives mail. */
function routed(db: Kysely<DB>, where: (eb: ExpressionBuilder<DB, 'email_addresses' | 'mailboxes'>) => Expression<SqlBool>) {
  return db
    .selectFrom('email_addresses')
    .innerJoin('mailboxes', 'mailboxes.id', 'email_addresses.mailbox_id')
    .select(['email_addresses.address', 'email_addresses.mailbox_id'])
    .where(where)
    .where('email_addresses.role', 'in', ['primary', 'alias'])
    .where('mailboxes.archived_at', 'is', null)
    .where('mailboxes.deleted_at', 'is', null)
    .where('mailboxes.receiving_enabled', '=', 1);
}
const ROUTED_ONE = compiledQuery((db, address: string) => routed(db, (eb) => eb('email_addresses.address', '=', address)), 1);

/**
 * The recipients whose address still routes to the same receiving mailbox at the end of DATA: an
 * alias deleted, an address rotated away, or a mailbox archived, deleted or closed since RCPT gets
 * no delivery, and the others still do (one query per message). When none is left the message is
 * refused (550).
 */
export async function stillRouted(deps: AppDeps, recipients: Recipient[]): Promise<Recipient[]> {
  if (!recipients.length) return recipients;
  // Also leaves out mailboxes archived, deleted or closed to mail since RCPT: the others still get it.
  const addresses = [...new Set(recipients.map((r) => r.address))];
  // Most messages have one recipient address: that query is built once.
  const rows = addresses.length === 1 ? await ROUTED_ONE.execute(deps.db, addresses[0]!) : await routed(deps.db, (eb) => eb('email_addresses.address', 'in', addresses)).execute();
  const live = new Set(rows.map((r) => `${r.mailbox_id} ${r.address}`));
  return recipients.filter((r) => live.has(`${r.mailboxId} ${r.address}`));
}

/**
 * The monthly received-mail allowances of the billing group (shared by its mailboxes), against its
 * usage as read at RCPT plus this message. An early answer only: messages of the group received
 * meanwhile are not in `used`, and the group commit checks the exact totals it writes
 * (src/inbound/store.ts, assertWithinAllowance), refusing with the same replies.
 */
export function checkAllowance(limits: PlanLimits, used: ReceivedUsage, incomingBytes: number, address: string): void {
  const maxCount = limits.max_received_emails_per_month;
  if (maxCount !== null && used.count >= maxCount) throw new AppError('RECEIVED_EMAIL_LIMIT_REACHED', `${address}: monthly received-email allowance used up`, { limit: 'max_received_emails_per_month', max: maxCount });
  const maxBytes = limits.max_received_email_bytes_per_month;
  if (maxBytes !== null && used.bytes + incomingBytes > maxBytes) throw new AppError('RECEIVED_BYTES_LIMIT_REACHED', `${address}: monthly received-email storage allowance used up`, { limit: 'max_received_email_bytes_per_month', max: maxBytes });
}

/**
 * The group's usage to check at the end of DATA. For a message to one billing group, the reading
 * taken at RCPT while it is still that month: a group that went over meanwhile is refused by the
 * commit's exact check, and that refuses the message as a whole, as this check would. For
 * recipients in several groups, or once the month turned since RCPT, it is read again, so that
 * only the recipients whose group is over lose the message.
 */
export async function usageAtEndOfData(deps: AppDeps, r: Recipient, oneGroup: boolean, at: Date): Promise<ReceivedUsage> {
  const period = usagePeriod(at);
  if (oneGroup && r.usedAtRcpt.period === period) return r.usedAtRcpt;
  return { ...(await receivedUsage(deps.db, r.groupId, at)), period };
}

/** The platform domain, or a custom domain verified now (ready or paused): unknown names there are 5.1.1. */
async function isOurDomain(deps: AppDeps, domain: string): Promise<boolean> {
  return domain === deps.config.mailDomain || (await isVerifiedCustomDomain(deps.db, domain));
}
