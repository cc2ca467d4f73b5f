import { createHmac, randomBytes } from 'node:crypto';
import type { Kysely } from 'kysely';
import * as OTPAuth from 'otpauth';
import QRCode from 'qrcode';
import type { AppDeps } from '../context.ts';
import type { DB } from '../db/schema.ts';
import { iso } from '../time.ts';
import { seal, unseal } from '../outbound/seal.ts';
import { sendSystemMail } from '../outbound/system-mail.ts';
import { findUserByEmail, hashPassword, passwordProblem, verifyPassword } from '../users/users.service.ts';
import { findUserToken, issueUserToken, teamId, useUserToken, type TokenProblem } from './user-tokens.ts';
import './team.schema.ts';

// Sign-in security: password changes and resets, TOTP two-factor with recovery codes, sessions.
//
// TOTP (RFC 6238: SHA-1, 6 digits, 30 s) accepts the current step and one either side, and never
// the same step twice (users.totp_last_step), so a code seen over a shoulder cannot be replayed.
// The seed is sealed with the service secret. Recovery codes are random (50 bits), shown once and
// stored as HMACs with the service secret; each works once.

export const RESET_TTL_MS = 30 * 60_000;
export const TOTP_SETUP_TTL_MS = 15 * 60_000;
export const RECOVERY_CODES = 10;
const TOTP_PERIOD = 30;
const SEAL_PURPOSE = 'totp-seed';

export class SecurityError extends Error {
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(message);
  }
}

function totpFor(secretBase32: string, email: string): OTPAuth.TOTP {
  return new OTPAuth.TOTP({ issuer: 'Cubby', label: email, algorithm: 'SHA1', digits: 6, period: TOTP_PERIOD, secret: OTPAuth.Secret.fromBase32(secretBase32) });
}

/** The time step a code matches (current ±1), or null. */
export function totpStep(secretBase32: string, code: string, now: Date): number | null {
  const token = code.replace(/\s+/g, '');
  if (!/^\d{6}$/.test(token)) return null;
  const delta = totpFor(secretBase32, 'x').validate({ token, timestamp: now.getTime(), window: 1 });
  return delta === null ? null : Math.floor(now.getTime() / 1000 / TOTP_PERIOD) + delta;
}

// ---- password ----

export async function changePassword(deps: AppDeps, userId: string, current: string, next: string, keepSessionId: string): Promise<void> {
  const user = await deps.db.selectFrom('users').select(['email', 'password_hash']).where('id', '=', userId).executeTakeFirstOrThrow();
  if (!(await verifyPassword(user.password_hash, current))) throw new SecurityError('current_password', 'Your current password is not correct.');
  const weak = passwordProblem(next, user.email);
  if (weak) throw new SecurityError('new_password', weak);
  const now = deps.now();
  const hash = await hashPassword(next);
  await deps.db.transaction().execute(async (trx) => {
    await trx.updateTable('users').set({ password_hash: hash, password_changed_at: iso(now), updated_at: iso(now) }).where('id', '=', userId).execute();
    // Every other browser signed in with the old password is signed out.
    await trx.deleteFrom('sessions').where('user_id', '=', userId).where('id', '<>', keepSessionId).execute();
  });
}

/**
 * Sends a reset link when the address belongs to someone (the answer never says whether it
 * does). At most 3 links per person in 30 minutes.
 */
export async function requestPasswordReset(deps: AppDeps, email: string): Promise<void> {
  const user = await findUserByEmail(deps.db, email);
  if (!user) return;
  const now = deps.now();
  const recent = await deps.db
    .selectFrom('user_tokens')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('user_id', '=', user.id)
    .where('purpose', '=', 'password_reset')
    .where('created_at', '>', iso(now.getTime() - RESET_TTL_MS))
    .executeTakeFirstOrThrow();
  if (Number(recent.n) >= 3) return;
  await deps.db.transaction().execute(async (trx) => {
    const token = await issueUserToken(trx, user.id, 'password_reset', RESET_TTL_MS, now);
    const link = `${deps.publicUrl()}/users/password/edit?token=${token}`;
    await sendSystemMail(
      deps,
      {
        to: user.email,
        subject: 'Reset your Cubby password',
        text: `Hello ${user.name},\n\nSomeone (hopefully you) asked to reset the password of your Cubby login. Choose a new password here:\n\n${link}\n\nThe link works once, for 30 minutes. Resetting signs you out everywhere. If you did not ask for this, ignore this message: your password stays as it is.\n`,
      },
      { db: trx },
    );
  });
}

export async function checkResetToken(db: Kysely<DB>, token: string, now: Date): Promise<{ userId: string; email: string } | { problem: TokenProblem }> {
  const found = await findUserToken(db, token, 'password_reset', now);
  if (!found.row) return { problem: found.problem! };
  return { userId: found.row.user_id, email: found.row.email };
}

/** Sets a new password from a reset link: the link is used up and every session ends. */
export async function resetPassword(deps: AppDeps, token: string, next: string): Promise<{ userId: string } | { problem: TokenProblem }> {
  const now = deps.now();
  const found = await findUserToken(deps.db, token, 'password_reset', now);
  if (!found.row) return { problem: found.problem! };
  const row = found.row;
  const weak = passwordProblem(next, row.email);
  if (weak) throw new SecurityError('password', weak);
  const hash = await hashPassword(next);
  return deps.db.transaction().execute(async (trx) => {
    if (!(await useUserToken(trx, row.id, now))) return { problem: 'used' as TokenProblem };
    await trx.updateTable('users').set({ password_hash: hash, password_changed_at: iso(now), updated_at: iso(now) }).where('id', '=', row.user_id).execute();
    await trx.deleteFrom('sessions').where('user_id', '=', row.user_id).execute();
    // Other reset links sent before this one stop working too.
    await trx.updateTable('user_tokens').set({ used_at: iso(now) }).where('user_id', '=', row.user_id).where('purpose', '=', 'password_reset').where('used_at', 'is', null).execute();
    return { userId: row.user_id };
  });
}

// ---- two-factor ----

export interface TotpSetup {
  /** Identifies the pending setup (a one-time token kept in the form). */
  setupToken: string;
  secret: string;
  uri: string;
  /** The QR code as an SVG data URL, rendered here (the seed never leaves the server otherwise). */
  qrDataUrl: string;
}

export async function startTotpSetup(deps: AppDeps, user: { id: string; email: string }): Promise<TotpSetup> {
  const secret = new OTPAuth.Secret({ size: 20 }).base32;
  const setupToken = await issueUserToken(deps.db, user.id, 'totp_setup', TOTP_SETUP_TTL_MS, deps.now(), seal(deps.secret, SEAL_PURPOSE, Buffer.from(secret)));
  return totpSetupView(user.email, secret, setupToken);
}

export async function totpSetupView(email: string, secret: string, setupToken: string): Promise<TotpSetup> {
  const uri = totpFor(secret, email).toString();
  const svg = await QRCode.toString(uri, { type: 'svg', errorCorrectionLevel: 'M', margin: 2 });
  return { setupToken, secret, uri, qrDataUrl: `data:image/svg+xml;base64,${Buffer.from(svg).toString('base64')}` };
}

/** The pending setup's seed, or null when the setup token is not this person's or has expired. */
export async function pendingTotpSecret(deps: AppDeps, userId: string, setupToken: string): Promise<string | null> {
  const found = await findUserToken(deps.db, setupToken, 'totp_setup', deps.now());
  if (!found.row || found.row.user_id !== userId || !found.row.data) return null;
  return unseal(deps.secret, SEAL_PURPOSE, found.row.data).toString();
}

function recoveryHash(secret: string, code: string): string {
  return createHmac('sha256', `${secret}:recovery-code`).update(code.replace(/[\s-]/g, '').toLowerCase()).digest('hex');
}

function newRecoveryCode(): string {
  // 10 characters of base32 (50 bits), shown as two groups of five.
  const alphabet = 'abcdefghijkmnpqrstuvwxyz23456789';
  const bytes = randomBytes(10);
  const chars = [...bytes].map((b) => alphabet[b % 32]).join('');
  return `${chars.slice(0, 5)}-${chars.slice(5)}`;
}

/** Confirms the setup with a first code; turns two-factor on and returns the recovery codes (shown once). */
export async function enableTotp(deps: AppDeps, userId: string, setupToken: string, code: string): Promise<string[]> {
  const secret = await pendingTotpSecret(deps, userId, setupToken);
  if (!secret) throw new SecurityError('code', 'This setup has expired. Start again.');
  const now = deps.now();
  const step = totpStep(secret, code, now);
  if (step === null) throw new SecurityError('code', 'That code is not correct. Check the time on your phone and enter the current code.');
  const codes = Array.from({ length: RECOVERY_CODES }, newRecoveryCode);
  const found = await findUserToken(deps.db, setupToken, 'totp_setup', now);
  await deps.db.transaction().execute(async (trx) => {
    if (!found.row || !(await useUserToken(trx, found.row.id, now))) throw new SecurityError('code', 'This setup was already used. Start again.');
    await trx
      .updateTable('users')
      .set({ two_factor_enabled: 1, totp_secret: seal(deps.secret, SEAL_PURPOSE, Buffer.from(secret)), totp_last_step: step, updated_at: iso(now) })
      .where('id', '=', userId)
      .execute();
    await trx.deleteFrom('recovery_codes').where('user_id', '=', userId).execute();
    for (const c of codes) await trx.insertInto('recovery_codes').values({ id: teamId('rcv'), user_id: userId, code_hash: recoveryHash(deps.secret, c), used_at: null, created_at: iso(now) }).execute();
  });
  return codes;
}

/** Turns two-factor off (the person, with their password, or an operator) and drops the recovery codes. */
export async function disableTotp(db: Kysely<DB>, userId: string, now: Date): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    const res = await trx.updateTable('users').set({ two_factor_enabled: 0, totp_secret: null, totp_last_step: null, updated_at: iso(now) }).where('id', '=', userId).where('two_factor_enabled', '=', 1).executeTakeFirst();
    await trx.deleteFrom('recovery_codes').where('user_id', '=', userId).execute();
    return Number(res.numUpdatedRows) > 0;
  });
}

export type SecondFactorResult = 'ok' | 'wrong' | 'reused';

/**
 * Checks a TOTP code or a recovery code for the person. A TOTP step is accepted once (a
 * concurrent second use loses the conditional update); a recovery code once.
 */
export async function checkSecondFactor(deps: AppDeps, userId: string, input: string): Promise<SecondFactorResult> {
  const now = deps.now();
  const user = await deps.db.selectFrom('users').select(['totp_secret', 'totp_last_step']).where('id', '=', userId).executeTakeFirstOrThrow();
  if (!user.totp_secret) return 'wrong';
  const code = input.trim();
  if (/^\d{3}\s?\d{3}$/.test(code)) {
    const step = totpStep(unseal(deps.secret, SEAL_PURPOSE, user.totp_secret).toString(), code, now);
    if (step === null) return 'wrong';
    const res = await deps.db
      .updateTable('users')
      .set({ totp_last_step: step })
      .where('id', '=', userId)
      .where((eb) => eb.or([eb('totp_last_step', 'is', null), eb('totp_last_step', '<', step)]))
      .executeTakeFirst();
    return Number(res.numUpdatedRows) === 1 ? 'ok' : 'reused';
  }
  const hash = recoveryHash(deps.secret, code);
  const row = await deps.db.selectFrom('recovery_codes').select(['id', 'used_at']).where('user_id', '=', userId).where('code_hash', '=', hash).executeTakeFirst();
  if (!row) return 'wrong';
  if (row.used_at) return 'reused';
  const res = await deps.db.updateTable('recovery_codes').set({ used_at: iso(now) }).where('id', '=', row.id).where('used_at', 'is', null).executeTakeFirst();
  return Number(res.numUpdatedRows) === 1 ? 'ok' : 'reused';
}

export async function recoveryCodesLeft(db: Kysely<DB>, userId: string): Promise<number> {
  const r = await db.selectFrom('recovery_codes').select((eb) => eb.fn.countAll<number>().as('n')).where('user_id', '=', userId).where('used_at', 'is', null).executeTakeFirstOrThrow();
  return Number(r.n);
}

// ---- sessions ----

export function listSessions(db: Kysely<DB>, userId: string, now: Date) {
  return db
    .selectFrom('sessions')
    .select(['id', 'created_at', 'last_seen_at', 'user_agent', 'ip'])
    .where('user_id', '=', userId)
    .where('expires_at', '>', iso(now))
    .orderBy('last_seen_at', 'desc')
    .limit(100)
    .execute();
}

/** Ends one session of the person, or all but `keep` when `sessionId` is null. */
export async function endSessions(db: Kysely<DB>, userId: string, sessionId: string | null, keep: string): Promise<number> {
  let q = db.deleteFrom('sessions').where('user_id', '=', userId).where('id', '<>', keep);
  if (sessionId) q = q.where('id', '=', sessionId);
  const res = await q.executeTakeFirst();
  return Number(res.numDeletedRows);
}
