import type { RequestCtx } from '../context.ts';
import { AppError, invalidArgument } from '../errors.ts';
import { assertMutable } from '../auth/access.ts';
import { recordActivity } from '../activity/activity.service.ts';
import { randomToken } from '../ids.ts';
import { iso } from '../time.ts';
import { findMailbox } from '../mailboxes/mailboxes.repo.ts';
import { loadMailbox, type LoadedMailbox } from '../mailboxes/mailboxes.service.ts';
import { INITIAL_ALLOWLIST_VERSION, MAX_ALLOWLIST_ENTRIES } from './settings.ts';

// The sender allowlist: when enabled, RCPT accepts mail only from envelope senders that match an
// entry (src/inbound/allowlist.ts). Entries are exact addresses or `@domain`; stored lower-case.

const HOST = /^(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)+$/;
const LOCAL = /^[^\s@<>()[\],;:"\\]{1,64}$/;

/** One entry as stored: `ann@example.com` or `@example.com` (a bare `example.com` means the domain). */
export function normalizeEntry(raw: string, index: number): string {
  const e = raw.normalize('NFKC').trim().toLowerCase();
  const field = `sender_allowlist.entries.${index}`;
  const at = e.lastIndexOf('@');
  if (at <= 0) {
    const host = at === 0 ? e.slice(1) : e;
    if (!HOST.test(host)) throw invalidArgument(field, 'must be an email address or @domain', { entry: raw.slice(0, 320) });
    return `@${host}`;
  }
  const local = e.slice(0, at);
  const host = e.slice(at + 1);
  if (!LOCAL.test(local) || !HOST.test(host)) throw invalidArgument(field, 'must be an email address or @domain', { entry: raw.slice(0, 320) });
  return `${local}@${host}`;
}

export async function updateAllowlist(
  ctx: RequestCtx,
  mailboxId: string,
  input: { accountId?: string | null; enabled: boolean; entries: string[]; expectedVersion: string; reason?: string | null },
): Promise<LoadedMailbox> {
  const loaded = await loadMailbox(ctx, input.accountId, mailboxId, 'admin');
  const { mailbox: m, access } = loaded;
  if (!access.isAccountAdmin) throw new AppError('PERMISSION_DENIED', 'The sender allowlist is managed by account owners and administrators.', { required: 'account_admin' });
  assertMutable(access);
  if (m.archived_at) throw new AppError('MAILBOX_ARCHIVED', undefined, { mailbox_id: m.id });
  const entries = [...new Set(input.entries.map(normalizeEntry))];
  if (entries.length > MAX_ALLOWLIST_ENTRIES) {
    throw invalidArgument('sender_allowlist.entries', `may hold at most ${MAX_ALLOWLIST_ENTRIES} entries`, { max_entries: MAX_ALLOWLIST_ENTRIES, given: entries.length });
  }
  const now = ctx.now();
  await ctx.db.transaction().execute(async (trx) => {
    // The version check is part of the update, so two writers cannot both pass it; every
    // update gets a new version, even one that changes nothing.
    let q = trx
      .updateTable('mailboxes')
      .set({ allowlist_enabled: input.enabled ? 1 : 0, allowlist_entries: JSON.stringify(entries), allowlist_version: randomToken(16), updated_at: iso(now) })
      .where('id', '=', m.id);
    q = input.expectedVersion === INITIAL_ALLOWLIST_VERSION ? q.where('allowlist_version', 'is', null) : q.where('allowlist_version', '=', input.expectedVersion);
    const res = await q.executeTakeFirst();
    if (Number(res.numUpdatedRows) === 0) {
      const current = await trx.selectFrom('mailboxes').select('allowlist_version').where('id', '=', m.id).executeTakeFirst();
      throw new AppError('SENDER_ALLOWLIST_CONFLICT', undefined, { expected_version: input.expectedVersion, version: current?.allowlist_version ?? INITIAL_ALLOWLIST_VERSION });
    }
    await recordActivity(trx, ctx.actor, now, { accountId: m.account_id, action: 'mailbox.email.allowlist_update', targetType: 'mailbox', targetId: m.id, reason: input.reason });
  });
  return { ...loaded, mailbox: (await findMailbox(ctx.db, m.account_id, m.id))! };
}
