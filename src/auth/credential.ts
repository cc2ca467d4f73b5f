import type { Kysely } from 'kysely';
import type { DB, MailboxAccess, PlanName, Scope } from '../db/schema.ts';
import { AppError } from '../errors.ts';
import { randomToken, sha256Hex } from '../ids.ts';
import { iso } from '../time.ts';
import type { ConnectionKind } from '../agent-auth/agent-auth.schema.ts';
import { isAccessToken } from '../oauth/tokens.ts';
import { revokeConnection } from '../agent-auth/connections.service.ts';
import { compiledQuery } from '../db/compiled-query.ts';

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
  /** How this request authenticated: an API key (also when absent), or an OAuth access token. */
  authMethod?: 'api_key' | 'oauth';
  /** The agent connection behind the key (email code, grant, OAuth), or null for dashboard keys. */
  connection?: { id: string; kind: ConnectionKind } | null;
  /** RFC 8707 resource the OAuth access token was issued for; null for API keys. */
  resource?: string | null;
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

function keyQuery(db: Kysely<DB>) {
  return db
    .selectFrom('api_keys')
    .innerJoin('users', 'users.id', 'api_keys.user_id')
    .selectAll('api_keys')
    .innerJoin('accounts', 'accounts.id', 'api_keys.default_account_id')
    .leftJoin('agent_connections', 'agent_connections.api_key_id', 'api_keys.id')
    .leftJoin('memberships', (j) => j.onRef('memberships.account_id', '=', 'api_keys.default_account_id').onRef('memberships.user_id', '=', 'api_keys.user_id'))
    .select([
      'users.email as user_email',
      'users.name as user_name',
      'accounts.plan as plan',
      'agent_connections.id as connection_id',
      'agent_connections.kind as connection_kind',
      'memberships.role as member_role',
    ]);
}
type KeyRow = NonNullable<Awaited<ReturnType<ReturnType<typeof keyQuery>['executeTakeFirst']>>>;

// Run for every request that carries a key or token: built once (src/db/compiled-query.ts). Built
// per request, the five-table join and the key's grants cost more event-loop time than SQLite took
// to run them.
const KEY_BY_HASH = compiledQuery((db, hash: string) => keyQuery(db).where('api_keys.token_hash', '=', hash), 1);
const KEY_BY_ID = compiledQuery((db, id: string) => keyQuery(db).where('api_keys.id', '=', id), 1);
const KEY_ACCOUNTS = compiledQuery((db, keyId: string) => db.selectFrom('api_key_accounts').select('account_id').where('api_key_id', '=', keyId), 1);
const KEY_MAILBOXES = compiledQuery((db, keyId: string) => db.selectFrom('api_key_mailboxes').select(['mailbox_id', 'permission']).where('api_key_id', '=', keyId), 1);

/**
 * Resolves a bearer token to a credential, or throws 401 with a precise code. Two kinds of
 * token authenticate, both here: API keys (`cubby_` + 40) and OAuth access tokens, which act
 * through their connection's backing key and so get exactly the same tenancy and permissions.
 */
export async function authenticateApiKey(db: Kysely<DB>, token: string | undefined, agent: AgentInfo, now: Date): Promise<Credential> {
  if (!token) throw new AppError('UNAUTHENTICATED', 'Send Authorization: Bearer <API key or OAuth access token>.');
  if (isAccessToken(token)) return authenticateAccessToken(db, token, agent, now);
  if (!KEY_BODY.test(token)) throw new AppError('UNAUTHENTICATED');
  const row = await KEY_BY_HASH.executeTakeFirst(db, sha256Hex(token));
  if (!row) throw new AppError('UNAUTHENTICATED');
  if (row.revoked_at) throw new AppError('API_KEY_REVOKED');
  if (row.expires_at && Date.parse(row.expires_at) <= now.getTime()) throw new AppError('API_KEY_EXPIRED');
  await assertConnectionMember(db, row, now);
  return finishCredential(db, row, agent, now, { authMethod: 'api_key', expiresAt: row.expires_at, transport: row.transport });
}

async function authenticateAccessToken(db: Kysely<DB>, token: string, agent: AgentInfo, now: Date): Promise<Credential> {
  const invalid = () => new AppError('UNAUTHENTICATED', 'This OAuth access token is invalid, expired or revoked; refresh it or authorize again.');
  const tok = await db
    .selectFrom('oauth_tokens')
    .innerJoin('agent_connections', 'agent_connections.id', 'oauth_tokens.connection_id')
    .select(['oauth_tokens.expires_at', 'oauth_tokens.revoked_at', 'oauth_tokens.resource', 'agent_connections.api_key_id', 'agent_connections.revoked_at as connection_revoked_at'])
    .where('oauth_tokens.token_hash', '=', sha256Hex(token))
    .where('oauth_tokens.kind', '=', 'access')
    .executeTakeFirst();
  if (!tok || tok.revoked_at || tok.connection_revoked_at || Date.parse(tok.expires_at) <= now.getTime()) throw invalid();
  const row = await KEY_BY_ID.executeTakeFirst(db, tok.api_key_id);
  if (!row || row.revoked_at) throw invalid();
  await assertConnectionMember(db, row, now);
  return finishCredential(db, row, agent, now, { authMethod: 'oauth', expiresAt: tok.expires_at, transport: 'oauth', resource: tok.resource });
}

/**
 * Only an owner or administrator can hold an agent connection: once the membership is gone
 * or reduced to collaborator, the connection and everything issued with it is revoked.
 */
async function assertConnectionMember(db: Kysely<DB>, row: KeyRow, now: Date): Promise<void> {
  if (!row.connection_id) return;
  if (row.member_role === 'owner' || row.member_role === 'administrator') return;
  await revokeConnection(db, row.connection_id, 'membership_changed', now);
  throw new AppError('API_KEY_REVOKED', 'This connection was revoked: its owner is no longer an owner or administrator of the account.');
}

/**
 * The credential of an API key by id, without a request (the live channel re-checks a socket's key
 * this way: the socket never sees the key itself); null when the key is revoked or expired or its
 * connection lost its owner or administrator. Does not count as a use of the key.
 */
export async function credentialForKeyId(db: Kysely<DB>, keyId: string, now: Date): Promise<Credential | null> {
  const row = await KEY_BY_ID.executeTakeFirst(db, keyId);
  if (!row || row.revoked_at) return null;
  if (row.expires_at && Date.parse(row.expires_at) <= now.getTime()) return null;
  try {
    await assertConnectionMember(db, row, now);
  } catch {
    return null;
  }
  const noAgent: AgentInfo = { user_agent: null, agent: null, client: null, version: null, run_id: null, project: null, task: null };
  return finishCredential(db, row, noAgent, now, { authMethod: 'api_key', expiresAt: row.expires_at, transport: row.transport, touch: false });
}

async function finishCredential(
  db: Kysely<DB>,
  row: KeyRow,
  agent: AgentInfo,
  now: Date,
  how: { authMethod: 'api_key' | 'oauth'; expiresAt: string | null; transport: string; resource?: string; touch?: boolean },
): Promise<Credential> {
  const [accounts, mailboxes] = await Promise.all([
    KEY_ACCOUNTS.execute(db, row.id),
    KEY_MAILBOXES.execute(db, row.id),
  ]);

  let lastUsedAt = row.last_used_at;
  if (how.touch !== false && (!row.last_used_at || now.getTime() - Date.parse(row.last_used_at) > LAST_USED_RESOLUTION_MS)) {
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
    // An OAuth access token is not an API key: status reports its token_type as null.
    tokenType: how.authMethod === 'oauth' ? 'oauth' : row.token_type,
    scope: row.scope,
    mailboxAccess: row.mailbox_access,
    mailboxPermissions: Object.fromEntries(mailboxes.map((m) => [m.mailbox_id, m.permission])),
    defaultAccountId: row.default_account_id,
    grantedAccountIds: accounts.map((a) => a.account_id),
    includeClientAccounts: row.include_client_accounts === 1,
    transport: how.transport,
    plan: row.plan,
    expiresAt: how.expiresAt,
    // This request is a use: report it, not the use before it.
    lastUsedAt: how.touch === false ? row.last_used_at : (lastUsedAt ?? iso(now)),
    authMethod: how.authMethod,
    connection: row.connection_id ? { id: row.connection_id, kind: row.connection_kind! } : null,
    resource: how.resource ?? null,
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

/**
 * Agent identification headers, under X-Service- or X-Cubby- (or X-<Brand>- for each
 * CUBBY_COMPAT_BRANDS word, read the same way; docs/compat.md), each capped at 200 characters.
 */
export function readAgentHeaders(headers: Record<string, string | string[] | undefined>, brands: readonly string[] = []): AgentInfo {
  const one = (name: string): string | null => {
    const v = headers[name];
    const s = Array.isArray(v) ? v[0] : v;
    return s ? s.slice(0, 200) : null;
  };
  const info = { user_agent: one('user-agent') } as AgentInfo;
  for (const [field, suffix] of Object.entries(AGENT_HEADERS)) {
    let value = one(`x-service-${suffix}`) ?? one(`x-cubby-${suffix}`);
    for (const brand of brands) value ??= one(`x-${brand}-${suffix}`);
    (info as any)[field] = value;
  }
  return info;
}
