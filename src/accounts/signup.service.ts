import type { Kysely } from 'kysely';
import type { AppDeps } from '../context.ts';
import type { DB } from '../db/schema.ts';
import { AppError } from '../errors.ts';
import { iso } from '../time.ts';
import { sendSystemMail } from '../outbound/system-mail.ts';
import { findUserToken, issueUserToken, useUserToken, type TokenProblem } from './user-tokens.ts';

// The sign-up policy (CUBBY_SIGNUP) and email verification.
//
// open: anyone may open an account. invite (default): the first person on an empty instance may,
// then only people holding an invitation. closed: only people holding an invitation (operators
// add others with `cubby admin`). Sending mail and publishing wait until the address is verified.

export type SignupPolicy = 'open' | 'invite' | 'closed';
export const VERIFY_TTL_MS = 48 * 3600_000;

/** Whether a new account may be opened without an invitation. */
export async function openSignUpAllowed(db: Kysely<DB>, policy: SignupPolicy): Promise<boolean> {
  if (policy === 'open') return true;
  if (policy === 'closed') return false;
  const anyone = await db.selectFrom('users').select('id').limit(1).executeTakeFirst();
  return !anyone;
}

/** Sends (or sends again) the verification link for a person's address. */
export async function sendVerification(deps: AppDeps, user: { id: string; email: string; name: string }, db: Kysely<DB> = deps.db): Promise<void> {
  const token = await issueUserToken(db, user.id, 'verify_email', VERIFY_TTL_MS, deps.now());
  const link = `${deps.publicUrl()}/users/verify_email?token=${token}`;
  await sendSystemMail(
    deps,
    {
      to: user.email,
      subject: 'Confirm your email address for Cubby',
      text: `Hello ${user.name},\n\nConfirm that this address is yours to start sending mail and publishing sites with Cubby:\n\n${link}\n\nThe link works once, for 48 hours. If you did not sign up for Cubby, ignore this message.\n`,
    },
    { db },
  );
}

/** Verifies the address behind a link; returns why not when the link cannot be used. */
export async function verifyEmail(db: Kysely<DB>, token: string, now: Date): Promise<{ userId: string } | { problem: TokenProblem }> {
  const found = await findUserToken(db, token, 'verify_email', now);
  if (!('row' in found) || !found.row) return { problem: found.problem! };
  const row = found.row;
  return db.transaction().execute(async (trx) => {
    if (!(await useUserToken(trx, row.id, now))) return { problem: 'used' as TokenProblem };
    await trx.updateTable('users').set({ email_verified_at: iso(now), updated_at: iso(now) }).where('id', '=', row.user_id).where('email_verified_at', 'is', null).execute();
    return { userId: row.user_id };
  });
}

/** Refuses sending and publishing for a person whose address is not verified yet. */
export async function assertEmailVerified(db: Kysely<DB>, userId: string): Promise<void> {
  const user = await db.selectFrom('users').select('email_verified_at').where('id', '=', userId).executeTakeFirst();
  if (user && !user.email_verified_at) throw new AppError('EMAIL_NOT_VERIFIED', undefined, { user_id: userId });
}
