import type { Kysely } from 'kysely';
import type { DB } from '../db/schema.ts';

// Reading an account's activity history, newest first, for GET /v1/account/activity and the
// /account/activity page. Filters: person, API key, action (exact, or a prefix ending in `.`),
// and mailbox (entries whose target is that mailbox).

export interface ActivityFilters {
  userId?: string;
  apiKeyId?: string;
  action?: string;
  mailboxId?: string;
}

export interface ActivityEntry {
  id: string;
  created_at: string;
  action: string;
  target_type: string;
  target_id: string | null;
  reason: string | null;
  request_id: string | null;
  user: { id: string; email: string | null; name: string | null } | null;
  api_key: { id: string; label: string | null } | null;
  agent: Record<string, unknown> | null;
}

export async function listActivity(db: Kysely<DB>, accountId: string, filters: ActivityFilters, after: [string, string] | null, limit: number): Promise<ActivityEntry[]> {
  let q = db
    .selectFrom('activity')
    .leftJoin('users', 'users.id', 'activity.user_id')
    .leftJoin('api_keys', 'api_keys.id', 'activity.api_key_id')
    .select([
      'activity.id',
      'activity.created_at',
      'activity.action',
      'activity.target_type',
      'activity.target_id',
      'activity.reason',
      'activity.request_id',
      'activity.user_id',
      'activity.api_key_id',
      'activity.agent',
      'users.email',
      'users.name',
      'api_keys.label',
    ])
    .where('activity.account_id', '=', accountId);
  if (filters.userId) q = q.where('activity.user_id', '=', filters.userId);
  if (filters.apiKeyId) q = q.where('activity.api_key_id', '=', filters.apiKeyId);
  if (filters.action) q = filters.action.endsWith('.') ? q.where('activity.action', 'like', `${filters.action.replace(/[%_\\]/g, '')}%`) : q.where('activity.action', '=', filters.action);
  if (filters.mailboxId) q = q.where('activity.target_type', '=', 'mailbox').where('activity.target_id', '=', filters.mailboxId);
  if (after) {
    const [at, id] = after;
    q = q.where((eb) => eb.or([eb('activity.created_at', '<', at), eb.and([eb('activity.created_at', '=', at), eb('activity.id', '<', id)])]));
  }
  const rows = await q.orderBy('activity.created_at', 'desc').orderBy('activity.id', 'desc').limit(limit).execute();
  return rows.map((r) => ({
    id: r.id,
    created_at: r.created_at,
    action: r.action,
    target_type: r.target_type,
    target_id: r.target_id,
    reason: r.reason,
    request_id: r.request_id,
    user: r.user_id ? { id: r.user_id, email: r.email ?? null, name: r.name ?? null } : null,
    api_key: r.api_key_id ? { id: r.api_key_id, label: r.label ?? null } : null,
    agent: r.agent ? (JSON.parse(r.agent) as Record<string, unknown>) : null,
  }));
}

/** Distinct actions recorded in the account (for the page's filter). */
export async function activityActions(db: Kysely<DB>, accountId: string): Promise<string[]> {
  const rows = await db.selectFrom('activity').select('action').distinct().where('account_id', '=', accountId).orderBy('action').limit(200).execute();
  return rows.map((r) => r.action);
}

function csvCell(value: unknown): string {
  const s = value === null || value === undefined ? '' : typeof value === 'string' ? value : JSON.stringify(value);
  // A leading = + - @ would run as a formula in spreadsheets: quote it away.
  const safe = /^[=+\-@\t\r]/.test(s) ? `'${s}` : s;
  return /[",\r\n]/.test(safe) || safe !== s ? `"${safe.replace(/"/g, '""')}"` : safe;
}

export function activityCsv(entries: ActivityEntry[]): string {
  const header = ['time', 'action', 'target_type', 'target_id', 'user_email', 'api_key_id', 'api_key_label', 'agent', 'reason', 'request_id'];
  const lines = entries.map((e) =>
    [e.created_at, e.action, e.target_type, e.target_id, e.user?.email, e.api_key?.id, e.api_key?.label, e.agent, e.reason, e.request_id].map(csvCell).join(','),
  );
  return [header.join(','), ...lines].join('\r\n') + '\r\n';
}
