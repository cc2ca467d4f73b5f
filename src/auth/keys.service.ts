import type { Kysely } from 'kysely';
import type { DB, MailboxAccess, Scope } from '../db/schema.ts';
import { AppError, invalidArgument } from '../errors.ts';
import { newId } from '../ids.ts';
import { iso } from '../time.ts';
import { generateApiKey } from './credential.ts';
import { PLANS } from '../accounts/plans.ts';
import { recordActivity } from '../activity/activity.service.ts';
import type { Actor } from '../context.ts';

export const MAX_KEY_LABEL = 100;

/** Milliseconds of a valid ISO 8601 date-time (calendar-checked), or null. */
function parseIsoTime(value: string): number | null {
  const m = /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2})?)?$/i.exec(value.trim());
  if (!m) return null;
  const at = Date.parse(value.trim());
  if (Number.isNaN(at)) return null;
  // Date.parse rolls 2025-02-30 over to March; refuse dates that do not exist.
  const [y, mo, d] = [Number(m[1]), Number(m[2]), Number(m[3])];
  const day = new Date(Date.UTC(y, mo - 1, d));
  if (day.getUTCFullYear() !== y || day.getUTCMonth() !== mo - 1 || day.getUTCDate() !== d) return null;
  return at;
}

export interface CreateKeyInput {
  userId: string;
  accountId: string;
  label?: string | null;
  scope?: Scope;
  mailboxAccess?: MailboxAccess;
  mailboxPermissions?: Record<string, 'read' | 'write'>;
  expiresAt?: string | null;
  transport?: string;
  tokenType?: string;
}

/** Issues an API key; the token is returned once and only its hash is stored. */
export async function createApiKey(db: Kysely<DB>, input: CreateKeyInput, actor: Actor, now: Date) {
  const prepared = await prepareApiKey(db, input, now);
  return db.transaction().execute((trx) => insertApiKey(trx, prepared, actor, now));
}

export type PreparedApiKey = Awaited<ReturnType<typeof prepareApiKey>>;

/**
 * Checks a key request (membership, label, mailboxes, expiry, plan limit) without writing.
 * Agent connections call this and insertApiKey inside their own transaction.
 */
export async function prepareApiKey(db: Kysely<DB>, input: CreateKeyInput, now: Date) {
  const membership = await db
    .selectFrom('memberships')
    .innerJoin('accounts', 'accounts.id', 'memberships.account_id')
    .select(['memberships.role', 'accounts.kind', 'accounts.plan'])
    .where('memberships.account_id', '=', input.accountId)
    .where('memberships.user_id', '=', input.userId)
    .executeTakeFirst();
  if (!membership) throw new AppError('ACCOUNT_ACCESS_DENIED', 'That person is not a member of the account.');
  const label = input.label?.trim() || null;
  if (label && label.length > MAX_KEY_LABEL) throw invalidArgument('label', `must be at most ${MAX_KEY_LABEL} characters`);
  const scope = input.scope ?? 'mailbox_write';
  const mailboxAccess = input.mailboxAccess ?? 'all';
  const perms = input.mailboxPermissions ?? {};
  if (mailboxAccess === 'selected' && Object.keys(perms).length === 0) throw invalidArgument('mailbox_ids', 'required when mailbox_access is selected');
  // An unreadable expiry would never compare as past and make a key that never expires.
  let expiresAt: string | null = null;
  if (input.expiresAt) {
    const at = parseIsoTime(input.expiresAt);
    if (at === null) throw invalidArgument('expires_at', 'must be an ISO 8601 date-time');
    if (at <= now.getTime()) throw invalidArgument('expires_at', 'must be in the future');
    expiresAt = iso(at);
  }

  const limit = PLANS[membership.plan].max_api_keys;
  const live = await db
    .selectFrom('api_keys')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('default_account_id', '=', input.accountId)
    .where('revoked_at', 'is', null)
    .executeTakeFirstOrThrow();
  if (limit !== null && Number(live.n) >= limit) {
    throw new AppError('ACCOUNT_CAPACITY_REACHED', `The plan allows at most ${limit} API keys.`, { limit: 'max_api_keys', max: limit });
  }
  return { input, membership, label, scope, mailboxAccess, perms, expiresAt };
}

/** Writes a prepared key in the caller's transaction; returns the token (shown once). */
export async function insertApiKey(trx: Kysely<DB>, p: PreparedApiKey, actor: Actor, now: Date) {
  const { input, membership, label, scope, mailboxAccess, perms, expiresAt } = p;
  const { token, hash, hint } = generateApiKey();
  const id = newId('key');
  await trx
    .insertInto('api_keys')
    .values({
      id,
      user_id: input.userId,
      token_hash: hash,
      token_hint: hint,
      label,
      token_type: input.tokenType ?? 'api',
      scope,
      mailbox_access: mailboxAccess,
      default_account_id: input.accountId,
      // Whole-account keys of an agency owner reach the agency's client accounts.
      include_client_accounts: membership.kind === 'agency' && membership.role === 'owner' && mailboxAccess === 'all' ? 1 : 0,
      transport: input.transport ?? 'api_key',
      expires_at: expiresAt,
      revoked_at: null,
      last_used_at: null,
      last_used_agent: null,
      created_at: iso(now),
    })
    .execute();
  await trx.insertInto('api_key_accounts').values({ api_key_id: id, account_id: input.accountId }).execute();
  if (mailboxAccess === 'selected') {
    await trx
      .insertInto('api_key_mailboxes')
      .values(Object.entries(perms).map(([mailbox_id, permission]) => ({ api_key_id: id, mailbox_id, permission })))
      .execute();
  }
  await recordActivity(trx, actor, now, { accountId: input.accountId, action: 'api_key.create', targetType: 'api_key', targetId: id });
  return { id, token, hint, label, scope, mailboxAccess, accountId: input.accountId, expiresAt };
}

export async function listApiKeys(db: Kysely<DB>, userId: string) {
  return db.selectFrom('api_keys').selectAll().where('user_id', '=', userId).orderBy('id', 'desc').execute();
}

export async function revokeApiKey(db: Kysely<DB>, userId: string, keyId: string, actor: Actor, now: Date): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    const key = await trx.selectFrom('api_keys').select(['id', 'default_account_id', 'revoked_at']).where('id', '=', keyId).where('user_id', '=', userId).executeTakeFirst();
    if (!key || key.revoked_at) return false;
    await trx.updateTable('api_keys').set({ revoked_at: iso(now) }).where('id', '=', keyId).execute();
    await recordActivity(trx, actor, now, { accountId: key.default_account_id, action: 'api_key.revoke', targetType: 'api_key', targetId: keyId });
    return true;
  });
}
