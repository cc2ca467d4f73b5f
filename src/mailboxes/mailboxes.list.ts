import { sql, type Expression, type SqlBool } from 'kysely';
import type { RequestCtx } from '../context.ts';
import { mailboxPermissions, selectAccount, visibleMailboxIds, type AccountAccess } from '../auth/access.ts';
import { decodeCursor, toPage } from '../http/cursor.ts';
import { mailboxQuery, type MailboxRow } from './mailboxes.repo.ts';

export type StatusFilter = 'active' | 'archived' | 'all';

export interface ListMailboxesInput {
  accountId?: string | null;
  status: StatusFilter;
  q?: string;
  limit: number;
  cursor?: string;
}

function likePattern(q: string): string {
  return `%${q.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

/**
 * Lists mailboxes the credential may see, newest first. `q` matches the id, and the title
 * or address only where the caller may see the address (write permission).
 */
export async function listMailboxes(ctx: RequestCtx, input: ListMailboxesInput) {
  const access: AccountAccess = await selectAccount(ctx.db, ctx.credential, input.accountId);
  const visible = visibleMailboxIds(ctx.credential, access);
  const writable =
    visible === null
      ? access.permissions.write
        ? null
        : []
      : access.permissions.write
        ? visible.filter((id) => mailboxPermissions(ctx.credential, access, id)?.write)
        : [];

  let base = mailboxQuery(ctx.db).where('mailboxes.account_id', '=', access.account.id);
  if (visible !== null) base = visible.length ? base.where('mailboxes.id', 'in', visible) : base.where(sql<SqlBool>`1 = 0`);
  const q = input.q?.trim();
  if (q) {
    const pattern = likePattern(q);
    base = base.where((eb) => {
      const ors: Expression<SqlBool>[] = [sql<SqlBool>`lower(${eb.ref('mailboxes.id')}) like ${pattern} escape '\\'`];
      const textMatch = eb.or([
        sql<SqlBool>`lower(coalesce(${eb.ref('mailboxes.title')}, '')) like ${pattern} escape '\\'`,
        sql<SqlBool>`lower(coalesce(${eb.ref('email_addresses.address')}, '')) like ${pattern} escape '\\'`,
      ]);
      if (writable === null) ors.push(textMatch);
      else if (writable.length) ors.push(eb.and([eb('mailboxes.id', 'in', writable), textMatch]));
      return eb.or(ors);
    });
  }

  const countRow = await base
    .clearSelect()
    .select((eb) => [
      eb.fn.countAll<number>().as('total'),
      eb.fn.sum<number>(sql`case when ${eb.ref('mailboxes.archived_at')} is null then 0 else 1 end`).as('archived'),
    ])
    .executeTakeFirstOrThrow();
  const total = Number(countRow.total);
  const archived = Number(countRow.archived ?? 0);

  const filters = { account: access.account.id, status: input.status, q: q ?? null, key: ctx.credential.keyId };
  let rowsQ = base;
  if (input.status === 'active') rowsQ = rowsQ.where('mailboxes.archived_at', 'is', null);
  if (input.status === 'archived') rowsQ = rowsQ.where('mailboxes.archived_at', 'is not', null);
  if (input.cursor) {
    const [after] = decodeCursor(ctx.secret, input.cursor, 'mailboxes', filters);
    rowsQ = rowsQ.where('mailboxes.id', '<', String(after));
  }
  const rows = (await rowsQ.orderBy('mailboxes.id', 'desc').limit(input.limit + 1).execute()) as MailboxRow[];
  const page = toPage(rows, input.limit, (r) => [r.id], { secret: ctx.secret, list: 'mailboxes', filters });
  return { access, page, counts: { active: total - archived, archived, total } };
}
