import { notWithheldEmailFile } from '../emails/withheld.ts';
import { sql, type SqlBool } from 'kysely';
import type { FilesTable } from '../db/schema.ts';
import type { RequestCtx } from '../context.ts';
import { decodeCursor, toPage } from '../http/cursor.ts';
import { offsetFields, offsetOf } from '../http/offset.ts';
import { loadMailbox } from '../mailboxes/mailboxes.service.ts';
import { cleanFolder } from './paths.ts';
import { parseQuery } from '../search/query.ts';
import { fileCondition } from '../search/search.service.ts';

/**
 * Live files of a mailbox (including `_email/`), ordered by path. Never marks anything read.
 * Paged by cursor, or by `offset` for clients that page that way; both answer the offset fields
 * (`offset`, `count`, `total`, `next_offset`) beside the cursor ones.
 */
export async function listFiles(ctx: RequestCtx, input: { accountId?: string | null; mailboxId: string; q?: string; qIn?: 'path' | 'content' | 'all'; folder?: string; limit: number; cursor?: string; offset?: number }) {
  const { mailbox } = await loadMailbox(ctx, input.accountId, input.mailboxId, 'read');
  const folder = cleanFolder(input.folder);
  const q = input.q?.trim() || undefined;
  const start = offsetOf(input);
  const qIn = input.qIn ?? 'path';
  const filters = { mailbox: mailbox.id, q: q ?? null, folder: folder ?? null, ...(qIn !== 'path' ? { q_in: qIn } : {}) };
  let query = ctx.db.selectFrom('files').where('mailbox_id', '=', mailbox.id).where('deleted_at', 'is', null);
  if (folder !== undefined) query = query.where('folder', '=', folder);
  // API keys do not see the files of withheld emails (still being labeled, or Junk).
  if (ctx.actor.apiKeyId) query = query.where((eb) => eb.or([sql<SqlBool>`substr(path, 1, 7) <> '_email/'`, notWithheldEmailFile(eb)]));
  if (q && qIn !== 'path') {
    query = query.where(fileCondition(ctx, parseQuery(q), qIn));
  } else if (q) {
    const pattern = `%${q.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
    query = query.where(sql<SqlBool>`lower(path) like ${pattern} escape '\\'`);
  }
  const count = async (before?: string) => {
    const row = await (before === undefined ? query : query.where('path', '<=', before)).select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
    return Number(row.n);
  };
  let rowsQuery = query.selectAll();
  let position = start;
  if (input.cursor) {
    const [after] = decodeCursor(ctx.secret, input.cursor, 'files', filters);
    rowsQuery = rowsQuery.where('path', '>', String(after));
    position = await count(String(after));
  }
  const rows: FilesTable[] = await rowsQuery.orderBy('path', 'asc').offset(start).limit(input.limit + 1).execute();
  const page = toPage(rows, input.limit, (f) => [f.path], { secret: ctx.secret, list: 'files', filters });
  return { ...page, pagination: { ...page.pagination, ...offsetFields(position, page.items.length, await count()) } };
}

export async function listVersions(ctx: RequestCtx, input: { accountId?: string | null; mailboxId: string; fileId: string; limit: number; cursor?: string }) {
  const filters = { file: input.fileId };
  let query = ctx.db.selectFrom('file_versions').selectAll().where('file_id', '=', input.fileId);
  if (input.cursor) {
    const [after] = decodeCursor(ctx.secret, input.cursor, 'file_versions', filters);
    query = query.where('version_number', '<', Number(after));
  }
  const rows = await query.orderBy('version_number', 'desc').limit(input.limit + 1).execute();
  return toPage(rows, input.limit, (v) => [v.version_number], { secret: ctx.secret, list: 'file_versions', filters });
}
