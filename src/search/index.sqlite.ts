import { sql, type Expression, type Kysely, type RawBuilder, type SqlBool } from 'kysely';
import type { DB } from '../db/schema.ts';
import type { SearchQuery, Term } from './query.ts';
import { contentTerms } from './query.ts';
import { MAX_RANKED_MATCHES, type EmailDoc, type Ranked, type RankKey, type SearchIndex, type TextRow } from './search-index.ts';

/** Characters indexed per field (the stored text itself is kept whole). */
const MAX_INDEXED_FIELD_CHARS = 256 * 1024;

// SQLite: FTS5 tables without content of their own (the text lives in blob_texts and emails); their
// rowids are the autoincrement doc_id of blob_texts / email_search_docs. Tokenizer: porter stemming
// over unicode61 with diacritics folded.

const COLUMN: Record<Term['field'], string | null> = { any: null, subject: 'subject', from: 'sender', to: 'recipients', filename: 'names' };

/** `"w1 w2"` with an optional column filter. Words are letters and digits only: nothing to escape. */
function phrase(t: Term, column: string | null): string {
  const p = `"${t.words.join(' ')}"`;
  return column ? `${column} : ${p}` : p;
}

/** An FTS5 MATCH expression: positives joined by AND, then NOT each negative; null if no positive. */
function matchExpression(terms: Term[], columns: boolean): string | null {
  const pos = terms.filter((t) => !t.negated).map((t) => phrase(t, columns ? COLUMN[t.field] : null));
  if (!pos.length) return null;
  const neg = terms.filter((t) => t.negated).map((t) => phrase(t, columns ? COLUMN[t.field] : null));
  return [`(${pos.join(' AND ')})`, ...neg].join(' NOT ');
}

/** A mailbox id as one word (`bkt_01ABC…` → `bkt01abc…`): letters and digits only, so nothing to escape. */
const mailboxWord = (id: string) => id.toLowerCase().replace(/[^a-z0-9]/g, '');

/**
 * Up to this many mailboxes, MATCH itself is restricted to them (`mailbox : ("a" OR "b" …)`), so
 * FTS5 only visits the scope's documents. FTS5 checks an OR of k tokens with k seeks per candidate,
 * so a larger scope is checked on the docs table instead (see bench/search.ts).
 */
export const MAX_MATCH_MAILBOXES = 32;

function narrowed(expr: string, mailboxIds?: string[] | null): string {
  if (!mailboxIds?.length || mailboxIds.length > MAX_MATCH_MAILBOXES) return expr;
  return `mailbox : (${mailboxIds.map((id) => `"${mailboxWord(id)}"`).join(' OR ')}) AND ${expr}`;
}

/**
 * Runs a ranked page over a match (`from … where …`), ranking at most MAX_RANKED_MATCHES rows, the
 * newest. `cols` are the ranked columns (an id and `rank`); `page(ranks)` takes the page from the
 * ranked rows, selecting the id, `rank` and `n`. `truncated` says whether the match had more rows.
 *
 * When MATCH itself is narrowed to the scope (`narrowed`), the match is first walked forward (FTS5
 * seeks through its doclists forwards, skipping most of an AND; backwards it reads each doclist
 * whole), ranking up to one row over the cap and counting them; only a match over the cap is walked
 * again newest-first. Otherwise every match is checked against the scope on a docs table, so a
 * forward walk skips nothing: one walk newest-first, stopped one row past the cap, ranks the same
 * rows as the two walks would; the extra (oldest) row only says that the cap cut, and is left out
 * of the page. Materializing the walk for that count costs about 2–4 ms of CPU per query across
 * 100 mailboxes at 50,000 emails (11–12 ms before; measured at load 11–14): a window count over
 * the walk, or a second walk to count, cost more.
 */
async function ranked<R extends { rank: number }>(db: Kysely<DB>, id: keyof R & string, from: RawBuilder<unknown>, cols: RawBuilder<unknown>, rowid: RawBuilder<unknown>, page: (ranks: RawBuilder<unknown>) => RawBuilder<unknown>, narrowed: boolean): Promise<Ranked<R>> {
  // In (rank, id) order: the page's own order does not survive the outer join.
  const strip = (rows: (R & { n: number | null })[]) =>
    rows
      .filter((r) => r.rank !== null)
      .map(({ n: _n, ...r }) => r as unknown as R)
      .sort((a, b) => a.rank - b.rank || (a[id] < b[id] ? -1 : a[id] > b[id] ? 1 : 0));
  const newest = async () => {
    // Materialized once: the page reads the ranked rows, the count reads how many there were (one
    // row even when no ranked row comes after the cursor).
    const r = await sql<R & { n: number | null; total: number }>`with w as materialized (select ${cols}, ${rowid} as rid from ${from} order by ${rowid} desc limit ${MAX_RANKED_MATCHES + 1}),
        c as materialized (select count(*) as total, min(rid) as oldest from w)
      select p.*, c.total as total from c left join (${page(sql`select w.*, 0 as n from w where (select total from c) <= ${MAX_RANKED_MATCHES} or w.rid > (select oldest from c)`)}) p on 1`.execute(db);
    return { rows: strip(r.rows.map(({ total: _t, ...x }) => x as R & { n: number | null })), truncated: Number(r.rows[0]?.total ?? 0) > MAX_RANKED_MATCHES };
  };
  if (!narrowed) return newest();
  const forward = await sql<R & { n: number }>`${page(sql`select *, count(*) over () as n from (select ${cols} from ${from} limit ${MAX_RANKED_MATCHES + 1})`)}`.execute(db);
  // No row after the cursor says nothing of the count: ask it.
  const n = forward.rows.length ? Number(forward.rows[0]!.n) : Number((await sql<{ n: number }>`select count(*) as n from (select 1 from ${from} limit ${MAX_RANKED_MATCHES + 1})`.execute(db)).rows[0]!.n);
  return n <= MAX_RANKED_MATCHES ? { rows: strip(forward.rows), truncated: false } : newest();
}

/** Subject 8, sender 4, recipients 2, body 1, attachment names 3, attachment text 1, mailbox 0. */
const BM25 = sql.raw('bm25(email_fts, 8.0, 4.0, 2.0, 1.0, 3.0, 1.0, 0.0)');

const cut = (s: string) => (s.length > MAX_INDEXED_FIELD_CHARS ? s.slice(0, MAX_INDEXED_FIELD_CHARS) : s);

export class SqliteSearchIndex implements SearchIndex {
  // Batched: one statement per step for up to 200 documents (a mailbox import or the backfill
  // indexes thousands at a time; per-document statements cost more than the tokenizing).
  emailWrites(): null {
    return null;
  }

  // FTS5 tokenizes inside SQLite, in the write itself.
  prepareBody(): null {
    return null;
  }

  async putEmails(db: Kysely<DB>, docs: EmailDoc[]): Promise<void> {
    const latest = [...new Map(docs.map((d) => [d.emailId, d])).values()];
    for (let i = 0; i < latest.length; i += 200) {
      const batch = latest.slice(i, i + 200);
      const ids = sql.join(batch.map((d) => d.emailId));
      await sql`delete from email_fts where rowid in (select doc_id from email_search_docs where email_id in (${ids}))`.execute(db);
      await sql`delete from email_search_docs where email_id in (${ids})`.execute(db);
      const values = batch.map((d) => sql`(${d.emailId}, ${d.mailboxId}, ${JSON.stringify(d.attachmentShas)})`);
      await sql`insert into email_search_docs (email_id, mailbox_id, attachment_shas) values ${sql.join(values)}`.execute(db);
      const rows = await sql<{ doc_id: number; email_id: string }>`select doc_id, email_id from email_search_docs where email_id in (${ids})`.execute(db);
      const docOf = new Map(rows.rows.map((r) => [r.email_id, r.doc_id]));
      const fts = batch.map((d) => sql`(${docOf.get(d.emailId)!}, ${cut(d.subject)}, ${cut(d.sender)}, ${cut(d.recipients)}, ${cut(d.body)}, ${cut(d.names)}, ${cut(d.attachments)}, ${mailboxWord(d.mailboxId)})`);
      await sql`insert into email_fts (rowid, subject, sender, recipients, body, names, attachments, mailbox) values ${sql.join(fts)}`.execute(db);
    }
  }

  async removeEmails(db: Kysely<DB>, emailIds: string[]): Promise<void> {
    for (let i = 0; i < emailIds.length; i += 500) {
      const ids = sql.join(emailIds.slice(i, i + 500));
      await sql`delete from email_fts where rowid in (select doc_id from email_search_docs where email_id in (${ids}))`.execute(db);
      await sql`delete from email_search_docs where email_id in (${ids})`.execute(db);
    }
  }

  async putText(db: Kysely<DB>, r: TextRow): Promise<void> {
    const old = await sql<{ doc_id: number }>`select doc_id from blob_texts where sha256 = ${r.sha256}`.execute(db);
    if (old.rows[0]) {
      await sql`delete from blob_text_fts where rowid = ${old.rows[0].doc_id}`.execute(db);
      await sql`delete from blob_texts where doc_id = ${old.rows[0].doc_id}`.execute(db);
    }
    const ins = await sql<{ doc_id: number }>`insert into blob_texts (sha256, status, text, pages, error, extracted_at)
      values (${r.sha256}, ${r.status}, ${r.text}, ${r.pages}, ${r.error}, ${r.extractedAt}) returning doc_id`.execute(db);
    if (r.text) await sql`insert into blob_text_fts (rowid, body) values (${ins.rows[0]!.doc_id}, ${cut(r.text)})`.execute(db);
  }

  emailMatches(q: SearchQuery, mailboxIds?: string[] | null) {
    const expr = matchExpression(q.terms, true);
    if (!expr) return null;
    return sql<{ email_id: string; rank: number }>`select d.email_id as email_id, ${BM25} as rank
      from email_fts join email_search_docs d on d.doc_id = email_fts.rowid where email_fts match ${narrowed(expr, mailboxIds)}`;
  }

  async rankedEmails(db: Kysely<DB>, q: SearchQuery, mailboxIds: string[], after: RankKey | null, limit: number): Promise<Ranked<{ email_id: string; rank: number }>> {
    const expr = matchExpression(q.terms, true);
    if (!expr || !mailboxIds.length) return { rows: [], truncated: false };
    // CROSS JOIN keeps FTS5 as the outer loop: the docs table is looked up by rowid, and the mailbox
    // list is checked on every match whether or not MATCH could narrow by it.
    const from = sql`email_fts cross join email_search_docs d on d.doc_id = email_fts.rowid
      where email_fts match ${narrowed(expr, mailboxIds)} and d.mailbox_id in (select value from json_each(${JSON.stringify(mailboxIds)}))`;
    const key = after ? sql`where rank > ${after[0]} or (rank = ${after[0]} and email_id > ${after[1]})` : sql``;
    return ranked(db, 'email_id', from, sql`d.email_id as email_id, ${BM25} as rank`, sql`email_fts.rowid`, (ranks) =>
      sql`select email_id, rank, n from (${ranks}) ${key} order by rank, email_id limit ${limit}`,
      mailboxIds.length <= MAX_MATCH_MAILBOXES,
    );
  }

  async rankedFiles(db: Kysely<DB>, q: SearchQuery, mailboxIds: string[], where: Expression<SqlBool>, after: RankKey | null, limit: number): Promise<Ranked<{ file_id: string; rank: number }>> {
    const expr = matchExpression(contentTerms(q), false);
    if (!expr || !mailboxIds.length) return { rows: [], truncated: false };
    // FTS5 drives; each match is checked against the scope on the narrow file_search_docs (one row
    // per live file with text, keyed by the text's rowid: migration 0025), not by joining blob_texts,
    // file_versions and files for every match. Only the ranked rows after the cursor, best first,
    // are read from `files` and checked against `where` (scope again, withheld mail, filters), until
    // `limit` of them pass.
    const from = sql`blob_text_fts cross join file_search_docs s on s.text_doc_id = blob_text_fts.rowid
      where blob_text_fts match ${expr} and s.mailbox_id in (select value from json_each(${JSON.stringify(mailboxIds)}))`;
    const key = after ? sql`where rank > ${after[0]} or (rank = ${after[0]} and file_id > ${after[1]})` : sql``;
    return ranked(db, 'file_id', from, sql`s.file_id as file_id, bm25(blob_text_fts) as rank`, sql`blob_text_fts.rowid`, (ranks) =>
      // `limit -1` keeps the ordered candidates a subquery of their own, so SQLite reads them in
      // order and stops at `limit` passing files (flattened, it joined every candidate to `files`
      // and sorted afterwards).
      sql`select c.file_id as file_id, c.rank as rank, c.n as n from (select file_id, rank, n from (${ranks}) ${key} order by rank, file_id limit -1) c
        cross join files on files.id = c.file_id where ${where} order by c.rank, c.file_id limit ${limit}`,
      false,
    );
  }

  textMatches(q: SearchQuery) {
    const expr = matchExpression(contentTerms(q), false);
    if (!expr) return null;
    return sql<{ sha256: string; rank: number }>`select t.sha256 as sha256, bm25(blob_text_fts) as rank
      from blob_text_fts join blob_texts t on t.doc_id = blob_text_fts.rowid where blob_text_fts match ${expr}`;
  }
}
