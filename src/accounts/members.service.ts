import type { ExpressionBuilder, Kysely } from 'kysely';
import type { Actor, AppDeps } from '../context.ts';
import type { DB, MembershipRole } from '../db/schema.ts';
import { AppError, invalidArgument } from '../errors.ts';
import { newId, sha256Hex, randomToken } from '../ids.ts';
import { iso } from '../time.ts';
import { recordActivity } from '../activity/activity.service.ts';
import { revokeMemberConnections } from '../agent-auth/connections.service.ts';
import { sendSystemMail, systemFrom } from '../outbound/system-mail.ts';
import { isEmail, normalizeEmail } from '../users/users.service.ts';
import { AGENCY_MAX_PEOPLE, PLANS } from './plans.ts';
import { teamId } from './user-tokens.ts';
import './team.schema.ts';

// People in an account: invitations, roles, removal and ownership transfer.
//
// Rules: owners and administrators manage members; only an owner grants, changes or removes
// the owner role, and an account always keeps one owner. Reducing someone below administrator
// or removing them revokes their AI connections (and every OAuth token issued for them) in the
// same transaction. API keys: removal revokes every key of theirs that reaches the account;
// after a demotion their keys stay but act with the new role (a collaborator never
// administers), which src/auth/access.ts applies on every request.

export const ROLES: MembershipRole[] = ['owner', 'administrator', 'collaborator'];
export const INVITE_TTL_MS = 7 * 24 * 3600_000;
const TOKEN_SHAPE = /^[A-Za-z0-9]{43}$/;

export function isRole(value: string): value is MembershipRole {
  return (ROLES as string[]).includes(value);
}

export async function memberRole(db: Kysely<DB>, accountId: string, userId: string): Promise<MembershipRole | null> {
  const m = await db.selectFrom('memberships').select('role').where('account_id', '=', accountId).where('user_id', '=', userId).executeTakeFirst();
  return m?.role ?? null;
}

/**
 * The person's role in the account for managing it: their membership's, or owner when they own
 * the agency the (client) account belongs to — the same reach src/auth/access.ts gives the agency
 * owner's whole-account keys. Null when they have neither.
 */
export async function managingRole(db: Kysely<DB>, accountId: string, userId: string): Promise<MembershipRole | null> {
  const own = await memberRole(db, accountId, userId);
  if (own === 'owner' || own === 'administrator') return own;
  const account = await db.selectFrom('accounts').select('parent_account_id').where('id', '=', accountId).executeTakeFirst();
  if (account?.parent_account_id && (await memberRole(db, account.parent_account_id, userId)) === 'owner') return 'owner';
  return own;
}

/**
 * The acting person's role when they may manage the account; throws otherwise. An account the
 * person has nothing to do with answers like a missing one.
 */
export async function assertMemberAdmin(db: Kysely<DB>, accountId: string, userId: string): Promise<MembershipRole> {
  const role = await managingRole(db, accountId, userId);
  if (role === null) throw new AppError('ACCOUNT_NOT_FOUND', undefined, { account_id: accountId });
  if (role !== 'owner' && role !== 'administrator') throw new AppError('MEMBER_ADMIN_REQUIRED', undefined, { account_id: accountId });
  return role;
}

export async function listMembers(db: Kysely<DB>, accountId: string) {
  const rows = await db
    .selectFrom('memberships')
    .innerJoin('users', 'users.id', 'memberships.user_id')
    .select(['users.id as userId', 'users.email', 'users.name', 'users.two_factor_enabled', 'memberships.role', 'memberships.created_at'])
    .where('memberships.account_id', '=', accountId)
    .orderBy('memberships.created_at')
    .execute();
  const boxes = await db.selectFrom('membership_mailboxes').select(['user_id', 'mailbox_id']).where('account_id', '=', accountId).execute();
  return rows.map((r) => ({ ...r, mailboxIds: boxes.filter((b) => b.user_id === r.userId).map((b) => b.mailbox_id) }));
}

export async function listInvitations(db: Kysely<DB>, accountId: string, now: Date) {
  return db
    .selectFrom('invitations')
    .select(['id', 'email', 'role', 'expires_at', 'created_at'])
    .where('account_id', '=', accountId)
    .where('accepted_at', 'is', null)
    .where('revoked_at', 'is', null)
    .where('expires_at', '>', iso(now))
    .orderBy('created_at', 'desc')
    .execute();
}

/**
 * Members plus pending invitations, against the plan's max_account_members; for an agency and its
 * client accounts also the unique people of the whole group (AGENCY_MAX_PEOPLE, the owner counted
 * once). `newcomer` is the address about to join or be invited.
 */
async function assertCapacity(db: Kysely<DB>, accountId: string, now: Date, newcomer: string): Promise<void> {
  const account = await db.selectFrom('accounts').select(['plan', 'kind', 'parent_account_id']).where('id', '=', accountId).executeTakeFirstOrThrow();
  // Lock the group's first account (the agency, or the account itself) so that two invitations
  // racing into the same agency or account count one after the other (Postgres row lock; SQLite
  // transactions are serialized anyway), as createClientAccount does.
  await db.updateTable('accounts').set({ updated_at: iso(now) }).where('id', '=', account.parent_account_id ?? accountId).execute();
  const max = PLANS[account.plan].max_account_members;
  if (max !== null) {
    const members = await db.selectFrom('memberships').select((eb) => eb.fn.countAll<number>().as('n')).where('account_id', '=', accountId).executeTakeFirstOrThrow();
    const pending = (await listInvitations(db, accountId, now)).length;
    if (Number(members.n) + pending + 1 > max) throw new AppError('MEMBER_LIMIT_REACHED', `The plan allows ${max} members; pending invitations count too.`, { max_account_members: max });
  }
  if (account.kind !== 'agency' && account.kind !== 'client') return;
  const group = account.parent_account_id ?? accountId;
  const inGroup = (eb: ExpressionBuilder<DB, 'accounts'>) => eb.or([eb('accounts.id', '=', group), eb('accounts.parent_account_id', '=', group)]);
  const people = await db.selectFrom('memberships').innerJoin('users', 'users.id', 'memberships.user_id').innerJoin('accounts', 'accounts.id', 'memberships.account_id').select('users.email').where(inGroup).execute();
  const invited = await db
    .selectFrom('invitations')
    .innerJoin('accounts', 'accounts.id', 'invitations.account_id')
    .select('invitations.email')
    .where(inGroup)
    .where('invitations.accepted_at', 'is', null)
    .where('invitations.revoked_at', 'is', null)
    .where('invitations.expires_at', '>', iso(now))
    .execute();
  const unique = new Set([...people, ...invited].map((r) => normalizeEmail(r.email)));
  unique.add(normalizeEmail(newcomer));
  if (unique.size > AGENCY_MAX_PEOPLE) {
    throw new AppError('MEMBER_LIMIT_REACHED', `An agency and its client accounts have at most ${AGENCY_MAX_PEOPLE} people; pending invitations count too.`, { max_people: AGENCY_MAX_PEOPLE });
  }
}

/** Mailbox ids of the account among `ids` (unknown ones are refused). */
async function checkMailboxes(db: Kysely<DB>, accountId: string, ids: string[]): Promise<string[]> {
  const unique = [...new Set(ids)];
  if (!unique.length) return [];
  const found = await db.selectFrom('mailboxes').select('id').where('account_id', '=', accountId).where('id', 'in', unique).where('deleted_at', 'is', null).execute();
  if (found.length !== unique.length) throw invalidArgument('mailbox_ids', 'names a mailbox that is not in this account');
  return unique;
}

export interface InviteInput {
  accountId: string;
  email: string;
  role: MembershipRole;
  /** Mailboxes a collaborator may reach; empty means all. */
  mailboxIds?: string[];
}

/**
 * Invites someone by email: a single-use link valid for 7 days, sent by the service's own mail.
 * `actor.userId` null means an operator (`cubby admin invite`).
 */
export async function inviteMember(deps: AppDeps, actor: Actor, input: InviteInput): Promise<{ id: string; link: string }> {
  const now = deps.now();
  const actorRole = actor.userId ? await assertMemberAdmin(deps.db, input.accountId, actor.userId) : 'owner';
  if (input.role === 'owner' && actorRole !== 'owner') throw new AppError('MEMBER_OWNER_REQUIRED');
  if (!actor.userId && !(await deps.db.selectFrom('accounts').select('id').where('id', '=', input.accountId).executeTakeFirst())) throw new AppError('ACCOUNT_NOT_FOUND');
  const email = normalizeEmail(input.email);
  if (!isEmail(email)) throw invalidArgument('email', 'is not a valid email address');
  const existing = await deps.db
    .selectFrom('memberships')
    .innerJoin('users', 'users.id', 'memberships.user_id')
    .select('memberships.id')
    .where('memberships.account_id', '=', input.accountId)
    .where('users.email', '=', email)
    .executeTakeFirst();
  if (existing) throw new AppError('MEMBER_ALREADY_EXISTS', undefined, { email });
  const mailboxIds = input.role === 'collaborator' ? await checkMailboxes(deps.db, input.accountId, input.mailboxIds ?? []) : [];
  const account = await deps.db.selectFrom('accounts').select(['name']).where('id', '=', input.accountId).executeTakeFirstOrThrow();
  const inviter = actor.userId
    ? await deps.db.selectFrom('users').select(['name', 'email']).where('id', '=', actor.userId).executeTakeFirstOrThrow()
    : { name: 'The Cubby operator', email: systemFrom(deps).address };
  const token = randomToken(43);
  const id = teamId('inv');
  const link = `${deps.publicUrl()}/invitations/${token}`;
  await deps.db.transaction().execute(async (trx) => {
    // A new invitation to the same address replaces the pending one.
    await trx.updateTable('invitations').set({ revoked_at: iso(now) }).where('account_id', '=', input.accountId).where('email', '=', email).where('accepted_at', 'is', null).where('revoked_at', 'is', null).execute();
    await assertCapacity(trx, input.accountId, now, email);
    await trx
      .insertInto('invitations')
      .values({
        id,
        account_id: input.accountId,
        email,
        role: input.role,
        mailbox_ids: mailboxIds.length ? JSON.stringify(mailboxIds) : null,
        token_hash: sha256Hex(token),
        invited_by: actor.userId,
        expires_at: iso(now.getTime() + INVITE_TTL_MS),
        accepted_at: null,
        accepted_by: null,
        revoked_at: null,
        created_at: iso(now),
      })
      .execute();
    await recordActivity(trx, actor, now, { accountId: input.accountId, action: 'member.invite', targetType: 'invitation', targetId: id });
    await sendSystemMail(
      deps,
      {
        to: email,
        subject: `${inviter.name} invited you to ${account.name} on Cubby`,
        text: `${inviter.name} (${inviter.email}) invited you to join the account "${account.name}" on Cubby as ${input.role}.\n\nAccept the invitation (sign in, or create your login with this address):\n\n${link}\n\nThe link works once, for 7 days. If you did not expect this, ignore this message.\n`,
      },
      { db: trx },
    );
  });
  return { id, link };
}

export async function revokeInvitation(deps: AppDeps, actor: Actor & { userId: string }, accountId: string, invitationId: string): Promise<void> {
  await assertMemberAdmin(deps.db, accountId, actor.userId);
  const now = deps.now();
  await deps.db.transaction().execute(async (trx) => {
    const res = await trx.updateTable('invitations').set({ revoked_at: iso(now) }).where('id', '=', invitationId).where('account_id', '=', accountId).where('accepted_at', 'is', null).where('revoked_at', 'is', null).executeTakeFirst();
    if (!Number(res.numUpdatedRows)) throw new AppError('INVITATION_INVALID');
    await recordActivity(trx, actor, now, { accountId, action: 'member.invitation_revoke', targetType: 'invitation', targetId: invitationId });
  });
}

/** The invitation behind a link, or throws the precise reason it cannot be used. */
export async function findInvitation(db: Kysely<DB>, token: string, now: Date) {
  if (!TOKEN_SHAPE.test(token)) throw new AppError('INVITATION_INVALID');
  const inv = await db
    .selectFrom('invitations')
    .innerJoin('accounts', 'accounts.id', 'invitations.account_id')
    .selectAll('invitations')
    .select('accounts.name as account_name')
    .where('invitations.token_hash', '=', sha256Hex(token))
    .executeTakeFirst();
  if (!inv) throw new AppError('INVITATION_INVALID');
  if (inv.accepted_at || inv.revoked_at) throw new AppError('INVITATION_USED');
  if (Date.parse(inv.expires_at) <= now.getTime()) throw new AppError('INVITATION_EXPIRED');
  return inv;
}

/**
 * Accepts an invitation for a signed-in (or just signed-up) person. Pass `trx` to accept inside
 * the transaction that creates the person.
 */
export async function acceptInvitation(deps: AppDeps, token: string, user: { id: string; email: string }, trx?: Kysely<DB>): Promise<{ accountId: string }> {
  const now = deps.now();
  const run = async (db: Kysely<DB>) => {
    const inv = await findInvitation(db, token, now);
    if (normalizeEmail(user.email) !== inv.email) throw new AppError('INVITATION_WRONG_EMAIL', undefined, { invited_email: inv.email });
    if (await memberRole(db, inv.account_id, user.id)) throw new AppError('MEMBER_ALREADY_EXISTS');
    // Single use even when two requests race: only one update sees accepted_at null.
    const res = await db.updateTable('invitations').set({ accepted_at: iso(now), accepted_by: user.id }).where('id', '=', inv.id).where('accepted_at', 'is', null).executeTakeFirst();
    if (!Number(res.numUpdatedRows)) throw new AppError('INVITATION_USED');
    // This invitation is no longer pending, so the capacity check counts it as the new member.
    await assertCapacity(db, inv.account_id, now, inv.email);
    const membershipId = newId('mem');
    await db.insertInto('memberships').values({ id: membershipId, account_id: inv.account_id, user_id: user.id, role: inv.role, created_at: iso(now) }).execute();
    const boxes: string[] = inv.mailbox_ids ? JSON.parse(inv.mailbox_ids) : [];
    for (const mailbox_id of boxes) await db.insertInto('membership_mailboxes').values({ account_id: inv.account_id, user_id: user.id, mailbox_id }).execute();
    // The link reached this address, which verifies it.
    await db.updateTable('users').set({ email_verified_at: iso(now) }).where('id', '=', user.id).where('email_verified_at', 'is', null).execute();
    await recordActivity(db, { userId: user.id, apiKeyId: null, agent: null, requestId: null }, now, { accountId: inv.account_id, action: 'member.join', targetType: 'membership', targetId: membershipId });
    return { accountId: inv.account_id };
  };
  return trx ? run(trx) : deps.db.transaction().execute(run);
}

async function ownerCount(db: Kysely<DB>, accountId: string): Promise<number> {
  const r = await db.selectFrom('memberships').select((eb) => eb.fn.countAll<number>().as('n')).where('account_id', '=', accountId).where('role', '=', 'owner').executeTakeFirstOrThrow();
  return Number(r.n);
}

/** Revokes the person's API keys that reach the account (their default account or a grant). */
async function revokeKeysInAccount(db: Kysely<DB>, accountId: string, userId: string, now: Date): Promise<number> {
  const granted = db.selectFrom('api_key_accounts').select('api_key_id').where('account_id', '=', accountId);
  const res = await db
    .updateTable('api_keys')
    .set({ revoked_at: iso(now) })
    .where('user_id', '=', userId)
    .where('revoked_at', 'is', null)
    .where((eb) => eb.or([eb('default_account_id', '=', accountId), eb('id', 'in', granted)]))
    .executeTakeFirst();
  return Number(res.numUpdatedRows);
}

export interface MemberChange {
  accountId: string;
  userId: string;
  /** The new role, or null to remove the person. */
  role: MembershipRole | null;
  mailboxIds?: string[];
}

/**
 * Changes a member's role (and a collaborator's mailboxes) or removes them. `actor.userId` null
 * means an operator (`cubby admin`), who may do anything but leave an account without an owner.
 */
export async function changeMember(deps: AppDeps, actor: Actor, change: MemberChange): Promise<{ revokedConnections: number; revokedKeys: number }> {
  const now = deps.now();
  const db = deps.db;
  const actorRole = actor.userId ? await assertMemberAdmin(db, change.accountId, actor.userId) : 'owner';
  const mailboxIds = change.role === 'collaborator' && change.mailboxIds ? await checkMailboxes(db, change.accountId, change.mailboxIds) : null;
  return db.transaction().execute(async (trx) => {
    // Lock the account row so that two demotions cannot both see another owner.
    await trx.updateTable('accounts').set({ updated_at: iso(now) }).where('id', '=', change.accountId).execute();
    const m = await trx.selectFrom('memberships').select(['id', 'role']).where('account_id', '=', change.accountId).where('user_id', '=', change.userId).executeTakeFirst();
    if (!m) throw new AppError('MEMBER_NOT_FOUND');
    if ((m.role === 'owner' || change.role === 'owner') && actorRole !== 'owner' && m.role !== change.role) throw new AppError('MEMBER_OWNER_REQUIRED');
    if (m.role === 'owner' && change.role !== 'owner' && (await ownerCount(trx, change.accountId)) <= 1) throw new AppError('LAST_OWNER');
    if (change.role === null) await trx.deleteFrom('memberships').where('id', '=', m.id).execute();
    else await trx.updateTable('memberships').set({ role: change.role }).where('id', '=', m.id).execute();
    if (change.role !== 'collaborator' || mailboxIds) {
      await trx.deleteFrom('membership_mailboxes').where('account_id', '=', change.accountId).where('user_id', '=', change.userId).execute();
      for (const mailbox_id of mailboxIds ?? []) await trx.insertInto('membership_mailboxes').values({ account_id: change.accountId, user_id: change.userId, mailbox_id }).execute();
    }
    let revokedConnections = 0;
    let revokedKeys = 0;
    if (change.role === null || change.role === 'collaborator') {
      revokedConnections = await revokeMemberConnections(trx, change.accountId, change.userId, change.role === null ? 'membership_removed' : 'membership_demoted', now);
    }
    if (change.role === null) revokedKeys = await revokeKeysInAccount(trx, change.accountId, change.userId, now);
    await recordActivity(trx, actor, now, { accountId: change.accountId, action: change.role === null ? 'membership.remove' : 'membership.update', targetType: 'membership', targetId: m.id });
    return { revokedConnections, revokedKeys };
  });
}

/** An owner hands ownership to another member, staying on as administrator. */
export async function transferOwnership(deps: AppDeps, actor: Actor & { userId: string }, accountId: string, toUserId: string): Promise<void> {
  const now = deps.now();
  if ((await memberRole(deps.db, accountId, actor.userId)) !== 'owner') throw new AppError('MEMBER_OWNER_REQUIRED');
  if (toUserId === actor.userId) throw invalidArgument('user_id', 'is already an owner');
  await deps.db.transaction().execute(async (trx) => {
    const res = await trx.updateTable('memberships').set({ role: 'owner' }).where('account_id', '=', accountId).where('user_id', '=', toUserId).executeTakeFirst();
    if (!Number(res.numUpdatedRows)) throw new AppError('MEMBER_NOT_FOUND');
    await trx.deleteFrom('membership_mailboxes').where('account_id', '=', accountId).where('user_id', '=', toUserId).execute();
    await trx.updateTable('memberships').set({ role: 'administrator' }).where('account_id', '=', accountId).where('user_id', '=', actor.userId).execute();
    await recordActivity(trx, actor, now, { accountId, action: 'account.transfer_ownership', targetType: 'user', targetId: toUserId });
  });
}
