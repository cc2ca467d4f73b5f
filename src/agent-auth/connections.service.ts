import type { Kysely } from 'kysely';
import type { DB, MailboxAccess, MembershipRole, Scope } from '../db/schema.ts';
import type { Actor } from '../context.ts';
import type { ConnectionKind } from './agent-auth.schema.ts';
import { AppError, invalidArgument } from '../errors.ts';
import { newId, type IdPrefix } from '../ids.ts';
import { iso } from '../time.ts';
import { PLANS } from '../accounts/plans.ts';
import { generateApiKey } from '../auth/credential.ts';
import { insertApiKey, prepareApiKey, type PreparedApiKey } from '../auth/keys.service.ts';
import { recordActivity } from '../activity/activity.service.ts';

// An agent connection is what a person authorizes for an AI agent or tool: through the email
// code, a one-time grant, or OAuth (device or authorization code). Each is backed by one
// api_keys row, so that every credential it yields (the API key, OAuth access tokens) goes
// through the same tenancy and permission checks as any key. Revoking the connection revokes
// the key and every OAuth token with it.

/** Ids for this feature's rows (prefixes outside the shared id list). */
export function agentId(prefix: 'conn' | 'dev' | 'code' | 'tok' | 'sic' | 'grt' | 'bll' | 'aat' | 'oar'): string {
  return newId(prefix as IdPrefix);
}

export const ADMIN_ROLES: MembershipRole[] = ['owner', 'administrator'];

/** The person's role in the account if they may authorize agents there; otherwise throws. */
export async function assertCanAuthorize(db: Kysely<DB>, userId: string, accountId: string): Promise<MembershipRole> {
  const m = await db.selectFrom('memberships').select('role').where('account_id', '=', accountId).where('user_id', '=', userId).executeTakeFirst();
  if (!m) throw new AppError('ACCOUNT_ACCESS_DENIED', 'That person is not a member of the account.', { account_id: accountId });
  if (!ADMIN_ROLES.includes(m.role)) throw new AppError('ACCOUNT_ADMIN_REQUIRED', undefined, { account_id: accountId });
  return m.role;
}

/** Accounts where the person may authorize an agent connection (owner or administrator). */
export async function authorizableAccounts(db: Kysely<DB>, userId: string) {
  return db
    .selectFrom('memberships')
    .innerJoin('accounts', 'accounts.id', 'memberships.account_id')
    .select(['accounts.id', 'accounts.name', 'accounts.kind', 'memberships.role'])
    .where('memberships.user_id', '=', userId)
    .where('memberships.role', 'in', ADMIN_ROLES)
    .orderBy('memberships.created_at')
    .orderBy('accounts.id')
    .execute();
}

export interface ConnectionRequest {
  userId: string;
  accountId: string;
  kind: ConnectionKind;
  label?: string | null;
  scope: Scope;
  mailboxAccess: MailboxAccess;
  /** For `selected`: mailbox id → read|write. */
  mailboxPermissions?: Record<string, 'read' | 'write'>;
  clientId?: string | null;
  clientName?: string | null;
  resource?: string | null;
  oauthScope?: string | null;
}

export interface PreparedConnection {
  request: ConnectionRequest;
  key: PreparedApiKey;
}

/**
 * Checks everything a new connection needs (owner/administrator, mailboxes of the account,
 * the plan's connection and key limits) without writing.
 */
export async function prepareConnection(db: Kysely<DB>, request: ConnectionRequest, now: Date): Promise<PreparedConnection> {
  await assertCanAuthorize(db, request.userId, request.accountId);
  const account = await db.selectFrom('accounts').select('plan').where('id', '=', request.accountId).executeTakeFirstOrThrow();
  const limit = PLANS[account.plan].max_agent_connections;
  if (limit !== null && (await activeConnectionCount(db, request.accountId)) >= limit) {
    throw new AppError('ACCOUNT_CAPACITY_REACHED', `The plan allows at most ${limit} agent connections.`, { limit: 'max_agent_connections', max: limit });
  }
  let permissions: Record<string, 'read' | 'write'> | undefined;
  if (request.mailboxAccess === 'selected') {
    const wanted = Object.entries(request.mailboxPermissions ?? {});
    if (wanted.length === 0) throw invalidArgument('mailbox_ids', 'required when mailbox_access is selected');
    const found = await db
      .selectFrom('mailboxes')
      .select('id')
      .where('account_id', '=', request.accountId)
      .where('deleted_at', 'is', null)
      .where('id', 'in', wanted.map(([id]) => id))
      .execute();
    const known = new Set(found.map((m) => m.id));
    const unknown = wanted.find(([id]) => !known.has(id));
    if (unknown) throw new AppError('MAILBOX_NOT_FOUND', `Mailbox ${unknown[0]} is not a mailbox of this account.`, { mailbox_id: unknown[0], field: 'mailbox_ids' });
    // A read-only connection reaches its mailboxes read-only, whatever was asked per mailbox.
    permissions = Object.fromEntries(wanted.map(([id, p]) => [id, request.scope === 'mailbox_read' ? 'read' : p]));
  }
  const key = await prepareApiKey(
    db,
    {
      userId: request.userId,
      accountId: request.accountId,
      label: request.label ?? request.clientName ?? null,
      scope: request.scope,
      mailboxAccess: request.mailboxAccess,
      mailboxPermissions: permissions,
      transport: 'api_key',
      tokenType: 'api',
    },
    now,
  );
  return { request, key };
}

export async function activeConnectionCount(db: Kysely<DB>, accountId: string): Promise<number> {
  const row = await db
    .selectFrom('agent_connections')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('account_id', '=', accountId)
    .where('revoked_at', 'is', null)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/** Writes a prepared connection and its key in the caller's transaction. The key token is returned once. */
export async function insertConnection(trx: Kysely<DB>, p: PreparedConnection, actor: Actor, now: Date) {
  const key = await insertApiKey(trx, p.key, actor, now);
  const id = agentId('conn');
  const r = p.request;
  await trx
    .insertInto('agent_connections')
    .values({
      id,
      user_id: r.userId,
      account_id: r.accountId,
      api_key_id: key.id,
      kind: r.kind,
      client_id: r.clientId ?? null,
      client_name: r.clientName ?? null,
      resource: r.resource ?? null,
      oauth_scope: r.oauthScope ?? null,
      created_at: iso(now),
      revoked_at: null,
      revoked_reason: null,
    })
    .execute();
  await recordActivity(trx, actor, now, { accountId: r.accountId, action: 'agent_connection.create', targetType: 'agent_connection', targetId: id });
  return { connectionId: id, key };
}

/**
 * A fresh API key token for a connection's backing key (the OAuth token reply's extension
 * field). The key was created with a token nobody saw; this replaces it and returns the new one.
 */
export async function revealConnectionKey(trx: Kysely<DB>, apiKeyId: string): Promise<string> {
  const { token, hash, hint } = generateApiKey();
  await trx.updateTable('api_keys').set({ token_hash: hash, token_hint: hint }).where('id', '=', apiKeyId).execute();
  return token;
}

/** Revokes a connection, its key and every OAuth token issued for it. True if it was live. */
export async function revokeConnection(db: Kysely<DB>, connectionId: string, reason: string, now: Date): Promise<boolean> {
  const conn = await db.selectFrom('agent_connections').select(['api_key_id', 'revoked_at']).where('id', '=', connectionId).executeTakeFirst();
  if (!conn) return false;
  const at = iso(now);
  const res = await db.updateTable('agent_connections').set({ revoked_at: at, revoked_reason: reason }).where('id', '=', connectionId).where('revoked_at', 'is', null).executeTakeFirst();
  await db.updateTable('api_keys').set({ revoked_at: at }).where('id', '=', conn.api_key_id).where('revoked_at', 'is', null).execute();
  await db.updateTable('oauth_tokens').set({ revoked_at: at }).where('connection_id', '=', connectionId).where('revoked_at', 'is', null).execute();
  return Number(res.numUpdatedRows) > 0;
}

/** Revokes every connection a person holds in an account (membership removed or demoted). */
export async function revokeMemberConnections(db: Kysely<DB>, accountId: string, userId: string, reason: string, now: Date): Promise<number> {
  const live = await db
    .selectFrom('agent_connections')
    .select('id')
    .where('account_id', '=', accountId)
    .where('user_id', '=', userId)
    .where('revoked_at', 'is', null)
    .execute();
  for (const c of live) await revokeConnection(db, c.id, reason, now);
  return live.length;
}

/**
 * Changes or removes a membership. Reducing it below administrator (or removing it) revokes
 * the person's agent connections there in the same transaction.
 */
export async function setMembershipRole(db: Kysely<DB>, input: { accountId: string; userId: string; role: MembershipRole | null }, actor: Actor, now: Date) {
  return db.transaction().execute(async (trx) => {
    const m = await trx.selectFrom('memberships').select(['id', 'role']).where('account_id', '=', input.accountId).where('user_id', '=', input.userId).executeTakeFirst();
    if (!m && input.role === null) return { revoked: 0 };
    if (!m) {
      await trx.insertInto('memberships').values({ id: newId('mem'), account_id: input.accountId, user_id: input.userId, role: input.role!, created_at: iso(now) }).execute();
      return { revoked: 0 };
    }
    if (input.role === null) await trx.deleteFrom('memberships').where('id', '=', m.id).execute();
    else await trx.updateTable('memberships').set({ role: input.role }).where('id', '=', m.id).execute();
    let revoked = 0;
    if (input.role === null || !ADMIN_ROLES.includes(input.role)) {
      revoked = await revokeMemberConnections(trx, input.accountId, input.userId, input.role === null ? 'membership_removed' : 'membership_demoted', now);
    }
    await recordActivity(trx, actor, now, { accountId: input.accountId, action: input.role === null ? 'membership.remove' : 'membership.update', targetType: 'membership', targetId: m.id });
    return { revoked };
  });
}

/** A person's connections, newest first, with what their keys allow. */
export async function listConnections(db: Kysely<DB>, userId: string) {
  return db
    .selectFrom('agent_connections')
    .innerJoin('api_keys', 'api_keys.id', 'agent_connections.api_key_id')
    .innerJoin('accounts', 'accounts.id', 'agent_connections.account_id')
    .select([
      'agent_connections.id',
      'agent_connections.kind',
      'agent_connections.client_name',
      'agent_connections.created_at',
      'agent_connections.revoked_at',
      'agent_connections.revoked_reason',
      'agent_connections.account_id',
      'accounts.name as account_name',
      'api_keys.label',
      'api_keys.scope',
      'api_keys.mailbox_access',
      'api_keys.last_used_at',
      'api_keys.revoked_at as key_revoked_at',
    ])
    .where('agent_connections.user_id', '=', userId)
    .orderBy('agent_connections.id', 'desc')
    .limit(500)
    .execute();
}

/** Revokes one of the person's own connections. */
export async function revokeOwnConnection(db: Kysely<DB>, userId: string, connectionId: string, actor: Actor, now: Date): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    const conn = await trx.selectFrom('agent_connections').select(['id', 'account_id']).where('id', '=', connectionId).where('user_id', '=', userId).executeTakeFirst();
    if (!conn) throw new AppError('CONNECTION_NOT_FOUND');
    const changed = await revokeConnection(trx, conn.id, 'revoked_by_user', now);
    if (changed) await recordActivity(trx, actor, now, { accountId: conn.account_id, action: 'agent_connection.revoke', targetType: 'agent_connection', targetId: conn.id });
    return changed;
  });
}
