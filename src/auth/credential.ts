import type { Kysely } from 'kysely';
import type { DB, MailboxAccess, PlanName, Scope } from '../db/schema.ts';
import { AppError } from '../errors.ts';
import { randomToken, sha256Hex } from '../ids.ts';
import { iso } from '../time.ts';

export const API_KEY_PREFIX = 'cubby_';
const KEY_BODY = /^cubby_[A-Za-z0-9]{40}$/;

/** The authenticated caller of one request: a key and the person it acts for. */
export interface Credential {
  keyId: string;
  user: { id: string; email: string; name: string };
  label: string | null;
  tokenType: string;
  scope: Scope;
  mailboxAccess: MailboxAccess;
  /** Per-mailbox permission for `selected` access. */
  mailboxPermissions: Record<string, 'read' | 'write'>;
  defaultAccountId: string;
  grantedAccountIds: string[];
  includeClientAccounts: boolean;
  transport: string;
  /** Plan of the key's default account: it sets the key's request rate. */
  plan: PlanName;
  expiresAt: string | null;
  lastUsedAt: string | null;
}

export interface AgentInfo {
  user_agent: string | null;
  agent: string | null;
  client: string | null;
  version: string | null;
  run_id: string | null;
  project: string | null;
  task: string | null;
}

export function generateApiKey(): { token: string; hash: string; hint: string } {
  const token = `${API_KEY_PREFIX}${randomToken(40)}`;
  return { token, hash: sha256Hex(token), hint: `${token.slice(0, 10)}…${token.slice(-4)}` };
}

// last_used_at is written at most once a minute per key so that reads stay reads.
const LAST_USED_RESOLUTION_MS = 60_000;

/** Resolves a bearer token to a credential, or throws 401 with a precise code. */
export async function authenticateApiKey(db: Kysely<DB>, token: string | undefined, agent: AgentInfo, now: Date): Promise<Credential> {
  if (!token) throw new AppError('UNAUTHENTICATED', 'Send Authorization: Bearer <API key>.');
  if (!KEY_BODY.test(token)) throw new AppError('UNAUTHENTICATED');
  const row = await db
    .selectFrom('api_keys')
    .innerJoin('users', 'users.id', 'api_keys.user_id')
    .selectAll('api_keys')
    .innerJoin('accounts', 'accounts.id', 'api_keys.default_account_id')
    .select(['users.email as user_email', 'users.name as user_name', 'accounts.plan as plan'])
    .where('token_hash', '=', sha256Hex(token))
    .executeTakeFirst();
  if (!row) throw new AppError('UNAUTHENTICATED');
  if (row.revoked_at) throw new AppError('API_KEY_REVOKED');
  if (row.expires_at && Date.parse(row.expires_at) <= now.getTime()) throw new AppError('API_KEY_EXPIRED');

  const [accounts, mailboxes] = await Promise.all([
    db.selectFrom('api_key_accounts').select('account_id').where('api_key_id', '=', row.id).execute(),
    db.selectFrom('api_key_mailboxes').select(['mailbox_id', 'permission']).where('api_key_id', '=', row.id).execute(),
  ]);

  let lastUsedAt = row.last_used_at;
  if (!row.last_used_at || now.getTime() - Date.parse(row.last_used_at) > LAST_USED_RESOLUTION_MS) {
    lastUsedAt = iso(now);
    await db
      .updateTable('api_keys')
      .set({ last_used_at: iso(now), last_used_agent: JSON.stringify(agent) })
      .where('id', '=', row.id)
      .execute();
  }

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
    // This request is a use: report it, not the use before it.
    lastUsedAt: lastUsedAt ?? iso(now),
  };
}

const AGENT_HEADERS: Record<Exclude<keyof AgentInfo, 'user_agent'>, string> = {
  agent: 'agent',
  client: 'agent-client',
  version: 'agent-version',
  run_id: 'agent-run-id',
  project: 'agent-project',
  task: 'agent-task',
};

/** Agent identification headers, under X-Service- or X-Cubby-, each capped at 200 characters. */
export function readAgentHeaders(headers: Record<string, string | string[] | undefined>): AgentInfo {
  const one = (name: string): string | null => {
    const v = headers[name];
    const s = Array.isArray(v) ? v[0] : v;
    return s ? s.slice(0, 200) : null;
  };
  const info = { user_agent: one('user-agent') } as AgentInfo;
  for (const [field, suffix] of Object.entries(AGENT_HEADERS)) {
    (info as any)[field] = one(`x-service-${suffix}`) ?? one(`x-cubby-${suffix}`);
  }
  return info;
}
