import type { Kysely } from 'kysely';
import type { AccountKind, AccountsTable, DB, PlanName } from '../db/schema.ts';
import type { Actor } from '../context.ts';
import { AppError, invalidArgument } from '../errors.ts';
import { isUniqueViolation } from '../db/database.ts';
import { newId } from '../ids.ts';
import { iso } from '../time.ts';
import { recordActivity } from '../activity/activity.service.ts';
import { AGENCY_MAX_ACCOUNTS, AGENCY_MAX_PEOPLE } from './plans.ts';
import { findUserByEmail, hashPassword, insertUser, isEmail, passwordProblem } from '../users/users.service.ts';
import { type AccountAccess, assertMutable, requirePermission } from '../auth/access.ts';
import type { Credential } from '../auth/credential.ts';

export const MAX_ACCOUNT_NAME = 100;
export const MAX_CLIENT_NAME = 100;

export function kindForPlan(plan: PlanName): AccountKind {
  return plan === 'agency' ? 'agency' : 'standard';
}

/** The billing group an account belongs to: its agency, or itself. */
export function billingGroupId(account: Pick<AccountsTable, 'id' | 'parent_account_id'>): string {
  return account.parent_account_id ?? account.id;
}

export async function insertAccount(
  db: Kysely<DB>,
  input: { name: string; kind: AccountKind; plan: PlanName; clientName?: string | null; parentId?: string | null },
  now: Date,
): Promise<AccountsTable> {
  const row: AccountsTable = {
    id: newId('acct'),
    name: input.name,
    kind: input.kind,
    client_name: input.clientName ?? null,
    parent_account_id: input.parentId ?? null,
    plan: input.plan,
    region: 'local',
    status: 'active',
    previous_status: null,
    status_reason: null,
    status_updated_at: null,
    suspended_at: null,
    website_publishing_enabled: 0,
    logo_sha256: null,
    logo_content_type: null,
    created_at: iso(now),
    updated_at: iso(now),
  };
  await db.insertInto('accounts').values(row).execute();
  return row;
}

export class RegistrationError extends Error {
  constructor(readonly field: 'email' | 'password' | 'name' | 'account_name', message: string) {
    super(message);
  }
}

/** Checks a new person's fields; returns them cleaned, with the password hashed. */
export async function checkNewPerson(db: Kysely<DB>, input: { email: string; password: string; name: string }) {
  const email = input.email.trim();
  if (!isEmail(email)) throw new RegistrationError('email', 'Enter a valid email address.');
  const name = input.name.trim();
  if (!name || name.length > MAX_ACCOUNT_NAME) throw new RegistrationError('name', 'Enter your name (at most 100 characters).');
  const weak = passwordProblem(input.password, email);
  if (weak) throw new RegistrationError('password', weak);
  if (await findUserByEmail(db, email)) throw new RegistrationError('email', 'An account with this email already exists. Sign in instead.');
  return { email, name, passwordHash: await hashPassword(input.password) };
}

/**
 * Creates a person with their own account, as owner. Used by browser sign-up and the
 * operator command; no API operation creates a user. `verified: false` (browser sign-up)
 * leaves the address to be confirmed before the account sends mail or publishes.
 */
export async function registerUser(
  db: Kysely<DB>,
  input: { email: string; password: string; name: string; accountName?: string; plan?: PlanName; verified?: boolean },
  now: Date,
  inTransaction?: (trx: Kysely<DB>, user: { id: string; email: string; name: string }) => Promise<void>,
) {
  const { email, name, passwordHash } = await checkNewPerson(db, input);
  const accountName = (input.accountName ?? `${name}'s account`).trim().slice(0, MAX_ACCOUNT_NAME);
  const plan = input.plan ?? 'free';
  try {
    return await db.transaction().execute(async (trx) => {
      const user = await insertUser(trx, { email, name, passwordHash, verified: input.verified }, now);
      const account = await insertAccount(trx, { name: accountName, kind: kindForPlan(plan), plan }, now);
      await trx.insertInto('memberships').values({ id: newId('mem'), account_id: account.id, user_id: user.id, role: 'owner', created_at: iso(now) }).execute();
      await recordActivity(trx, { userId: user.id, apiKeyId: null, agent: null, requestId: null }, now, {
        accountId: account.id,
        action: 'account.create',
        targetType: 'account',
        targetId: account.id,
      });
      await inTransaction?.(trx, user);
      return { user, account };
    });
  } catch (err) {
    if (isUniqueViolation(err)) throw new RegistrationError('email', 'An account with this email already exists. Sign in instead.');
    throw err;
  }
}

/** Unique people across an agency and its clients (the owner counted once). */
async function agencyPeopleCount(db: Kysely<DB>, agencyId: string): Promise<number> {
  const row = await db
    .selectFrom('memberships')
    .innerJoin('accounts', 'accounts.id', 'memberships.account_id')
    .select((eb) => eb.fn.count<number>('memberships.user_id').distinct().as('n'))
    .where((eb) => eb.or([eb('accounts.id', '=', agencyId), eb('accounts.parent_account_id', '=', agencyId)]))
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/**
 * An agency owner creates a client account. The credential's default account stays as it
 * was; whole-account keys of the agency's owners reach the new client through the agency.
 */
export async function createClientAccount(
  db: Kysely<DB>,
  cred: Credential,
  agency: AccountAccess,
  input: { name: string; clientName: string | null; reason: string | null },
  actor: Actor,
  now: Date,
): Promise<AccountsTable> {
  if (agency.account.kind !== 'agency' || agency.role !== 'owner' || !cred.includeClientAccounts || cred.mailboxAccess !== 'all') {
    throw new AppError('AGENCY_OWNER_REQUIRED', undefined, { account_id: agency.account.id });
  }
  // A mailbox_read key makes no changes, client accounts included.
  requirePermission(agency, 'write');
  assertMutable(agency);
  const name = input.name.trim();
  if (!name) throw invalidArgument('name', 'must not be blank');
  if (name.length > MAX_ACCOUNT_NAME) throw invalidArgument('name', `must be at most ${MAX_ACCOUNT_NAME} characters`);
  if (input.clientName !== null && input.clientName.length > MAX_CLIENT_NAME) {
    throw invalidArgument('client_name', `must be at most ${MAX_CLIENT_NAME} characters`);
  }
  return db.transaction().execute(async (trx) => {
    // Lock the agency row first so that concurrent creations count one after another
    // (Postgres row lock; SQLite transactions are serialized anyway). Without it two
    // requests both see 9 accounts and both insert.
    await trx.updateTable('accounts').set({ updated_at: iso(now) }).where('id', '=', agency.account.id).execute();
    const count = await trx
      .selectFrom('accounts')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where((eb) => eb.or([eb('id', '=', agency.account.id), eb('parent_account_id', '=', agency.account.id)]))
      .executeTakeFirstOrThrow();
    if (Number(count.n) >= AGENCY_MAX_ACCOUNTS) {
      throw new AppError('ACCOUNT_CAPACITY_REACHED', `An agency has at most ${AGENCY_MAX_ACCOUNTS} accounts in total.`, { max_accounts: AGENCY_MAX_ACCOUNTS });
    }
    if ((await agencyPeopleCount(trx, agency.account.id)) > AGENCY_MAX_PEOPLE) {
      throw new AppError('ACCOUNT_CAPACITY_REACHED', `An agency has at most ${AGENCY_MAX_PEOPLE} people.`, { max_people: AGENCY_MAX_PEOPLE });
    }
    const account = await insertAccount(
      trx,
      { name, kind: 'client', plan: agency.account.plan, clientName: input.clientName?.trim() || null, parentId: agency.account.id },
      now,
    );
    await recordActivity(trx, actor, now, { accountId: agency.account.id, action: 'account.create_client', targetType: 'account', targetId: account.id, reason: input.reason });
    await recordActivity(trx, actor, now, { accountId: account.id, action: 'account.create', targetType: 'account', targetId: account.id, reason: input.reason });
    return account;
  });
}

/** Operator action: sets an account's status, keeping the previous one. */
export async function setAccountStatus(db: Kysely<DB>, accountId: string, status: 'active' | 'read_only', reason: string | null, now: Date) {
  const account = await db.selectFrom('accounts').selectAll().where('id', '=', accountId).executeTakeFirst();
  if (!account) throw new AppError('ACCOUNT_NOT_FOUND');
  await db
    .updateTable('accounts')
    .set({ status, previous_status: account.status, status_reason: reason, status_updated_at: iso(now), updated_at: iso(now) })
    .where('id', '=', accountId)
    .execute();
}

export async function setAccountSuspended(db: Kysely<DB>, accountId: string, suspended: boolean, now: Date) {
  const res = await db
    .updateTable('accounts')
    .set({ suspended_at: suspended ? iso(now) : null, updated_at: iso(now) })
    .where('id', '=', accountId)
    .executeTakeFirst();
  if (!Number(res.numUpdatedRows)) throw new AppError('ACCOUNT_NOT_FOUND');
}
