import type { AppDeps, Actor } from '../context.ts';
import type { MailboxAccess, Scope } from '../db/schema.ts';
import { AppError } from '../errors.ts';
import { sha256Hex } from '../ids.ts';
import { iso } from '../time.ts';
import { newSecret } from '../oauth/tokens.ts';
import { agentId, assertCanAuthorize, insertConnection, prepareConnection } from './connections.service.ts';

// One-time connection codes: a signed-in owner or administrator makes one in the dashboard
// with exactly the access an agent should get; the agent trades it once for an API key
// (exchange_grant). The code is shown once; only its hash is stored.

export const GRANT_TTL_SECONDS = 15 * 60;
const GRANT_SHAPE = /^cubby_grant_[A-Za-z0-9]{43}$/;

export async function createGrant(
  deps: AppDeps,
  input: { userId: string; accountId: string; scope: Scope; mailboxAccess: MailboxAccess; mailboxPermissions: Record<string, 'read' | 'write'>; label: string | null },
) {
  await assertCanAuthorize(deps.db, input.userId, input.accountId);
  const now = deps.now();
  const secret = newSecret('cubby_grant_');
  const expiresAt = iso(now.getTime() + GRANT_TTL_SECONDS * 1000);
  await deps.db
    .insertInto('agent_grants')
    .values({
      id: agentId('grt'),
      token_hash: secret.hash,
      user_id: input.userId,
      account_id: input.accountId,
      scope: input.scope,
      mailbox_access: input.mailboxAccess,
      mailbox_permissions: JSON.stringify(input.mailboxAccess === 'selected' ? input.mailboxPermissions : {}),
      label: input.label?.trim().slice(0, 100) || null,
      expires_at: expiresAt,
      consumed_at: null,
      connection_id: null,
      created_at: iso(now),
    })
    .execute();
  return { token: secret.token, expiresAt };
}

/** Trades a grant for a connection and its API key, exactly once. */
export async function exchangeGrant(deps: AppDeps, input: { grantToken: string; label?: string | null; accountId?: string | null }, actor: Omit<Actor, 'userId' | 'apiKeyId'>) {
  const now = deps.now();
  const row = GRANT_SHAPE.test(input.grantToken)
    ? await deps.db.selectFrom('agent_grants').selectAll().where('token_hash', '=', sha256Hex(input.grantToken)).executeTakeFirst()
    : undefined;
  if (!row || row.consumed_at || Date.parse(row.expires_at) <= now.getTime()) throw new AppError('GRANT_INVALID');
  if (input.accountId && input.accountId !== row.account_id) {
    throw new AppError('ACCOUNT_ACCESS_DENIED', 'This connection code is for another account.', { account_id: input.accountId });
  }
  const prepared = await prepareConnection(
    deps.db,
    {
      userId: row.user_id,
      accountId: row.account_id,
      kind: 'grant',
      label: input.label?.trim() || row.label,
      scope: row.scope as Scope,
      mailboxAccess: row.mailbox_access as MailboxAccess,
      mailboxPermissions: JSON.parse(row.mailbox_permissions),
    },
    now,
  );
  return deps.db.transaction().execute(async (trx) => {
    const res = await trx.updateTable('agent_grants').set({ consumed_at: iso(now) }).where('id', '=', row.id).where('consumed_at', 'is', null).executeTakeFirst();
    if (Number(res.numUpdatedRows) !== 1) throw new AppError('GRANT_INVALID');
    const made = await insertConnection(trx, prepared, { ...actor, userId: row.user_id, apiKeyId: null }, now);
    await trx.updateTable('agent_grants').set({ connection_id: made.connectionId }).where('id', '=', row.id).execute();
    return { ...made, userId: row.user_id };
  });
}
