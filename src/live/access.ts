import type { Kysely } from 'kysely';
import type { DB } from '../db/schema.ts';
import { credentialForKeyId, type Credential } from '../auth/credential.ts';
import { mailboxPermissions, reachableAccounts, toAccess } from '../auth/access.ts';

// A live connection keeps the access of the API key that asked for its ticket, and loses it the
// moment that access goes: the key revoked or expired, the account or mailbox no longer reachable
// by it, the mailbox deleted. The check reuses the tenancy rules of src/auth/access.ts; only the
// credential is rebuilt from the key id (credentialForKeyId), because the socket never sees the key itself.

export interface LiveBinding {
  apiKeyId: string;
  accountId: string;
  mailboxId: string;
}

export type AccessVerdict = { ok: true } | { ok: false; reason: 'unauthorized' };

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
    const perms = hit ? mailboxPermissions(cred, toAccess(cred, hit.account, hit.role, hit.mailboxLimit), b.mailboxId) : null;
    out.push(perms?.read ? { ok: true } : { ok: false, reason: 'unauthorized' });
  }
  return out;
}
