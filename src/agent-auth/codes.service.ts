import { createHmac, randomInt, timingSafeEqual } from 'node:crypto';
import type { AppDeps, Actor } from '../context.ts';
import type { MailboxAccess, Scope } from '../db/schema.ts';
import { AppError, invalidArgument } from '../errors.ts';
import { iso } from '../time.ts';
import { findUserByEmail, isEmail, normalizeEmail } from '../users/users.service.ts';
import { sendSystemMail } from '../outbound/system-mail.ts';
import { agentId, authorizableAccounts, insertConnection, prepareConnection } from './connections.service.ts';
import { assertUnderLimit, clientKey, LIMITS, recordAttempt } from './throttle.ts';

// The email-code flow: request_code mails a six-digit code to a person's address (the reply
// is the same for every address, known or not); verify_code trades it, once, for an API key.
// Only owners and administrators can complete it, never people with two-factor sign-in.
// Codes live ten minutes, allow five wrong tries, and are stored as an HMAC (six digits
// would fall to a plain hash at once).

export const CODE_TTL_SECONDS = 600;
const MAX_FAILED_TRIES = 5;

function codeHmac(secret: string, id: string, code: string): string {
  return createHmac('sha256', `${secret}:agent-sign-in-code`).update(`${id}:${code}`).digest('hex');
}

export function requestCodeReply(deps: AppDeps, email: string) {
  return {
    message: 'If this address belongs to a Cubby owner or administrator, a six-digit sign-in code is on its way.',
    email,
    expires_in_seconds: CODE_TTL_SECONDS,
    fallback_url: `${deps.publicUrl()}/users/sign_in`,
    hint: 'Type the code into your private client, never into an AI chat. No code? Sign in in the browser instead.',
  };
}

/** Sends a code when the address is a person's; answers the same either way. */
export async function requestCode(deps: AppDeps, input: { email: string; accountId?: string | null; ip: string }) {
  const email = input.email.trim();
  if (!isEmail(email)) throw invalidArgument('email', 'must be an email address');
  const key = normalizeEmail(email);
  const now = deps.now();
  await assertUnderLimit(deps.db, LIMITS.codeRequestPerEmail, key, now);
  await assertUnderLimit(deps.db, LIMITS.codeRequestPerIp, clientKey(input.ip), now);
  await recordAttempt(deps.db, LIMITS.codeRequestPerEmail, key, now);
  await recordAttempt(deps.db, LIMITS.codeRequestPerIp, clientKey(input.ip), now);
  const user = await findUserByEmail(deps.db, email);
  if (user) {
    const id = agentId('sic');
    const code = String(randomInt(0, 1_000_000)).padStart(6, '0');
    await deps.db.transaction().execute(async (trx) => {
      // One live code per address: a new one replaces the last.
      await trx.updateTable('agent_sign_in_codes').set({ consumed_at: iso(now) }).where('email', '=', key).where('consumed_at', 'is', null).execute();
      await trx
        .insertInto('agent_sign_in_codes')
        .values({ id, email: key, user_id: user.id, code_hmac: codeHmac(deps.secret, id, code), account_id: input.accountId ?? null, failed_attempts: 0, expires_at: iso(now.getTime() + CODE_TTL_SECONDS * 1000), consumed_at: null, created_at: iso(now) })
        .execute();
      await sendSystemMail(
        deps,
        {
          to: user.email,
          subject: `Your Cubby sign-in code: ${code}`,
          text: `Your Cubby sign-in code is ${code}\n\nIt connects an agent or tool to your Cubby account and works once within ${CODE_TTL_SECONDS / 60} minutes.\nType it only into the program that asked for it, never into an AI chat.\nIf you did not ask for it, ignore this message.\n`,
        },
        { db: trx },
      );
    });
  }
  return requestCodeReply(deps, email);
}

export interface VerifyInput {
  email: string;
  code: string;
  label?: string | null;
  scope?: Scope;
  mailboxAccess?: MailboxAccess;
  mailboxIds?: string[];
  mailboxPermissions?: Record<string, 'read' | 'write'>;
  accountId?: string | null;
  ip: string;
}

/** Trades a code for a connection and its API key. */
export async function verifyCode(deps: AppDeps, input: VerifyInput, actor: Omit<Actor, 'userId' | 'apiKeyId'>) {
  const code = input.code.replace(/\s+/g, '');
  if (!/^\d{6}$/.test(code)) throw invalidArgument('code', 'must be six digits');
  const email = input.email.trim();
  if (!isEmail(email)) throw invalidArgument('email', 'must be an email address');
  const key = normalizeEmail(email);
  const ip = clientKey(input.ip);
  const now = deps.now();
  await assertUnderLimit(deps.db, LIMITS.codeFailurePerEmail, key, now);
  await assertUnderLimit(deps.db, LIMITS.codeFailurePerIp, ip, now);
  const row = await deps.db
    .selectFrom('agent_sign_in_codes')
    .selectAll()
    .where('email', '=', key)
    .where('consumed_at', 'is', null)
    .where('expires_at', '>', iso(now))
    .orderBy('created_at', 'desc')
    .executeTakeFirst();
  const expected = row ? Buffer.from(row.code_hmac, 'hex') : null;
  const given = Buffer.from(codeHmac(deps.secret, row?.id ?? 'none', code), 'hex');
  if (!row || !expected || !timingSafeEqual(expected, given)) {
    await recordAttempt(deps.db, LIMITS.codeFailurePerEmail, key, now);
    await recordAttempt(deps.db, LIMITS.codeFailurePerIp, ip, now);
    if (row) {
      const tries = row.failed_attempts + 1;
      await deps.db.updateTable('agent_sign_in_codes').set({ failed_attempts: tries, consumed_at: tries >= MAX_FAILED_TRIES ? iso(now) : null }).where('id', '=', row.id).execute();
    }
    throw new AppError('SIGN_IN_CODE_INVALID');
  }
  const user = await deps.db.selectFrom('users').select(['id', 'two_factor_enabled']).where('id', '=', row.user_id).executeTakeFirstOrThrow();
  if (user.two_factor_enabled === 1) {
    await deps.db.updateTable('agent_sign_in_codes').set({ consumed_at: iso(now) }).where('id', '=', row.id).execute();
    throw new AppError('TWO_FACTOR_REQUIRED', undefined, { fallback_url: `${deps.publicUrl()}/users/sign_in` });
  }
  const accounts = await authorizableAccounts(deps.db, user.id);
  const accountId = input.accountId ?? row.account_id ?? accounts[0]?.id;
  if (!accountId) throw new AppError('ACCOUNT_ADMIN_REQUIRED');
  const scope = input.scope ?? 'mailbox_write';
  const access = input.mailboxAccess ?? 'all';
  let permissions: Record<string, 'read' | 'write'> | undefined;
  if (access === 'selected') {
    const ids = input.mailboxIds ?? [];
    if (ids.length === 0) throw invalidArgument('mailbox_ids', 'required when mailbox_access is selected');
    // Without an entry a mailbox gets write, or read when the scope is mailbox_read.
    permissions = Object.fromEntries(ids.map((id) => [id, scope === 'mailbox_read' ? 'read' : (input.mailboxPermissions?.[id] ?? 'write')]));
    const extra = Object.keys(input.mailboxPermissions ?? {}).find((id) => !ids.includes(id));
    if (extra) throw invalidArgument('mailbox_permissions', `${extra} is not in mailbox_ids`);
  }
  const prepared = await prepareConnection(deps.db, { userId: user.id, accountId, kind: 'email_code', label: input.label ?? 'Agent (email code)', scope, mailboxAccess: access, mailboxPermissions: permissions }, now);
  return deps.db.transaction().execute(async (trx) => {
    const used = await trx.updateTable('agent_sign_in_codes').set({ consumed_at: iso(now) }).where('id', '=', row.id).where('consumed_at', 'is', null).executeTakeFirst();
    if (Number(used.numUpdatedRows) !== 1) throw new AppError('SIGN_IN_CODE_INVALID');
    const made = await insertConnection(trx, prepared, { ...actor, userId: user.id, apiKeyId: null }, now);
    return { ...made, userId: user.id };
  });
}
