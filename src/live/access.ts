import type { Kysely } from 'kysely';
import type { DB } from '../db/schema.ts';
import type { Credential } from '../auth/credential.ts';
import { mailboxPermissions, reachableAccounts, toAccess } from '../auth/access.ts';

// A live connection keeps the access of the API key that asked for its ticket, and loses it the
// moment that access goes: the key revoked or expired, the account or mailbox no longer reachable
// by it, the mailbox deleted. The check reuses the tenancy rules of src/auth/access.ts; only the
// credential is rebuilt from the key id, because the socket never sees the key itself.

export interface LiveBinding {
  apiKeyId: string;
  accountId: string;
  mailboxId: string;
}

export type AccessVerdict = { ok: true } | { ok: false; reason: 'unauthorized' };

/** The credential of an API key by id, as authenticateApiKey builds it; null when revoked or expired. */
export async function credentialForKeyId(db: Kysely<DB>, keyId: string, now: Date): Promise<Credential | null> {
  const row = await db
    .selectFrom('api_keys')
    .innerJoin('users', 'users.id', 'api_keys.user_id')
    .innerJoin('accounts', 'accounts.id', 'api_keys.default_account_id')
    .selectAll('api_keys')
    .select(['users.email as user_email', 'users.name as user_name', 'accounts.plan as plan'])
    .where('api_keys.id', '=', keyId)
    .executeTakeFirst();
  if (!row || row.revoked_at) return null;
  if (row.expires_at && Date.parse(row.expires_at) <= now.getTime()) return null;
  const [accounts, mailboxes] = await Promise.all([
    db.selectFrom('api_key_accounts').select('account_id').where('api_key_id', '=', row.id).execute(),
    db.selectFrom('api_key_mailboxes').select(['mailbox_id', 'permission']).where('api_key_id', '=', row.id).execute(),
  ]);
  return {
    keyId: row.id,
    user: { id: row.user_id, email: row.user_email, name: row.user_name },
    label: row.label,
    tokenType: row.token_type,
    scope: row.scope,
    mailboxAccess: row.mailbox_access,
    mailboxPermissions: Object.fromEntries(mailboxes.map((m) => [m.mailbox_id, m.permission])),
    defaultAccountId: row.default_account_id,
    grantedAccountIds: accounts.map((a) => a.account_id),
    includeClientAccounts: row.include_client_accounts === 1,
    transport: row.transport,
    plan: row.plan,
    expiresAt: row.expires_at,
    lastUsedAt: row.last_used_at,
  };
}

/**
 * Checks many bindings at once (one credential load per key): the verdict per binding, in order.
 * Read permission on a live mailbox of a reachable account is what a subscription needs.
 */
export async function checkLiveAccess(db: Kysely<DB>, bindings: LiveBinding[], now: Date): Promise<AccessVerdict[]> {
  const creds = new Map<string, Promise<Credential | null>>();
  const reach = new Map<string, ReturnType<typeof reachableAccounts>>();
  const mailboxIds = [...new Set(bindings.map((b) => b.mailboxId))];
  const alive = new Set(
    mailboxIds.length
      ? (await db.selectFrom('mailboxes').select(['id', 'account_id']).where('id', 'in', mailboxIds).where('deleted_at', 'is', null).execute()).map((m) => `${m.account_id}/${m.id}`)
      : [],
  );
  const out: AccessVerdict[] = [];
  for (const b of bindings) {
    if (!creds.has(b.apiKeyId)) creds.set(b.apiKeyId, credentialForKeyId(db, b.apiKeyId, now));
    const cred = await creds.get(b.apiKeyId)!;
    if (!cred || !alive.has(`${b.accountId}/${b.mailboxId}`)) {
      out.push({ ok: false, reason: 'unauthorized' });
      continue;
    }
    if (!reach.has(cred.keyId)) reach.set(cred.keyId, reachableAccounts(db, cred));
    const hit = (await reach.get(cred.keyId)!).get(b.accountId);
    const perms = hit ? mailboxPermissions(cred, toAccess(cred, hit.account, hit.role), b.mailboxId) : null;
    out.push(perms?.read ? { ok: true } : { ok: false, reason: 'unauthorized' });
  }
  return out;
}
