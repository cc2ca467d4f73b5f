import { notWithheldEmailFile } from '../emails/withheld.ts';
import { sql, type SqlBool } from 'kysely';
import type { FilesTable } from '../db/schema.ts';
import type { RequestCtx } from '../context.ts';
import { decodeCursor, toPage } from '../http/cursor.ts';
import { loadMailbox } from '../mailboxes/mailboxes.service.ts';
import { cleanFolder } from './paths.ts';
import { parseQuery } from '../search/query.ts';
import { fileCondition } from '../search/search.service.ts';

/** Live files of a mailbox (including `_email/`), ordered by path. Never marks anything read. */
export async function listFiles(ctx: RequestCtx, input: { accountId?: string | null; mailboxId: string; q?: string; qIn?: 'path' | 'content' | 'all'; folder?: string; limit: number; cursor?: string }) {
  const { mailbox } = await loadMailbox(ctx, input.accountId, input.mailboxId, 'read');
  const folder = cleanFolder(input.folder);
  const q = input.q?.trim() || undefined;
  const qIn = input.qIn ?? 'path';
  const filters = { mailbox: mailbox.id, q: q ?? null, folder: folder ?? null, ...(qIn !== 'path' ? { q_in: qIn } : {}) };
  let query = ctx.db.selectFrom('files').selectAll().where('mailbox_id', '=', mailbox.id).where('deleted_at', 'is', null);
  if (folder !== undefined) query = query.where('folder', '=', folder);
  // API keys do not see the files of withheld emails (still being labeled, or Junk).
  if (ctx.actor.apiKeyId) query = query.where((eb) => eb.or([sql<SqlBool>`substr(path, 1, 7) <> '_email/'`, notWithheldEmailFile(eb)]));
  if (q && qIn !== 'path') {
    query = query.where(fileCondition(ctx, parseQuery(q), qIn));
  } else if (q) {
    const pattern = `%${q.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
    query = query.where(sql<SqlBool>`lower(path) like ${pattern} escape '\\'`);
  }
  if (input.cursor) {
    const [after] = decodeCursor(ctx.secret, input.cursor, 'files', filters);
    query = query.where('path', '>', String(after));
  }
  const rows: FilesTable[] = await query.orderBy('path', 'asc').limit(input.limit + 1).execute();
  return toPage(rows, input.limit, (f) => [f.path], { secret: ctx.secret, list: 'files', filters });
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
