import type { Kysely } from 'kysely';
import type { DB } from '../db/schema.ts';
import { newId, randomToken, sha256Hex, type IdPrefix } from '../ids.ts';
import { iso } from '../time.ts';
import type { UserTokenPurpose } from './team.schema.ts';
import './team.schema.ts';

// One-time tokens sent to a person (email verification, password reset) or kept in a cookie
// between the password and the second factor. Only the SHA-256 is stored; a token is used once.

const TOKEN_SHAPE = /^[A-Za-z0-9]{43}$/;

/** Ids for this feature's rows (prefixes outside the shared id list). */
export function teamId(prefix: 'utk' | 'rcv' | 'inv'): string {
  return newId(prefix as IdPrefix);
}

export async function issueUserToken(db: Kysely<DB>, userId: string, purpose: UserTokenPurpose, ttlMs: number, now: Date, data: string | null = null): Promise<string> {
  const token = randomToken(43);
  await db
    .insertInto('user_tokens')
    .values({ id: teamId('utk'), user_id: userId, purpose, token_hash: sha256Hex(token), data, expires_at: iso(now.getTime() + ttlMs), used_at: null, created_at: iso(now) })
    .execute();
  return token;
}

export type TokenProblem = 'invalid' | 'expired' | 'used';

/** The live token's row, or why it cannot be used. Does not use it up. */
export async function findUserToken(db: Kysely<DB>, token: string, purpose: UserTokenPurpose, now: Date) {
  if (!TOKEN_SHAPE.test(token)) return { problem: 'invalid' as TokenProblem };
  const row = await db
    .selectFrom('user_tokens')
    .innerJoin('users', 'users.id', 'user_tokens.user_id')
    .select(['user_tokens.id', 'user_tokens.user_id', 'user_tokens.data', 'user_tokens.expires_at', 'user_tokens.used_at', 'users.email'])
    .where('user_tokens.token_hash', '=', sha256Hex(token))
    .where('user_tokens.purpose', '=', purpose)
    .executeTakeFirst();
  if (!row) return { problem: 'invalid' as TokenProblem };
  if (row.used_at) return { problem: 'used' as TokenProblem };
  if (Date.parse(row.expires_at) <= now.getTime()) return { problem: 'expired' as TokenProblem };
  return { row };
}

/** Marks the token used; false when another request used it first. */
export async function useUserToken(db: Kysely<DB>, id: string, now: Date): Promise<boolean> {
  const res = await db.updateTable('user_tokens').set({ used_at: iso(now) }).where('id', '=', id).where('used_at', 'is', null).executeTakeFirst();
  return Number(res.numUpdatedRows) === 1;
}
