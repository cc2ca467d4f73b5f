import { expressionBuilder, sql, type Expression, type ExpressionBuilder, type SqlBool } from 'kysely';
import type { AppDeps, RequestCtx } from '../context.ts';
import type { DB, EmailsTable, FilesTable } from '../db/schema.ts';
import { reachableAccounts, selectAccount, visibleMailboxIds, visibleMailboxIdsAcross } from '../auth/access.ts';
import { loadMailbox } from '../mailboxes/mailboxes.service.ts';
import { decodeCursor, encodeCursor } from '../http/cursor.ts';
import { invalidArgument } from '../errors.ts';
import { viewerOf } from '../emails/emails.present.ts';
import { notWithheldEmailFile } from '../emails/withheld.ts';
import { contentTerms, parseQuery, type SearchQuery, type Term } from './query.ts';
import { searchIndex } from './search-index.ts';
import { snippetOf } from './snippet.ts';
import { textsBySha } from './documents.ts';

// Search across every mailbox a credential can read. Tenancy is part of the SQL (the account and
// mailbox lists come from src/auth/access.ts), never a filter applied to results afterwards. For
// API keys, withheld mail (being labeled, or Junk) and its files never match, so neither results
// nor snippets can reveal it.

export { searchIndex };

const likeWord = (w: string) => `%${w.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;

/** Path conditions: every positive word in the path, no negated one (filename: terms always apply). */
function pathCondition(terms: Term[]): Expression<SqlBool> | null {
  const parts = terms.flatMap((t) =>
    t.words.map((w) => (t.negated ? sql<SqlBool>`lower(files.path) not like ${likeWord(w)} escape '\\'` : sql<SqlBool>`lower(files.path) like ${likeWord(w)} escape '\\'`)),
  );
  return parts.length ? sql<SqlBool>`(${sql.join(parts, sql` and `)})` : null;
}

/** Conditions of a parsed query that are not words: has:attachment, before:, after:. */
export function emailFilterConditions(q: SearchQuery): Expression<SqlBool>[] {
  const out: Expression<SqlBool>[] = [];
  if (q.hasAttachment) out.push(sql<SqlBool>`emails.attachment_count > 0`);
  if (q.before) out.push(sql<SqlBool>`emails.received_at < ${q.before}`);
  if (q.after) out.push(sql<SqlBool>`emails.received_at >= ${q.after}`);
  return out;
}

/** `emails.id in (matching ids)` for the emails list, or null when the query has no words. */
export function emailIdCondition(deps: Pick<AppDeps, 'dialect' | 'config'>, q: SearchQuery, mailboxId: string): Expression<SqlBool> | null {
  const m = searchIndex(deps).emailMatches(q, [mailboxId]);
  return m ? sql<SqlBool>`emails.id in (select email_id from (${m}) as m)` : null;
}

/** File condition for the files list: content (`content`), path (`path`) or either (`all`). */
export function fileCondition(deps: Pick<AppDeps, 'dialect' | 'config'>, q: SearchQuery, where: 'content' | 'all'): Expression<SqlBool> {
  const m = searchIndex(deps).textMatches(q);
  const filename = pathCondition(q.terms.filter((t) => t.field === 'filename'));
  const content = m
    ? sql<SqlBool>`files.current_version_id in (select v.id from file_versions v where v.file_id = files.id and v.sha256 in (select sha256 from (${m}) as m))`
    : null;
  const path = where === 'all' ? pathCondition(q.terms.filter((t) => t.field === 'any')) : null;
  const either = [content, path].filter((x): x is Expression<SqlBool> => !!x);
  const main = either.length ? sql<SqlBool>`(${sql.join(either, sql` or `)})` : filename ? null : sql<SqlBool>`1 = 0`;
  return [main, filename].filter((x): x is Expression<SqlBool> => !!x).reduce((a, b) => sql<SqlBool>`${a} and ${b}`);
}

export interface Scope {
  accountIds: string[];
  /** null: every mailbox of those accounts. */
  mailboxIds: string[] | null;
}

/** The mailboxes a search covers: one mailbox (read permission), one account, or everything reachable. */
export async function searchScope(ctx: RequestCtx, input: { accountId?: string | null; mailboxId?: string | null }): Promise<Scope> {
  if (input.mailboxId) {
    const { mailbox } = await loadMailbox(ctx, input.accountId, input.mailboxId, 'read');
    return { accountIds: [mailbox.account_id], mailboxIds: [mailbox.id] };
  }
  if (input.accountId) {
    const access = await selectAccount(ctx.db, ctx.credential, input.accountId);
    return { accountIds: [access.account.id], mailboxIds: visibleMailboxIds(ctx.credential, access) };
  }
  // Every reachable account, each with the person's own mailbox limit there (access.ts).
  const reachable = await reachableAccounts(ctx.db, ctx.credential);
  return { accountIds: [...reachable.keys()], mailboxIds: await visibleMailboxIdsAcross(ctx.db, ctx.credential, reachable) };
}

function scopeCondition(scope: Scope, table: 'emails' | 'files'): Expression<SqlBool> {
  if (!scope.accountIds.length || (scope.mailboxIds && !scope.mailboxIds.length)) return sql<SqlBool>`1 = 0`;
  const accounts = sql.join(scope.accountIds);
  const t = sql.table(table);
  const live = sql<SqlBool>`${t}.account_id in (${accounts}) and ${t}.mailbox_id in (select id from mailboxes where deleted_at is null and account_id in (${accounts}))`;
  return scope.mailboxIds ? sql<SqlBool>`${live} and ${t}.mailbox_id in (${sql.join(scope.mailboxIds)})` : live;
}

export type SearchKind = 'email' | 'file';

export interface SearchHit {
  kind: SearchKind;
  id: string;
  mailboxId: string;
  rank: number;
  snippet: string | null;
  email?: EmailsTable;
  file?: FilesTable;
}

type Key = [number, string];
const after = (key: Key | null, rank: Expression<number>, id: Expression<string>): Expression<SqlBool> | null =>
  key ? sql<SqlBool>`(${rank} > ${key[0]} or (${rank} = ${key[0]} and ${id} > ${key[1]}))` : null;

/** Mail an API key may find: labeled, and not Junk. */
const notWithheld = (eb: ExpressionBuilder<DB, 'emails'>) => eb.and([eb('emails.labeling', '<>', 'pending'), eb.or([eb('emails.label', 'is', null), eb('emails.label', '<>', 'Junk')])]);

/** The live mailboxes a scope covers, as ids: what the index narrows its match to. */
async function scopeMailboxIds(ctx: RequestCtx, scope: Scope): Promise<string[]> {
  if (!scope.accountIds.length || (scope.mailboxIds && !scope.mailboxIds.length)) return [];
  let query = ctx.db.selectFrom('mailboxes').select('id').where('deleted_at', 'is', null).where('account_id', 'in', scope.accountIds);
  if (scope.mailboxIds) query = query.where('id', 'in', scope.mailboxIds);
  return (await query.orderBy('id').execute()).map((r) => r.id);
}

/**
 * Emails in two steps: the index ranks the scope's matches on its own narrow tables and hands back
 * a batch in (rank, id) order after the cursor; only that batch is read from `emails`, where scope,
 * withheld mail and the query's filters are checked again. When the checks drop rows, the next
 * (larger) batch continues after the last candidate. So the wide `emails` rows are read for about
 * one page, not for every match.
 */
async function searchEmails(ctx: RequestCtx, q: SearchQuery, scope: Scope, mailboxIds: string[], key: Key | null, limit: number) {
  const index = searchIndex(ctx);
  const filters = emailFilterConditions(q);
  const apiKey = viewerOf(ctx).apiKey;
  if (filters.length) return { hits: await searchEmailsJoined(ctx, q, scope, mailboxIds, filters, key, limit), truncated: false };
  const out: SearchHit[] = [];
  let truncated = false;
  let batch = Math.max(50, (limit + 1) * 2);
  let from = key;
  while (out.length <= limit) {
    const ranked = await index.rankedEmails(ctx.db, q, mailboxIds, from, batch);
    truncated ||= ranked.truncated;
    const candidates = ranked.rows;
    if (!candidates.length) break;
    let query = ctx.db
      .selectFrom('emails')
      .selectAll('emails')
      .where('emails.id', 'in', candidates.map((c) => c.email_id))
      .where(scopeCondition(scope, 'emails'));
    if (apiKey) query = query.where(notWithheld);
    const rows = new Map((await query.execute()).map((r) => [r.id, r as EmailsTable]));
    for (const c of candidates) {
      const email = rows.get(c.email_id);
      if (email) out.push({ kind: 'email', id: email.id, mailboxId: email.mailbox_id, rank: Number(c.rank), snippet: null, email });
      if (out.length > limit) break;
    }
    if (candidates.length < batch) break;
    const last = candidates.at(-1)!;
    from = [Number(last.rank), last.email_id];
    // Few are dropped (withheld mail only), so this rarely runs twice.
    batch = Math.min(batch * 8, 5_000);
  }
  return { hits: out, truncated };
}

/**
 * With has:attachment, before: or after:, which may leave out most matches, the match is joined to
 * `emails` in one query instead (still narrowed to the scope's mailboxes inside the index). Every
 * match is ranked here: no cap, so never `truncated`.
 */
async function searchEmailsJoined(ctx: RequestCtx, q: SearchQuery, scope: Scope, mailboxIds: string[], filters: Expression<SqlBool>[], key: Key | null, limit: number) {
  const m = searchIndex(ctx).emailMatches(q, mailboxIds);
  if (!m || !mailboxIds.length) return [];
  let query = ctx.db
    .selectFrom('emails')
    .innerJoin(sql<{ email_id: string; rank: number }>`(${m})`.as('m'), (j) => j.onRef('m.email_id', '=', 'emails.id'))
    .selectAll('emails')
    .select(sql<number>`m.rank`.as('rank'))
    .where(scopeCondition(scope, 'emails'));
  for (const c of filters) query = query.where(c);
  if (viewerOf(ctx).apiKey) query = query.where(notWithheld);
  const cond = after(key, sql<number>`m.rank`, sql<string>`emails.id`);
  if (cond) query = query.where(cond);
  const rows = await query.orderBy(sql`m.rank`).orderBy('emails.id').limit(limit + 1).execute();
  return rows.map(({ rank, ...email }) => ({ kind: 'email' as const, id: email.id, mailboxId: email.mailbox_id, rank: Number(rank), snippet: null, email: email as EmailsTable }));
}

/**
 * Files whose current version's text matches (driven by the full-text match, so the cost follows the
 * matches, not the number of files), narrowed by `filename:` on the path. A query of `filename:`
 * terms alone matches paths only.
 */
async function searchFiles(ctx: RequestCtx, q: SearchQuery, scope: Scope, mailboxIds: string[], key: Key | null, limit: number) {
  // Field operators other than filename: describe emails only.
  if (q.terms.some((t) => !t.negated && (t.field === 'from' || t.field === 'to' || t.field === 'subject')) || q.hasAttachment) return { hits: [], truncated: false };
  const filename = pathCondition(q.terms.filter((t) => t.field === 'filename'));
  const eb = expressionBuilder<DB, 'files'>();
  const conds: Expression<SqlBool>[] = [eb('files.deleted_at', 'is', null), scopeCondition(scope, 'files')];
  if (filename) conds.push(filename);
  if (q.before) conds.push(eb('files.updated_at', '<', q.before));
  if (q.after) conds.push(eb('files.updated_at', '>=', q.after));
  if (viewerOf(ctx).apiKey) conds.push(eb.or([sql<SqlBool>`substr(files.path, 1, 7) <> '_email/'`, notWithheldEmailFile(eb)]));
  const where = eb.and(conds);
  const hit = (file: FilesTable, rank: number): SearchHit => ({ kind: 'file', id: file.id, mailboxId: file.mailbox_id, rank, snippet: null, file });
  if (contentTerms(q).some((t) => !t.negated)) {
    // Ranked on the index's side; the wide rows are read for this page only.
    const { rows: ranked, truncated } = await searchIndex(ctx).rankedFiles(ctx.db, q, mailboxIds, where, key, limit + 1);
    if (!ranked.length) return { hits: [], truncated };
    const rows = new Map((await ctx.db.selectFrom('files').selectAll().where('id', 'in', ranked.map((r) => r.file_id)).execute()).map((f) => [f.id, f as FilesTable]));
    return { hits: ranked.filter((r) => rows.has(r.file_id)).map((r) => hit(rows.get(r.file_id)!, Number(r.rank))), truncated };
  }
  if (!filename) return { hits: [], truncated: false };
  // `filename:` terms alone match paths only: no text rank (0), in id order.
  let rows = ctx.db.selectFrom('files').selectAll().where(where);
  if (key) rows = rows.where(after(key, sql<number>`0`, sql<string>`files.id`)!);
  const found = await rows.orderBy('files.id').limit(limit + 1).execute();
  return { hits: found.map((f) => hit(f as FilesTable, 0)), truncated: false };
}

export interface SearchInput {
  accountId?: string | null;
  mailboxId?: string | null;
  q: string;
  kind?: SearchKind;
  limit: number;
  cursor?: string;
}

/**
 * Ranked results (best first, then by id) over emails and files, with plain-text snippets.
 * `truncated`: the query matched more than MAX_RANKED_MATCHES emails (or files) in scope, so only
 * the newest of them were ranked, on every page of it.
 */
export async function search(ctx: RequestCtx, input: SearchInput) {
  const q = parseQuery(input.q);
  const scope = await searchScope(ctx, input);
  const filters = { q: input.q, kind: input.kind ?? null, mailbox: input.mailboxId ?? null, account: input.accountId ?? null, key: ctx.credential.keyId };
  let key: Key | null = null;
  if (input.cursor) {
    const k = decodeCursor(ctx.secret, input.cursor, 'search', filters);
    if (k.length !== 2 || typeof k[0] !== 'number' || typeof k[1] !== 'string') throw invalidArgument('cursor', 'is not a cursor returned by this list; start again without it');
    key = [k[0], k[1]];
  }
  const kinds: SearchKind[] = input.kind ? [input.kind] : ['email', 'file'];
  const found: SearchHit[] = [];
  // The scope's live mailboxes, read once for both kinds: what the index narrows its matches to.
  const mailboxIds = await scopeMailboxIds(ctx, scope);
  // Whether the newest-MAX_RANKED_MATCHES cap left matches of emails or files unranked.
  let truncated = false;
  for (const [kind, run] of [['email', searchEmails], ['file', searchFiles]] as const) {
    if (!kinds.includes(kind)) continue;
    const r = await run(ctx, q, scope, mailboxIds, key, input.limit);
    found.push(...r.hits);
    truncated ||= r.truncated;
  }
  found.sort((a, b) => a.rank - b.rank || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  const hasMore = found.length > input.limit;
  const items = found.slice(0, input.limit);
  await addSnippets(ctx, items, q);
  const last = items.at(-1);
  const next = hasMore && last ? encodeCursor(ctx.secret, 'search', filters, [last.rank, last.id]) : null;
  return { items, truncated, pagination: { limit: input.limit, has_more: hasMore, next_cursor: next } };
}

async function addSnippets(ctx: RequestCtx, items: SearchHit[], q: SearchQuery): Promise<void> {
  const fileVersionIds = items.filter((i) => i.file?.current_version_id).map((i) => i.file!.current_version_id!);
  const versions = fileVersionIds.length ? await ctx.db.selectFrom('file_versions').select(['id', 'sha256']).where('id', 'in', fileVersionIds).execute() : [];
  const shaOf = new Map(versions.map((v) => [v.id, v.sha256]));
  const emailIds = items.filter((i) => i.email).map((i) => i.id);
  const docs = emailIds.length ? await sql<{ email_id: string; attachment_shas: string }>`select email_id, attachment_shas from email_search_docs where email_id in (${sql.join(emailIds)})`.execute(ctx.db) : { rows: [] };
  const shasOf = new Map(docs.rows.map((d) => [d.email_id, JSON.parse(d.attachment_shas) as string[]]));
  const texts = await textsBySha(ctx.db, [...[...shaOf.values()].filter((s): s is string => !!s), ...[...shasOf.values()].flat()]);
  for (const it of items) {
    if (it.email) {
      const e = it.email;
      const attachmentTexts = (shasOf.get(e.id) ?? []).map((s) => texts.get(s)?.text ?? '');
      it.snippet = snippetOf([e.subject ?? '', e.body_text ?? '', ...attachmentTexts], q);
    } else if (it.file) {
      const sha = shaOf.get(it.file.current_version_id ?? '');
      it.snippet = snippetOf([sha ? (texts.get(sha)?.text ?? '') : '', it.file.path], q);
    }
  }
}
