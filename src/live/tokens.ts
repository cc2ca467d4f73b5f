import type { Kysely } from 'kysely';
import type { DB } from '../db/schema.ts';
import type { LiveBinding } from './access.ts';
import { randomToken, sha256Hex } from '../ids.ts';
import { iso } from '../time.ts';

// Subscription tickets: a random token handed out by GET …/email/subscription, good for one
// WebSocket connection within 60 seconds, bound to the key, account and mailbox it was issued for.
// Only its SHA-256 is stored; taking it is one guarded update, so two connections racing with the
// same token cannot both win.

export const LIVE_TOKEN_TTL_S = 60;
const TOKEN_SHAPE = /^[A-Za-z0-9]{43}$/;

export async function issueLiveToken(db: Kysely<DB>, b: LiveBinding & { userId: string }, now: Date): Promise<{ token: string; expiresAt: string }> {
  const token = randomToken(43);
  const expiresAt = iso(now.getTime() + LIVE_TOKEN_TTL_S * 1000);
  await db
    .insertInto('live_tokens')
    .values({ token_hash: sha256Hex(token), api_key_id: b.apiKeyId, user_id: b.userId, account_id: b.accountId, mailbox_id: b.mailboxId, created_at: iso(now), expires_at: expiresAt, used_at: null })
    .execute();
  return { token, expiresAt };
}

/** Takes a token for a connection: its binding, or null when unknown, expired or already used. */
export async function consumeLiveToken(db: Kysely<DB>, token: string | undefined, now: Date): Promise<LiveBinding | null> {
  if (!token || !TOKEN_SHAPE.test(token)) return null;
  const row = await db
    .updateTable('live_tokens')
    .set({ used_at: iso(now) })
    .where('token_hash', '=', sha256Hex(token))
    .where('used_at', 'is', null)
    .where('expires_at', '>', iso(now))
    .returning(['api_key_id', 'account_id', 'mailbox_id'])
    .executeTakeFirst();
  return row ? { apiKeyId: row.api_key_id, accountId: row.account_id, mailboxId: row.mailbox_id } : null;
}

/** Forgets tickets a day after they expired. */
export async function sweepLiveTokens(db: Kysely<DB>, now: Date): Promise<number> {
  const res = await db.deleteFrom('live_tokens').where('expires_at', '<', iso(now.getTime() - 86_400_000)).executeTakeFirst();
  return Number(res.numDeletedRows);
}
