import type { Kysely } from 'kysely';
import type { DB } from '../db/schema.ts';
import type { Dialect } from '../db/database.ts';
import type { PlanLimits } from '../accounts/plans.ts';
import { AppError } from '../errors.ts';
import { isUniqueViolation } from '../db/database.ts';
import { newId } from '../ids.ts';
import { iso, nextUtcMonthStart, utcMonthStart } from '../time.ts';
import { lockClaim } from '../domains/domains.repo.ts';
import { aliasesOf, countGroupRotationsSince, primaryAddress } from './addresses.repo.ts';

// The moment an address change takes effect, shared by immediate (platform) rotations and the
// activation job: every rule is checked again inside the committing transaction, under the
// billing-group and mailbox locks the caller holds, so the allowance is charged exactly once.

export interface NewAddress {
  hostname: string;
  localPart: string;
  username: string;
}

export interface PrimaryChange {
  mailboxId: string;
  accountId: string;
  groupId: string;
  limits: PlanLimits;
  /** The address that must still be current. */
  oldAddress: string;
  next: NewAddress;
  keepOldAsAlias: boolean;
  mailDomain: string;
  dialect: Dialect;
  now: Date;
}

export function rotationLimitError(limits: PlanLimits, now: Date): AppError {
  const max = limits.max_email_address_rotations_per_month;
  const resetsAt = nextUtcMonthStart(now);
  return new AppError('INBOUND_EMAIL_ROTATION_LIMIT', max === 0 ? 'The plan does not allow address rotation.' : undefined, {
    limit: 'max_email_address_rotations_per_month',
    max,
    resets_at: resetsAt,
    retry_after: Math.ceil((Date.parse(resetsAt) - now.getTime()) / 1000),
  });
}

export async function rotationAllowed(db: Kysely<DB>, groupId: string, limits: PlanLimits, now: Date): Promise<boolean> {
  const max = limits.max_email_address_rotations_per_month;
  return max === null || (await countGroupRotationsSince(db, groupId, utcMonthStart(now))) < max;
}

export function aliasLimitError(max: number): AppError {
  return new AppError('EMAIL_ALIAS_LIMIT', undefined, { limit: 'max_email_aliases_per_mailbox', max });
}

/** A custom domain must be a ready domain of exactly this account at the moment of commit. */
async function assertDomainReady(trx: Kysely<DB>, dialect: Dialect, accountId: string, next: NewAddress, mailDomain: string): Promise<void> {
  if (next.hostname === mailDomain) return;
  const d = await lockClaim(trx, dialect, next.hostname);
  if (!d || d.account_id !== accountId || d.status !== 'ready') {
    throw new AppError('EMAIL_DOMAIN_NOT_AVAILABLE', `${next.hostname} is not a ready receiving domain of this account.`, { domain: next.hostname });
  }
}

async function insertAddress(trx: Kysely<DB>, c: { mailboxId: string; accountId: string; next: NewAddress; role: 'primary' | 'alias'; now: Date }): Promise<string> {
  const id = newId('adr');
  const address = `${c.next.localPart}@${c.next.hostname}`;
  try {
    await trx
      .insertInto('email_addresses')
      .values({ id, mailbox_id: c.mailboxId, account_id: c.accountId, local_part: c.next.localPart, domain: c.next.hostname, address, username: c.next.username, role: c.role, created_at: iso(c.now), retired_at: null })
      .execute();
  } catch (err) {
    if (isUniqueViolation(err)) throw new AppError('EMAIL_ADDRESS_TAKEN', undefined, { address });
    throw err;
  }
  return id;
}

/** Makes `next` the primary address; the old one becomes an alias or is retired. Charges one rotation. */
export async function commitPrimaryChange(trx: Kysely<DB>, c: PrimaryChange): Promise<void> {
  const current = await primaryAddress(trx, c.mailboxId);
  if (!current || current.address !== c.oldAddress) {
    throw new AppError('EMAIL_ADDRESS_CHANGED', undefined, { mailbox_id: c.mailboxId });
  }
  if (!(await rotationAllowed(trx, c.groupId, c.limits, c.now))) throw rotationLimitError(c.limits, c.now);
  if (c.keepOldAsAlias && (await aliasesOf(trx, c.mailboxId)).length >= c.limits.max_email_aliases_per_mailbox) {
    throw aliasLimitError(c.limits.max_email_aliases_per_mailbox);
  }
  await assertDomainReady(trx, c.dialect, c.accountId, c.next, c.mailDomain);
  // The old row changes role first: the new primary must not meet it in the (mailbox, role) lookups.
  // Kept as an alias, it counts as the newest alias (aliases are active oldest first).
  await trx
    .updateTable('email_addresses')
    .set(c.keepOldAsAlias ? { role: 'alias', created_at: iso(c.now) } : { role: 'retired', retired_at: iso(c.now) })
    .where('id', '=', current.id)
    .execute();
  await insertAddress(trx, { mailboxId: c.mailboxId, accountId: c.accountId, next: c.next, role: 'primary', now: c.now });
  await trx.insertInto('address_rotations').values({ id: newId('rot'), billing_group_id: c.groupId, account_id: c.accountId, mailbox_id: c.mailboxId, created_at: iso(c.now) }).execute();
}

/** Adds `next` as an alias within the mailbox's alias allowance. */
export async function commitAlias(
  trx: Kysely<DB>,
  c: { mailboxId: string; accountId: string; limits: PlanLimits; next: NewAddress; mailDomain: string; dialect: Dialect; now: Date },
): Promise<string> {
  if ((await aliasesOf(trx, c.mailboxId)).length >= c.limits.max_email_aliases_per_mailbox) throw aliasLimitError(c.limits.max_email_aliases_per_mailbox);
  await assertDomainReady(trx, c.dialect, c.accountId, c.next, c.mailDomain);
  return insertAddress(trx, { ...c, role: 'alias' });
}
