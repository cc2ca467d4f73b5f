import { CompiledQuery, sql, type Expression, type Kysely, type RawBuilder, type SqlBool } from 'kysely';
import type { DB } from '../db/schema.ts';
import type { SearchQuery, Term } from './query.ts';
import { contentTerms, normalizeText } from './query.ts';
import { functionArguments, textWords } from './word-positions.ts';
import { lexemeCache } from './lexeme-cache.ts';
import { MAX_RANKED_MATCHES, type EmailDoc, type PreparedText, type Ranked, type RankKey, type SearchIndex, type TextRow } from './search-index.ts';

// Postgres: tsvector columns with GIN indexes, in the configured text search configuration
// (CUBBY_SEARCH_LANGUAGE). Text is reduced to letters and digits before to_tsvector, so that words
// break where SQLite's tokenizer breaks them (Postgres would keep `bob@example.com` or `report.pdf`
// whole). Field operators check one tsvector per field; the weighted `tsv` serves ranking and the GIN.

const FIELD_COLUMN: Record<Exclude<Term['field'], 'any'>, string> = { subject: 'tsv_subject', from: 'tsv_sender', to: 'tsv_recipients', filename: 'tsv_names' };

/** tsquery text for one term: quoted lexemes of letters and digits, joined by <-> for a phrase. */
function tsTerm(t: Term): string {
  return `(${t.words.map((w) => `'${w}'`).join(' <-> ')})`;
}

// Postgres refuses a tsvector over 1 MB, and text of random tokens can take 6 bytes of tsvector
// per character: an email's fields together are cut to 160 Ki characters (names and addresses 10 Ki
// each, body 80 Ki, attachment text 60 Ki), an extracted text to 150 Ki. (SQLite indexes up to
// 256 Ki characters of each: see index.sqlite.ts.)
const EMAIL_FIELD_CHARS = 10 * 1024;
const BODY_CHARS = 80 * 1024;
const ATTACHMENT_CHARS = 60 * 1024;
const TEXT_CHARS = 150 * 1024;
// From this many words on, a text goes to Postgres as its distinct words and their positions
// (src/search/word-positions.ts); a shorter one (a subject, an address) costs less parsed whole.
const WORDS_BY_POSITION = 64;

const DOC_FIELDS = ['subject', 'sender', 'recipients', 'names', 'body', 'attachments'] as const;

/**
 * A field's tsvector from its JSON: the finished tsvector's text (`_v`), its words and their
 * positions (`_w`, `_p`: search_tsvector_from_words), or its normalized text (`_n`).
 */
const fieldVector = (f: string) =>
  `case when d.${f}_v is not null then d.${f}_v::tsvector when d.${f}_w is not null then search_tsvector_from_words($2::regconfig, d.${f}_w, d.${f}_p) else to_tsvector($2::regconfig, coalesce(d.${f}_n, '')) end`;

/** Email search documents from `$1` (JSON rows, see emailWrites) in the configuration named `$2`. */
const EMAIL_DOCS_FROM_JSON = `insert into email_search_docs (email_id, mailbox_id, attachment_shas, tsv, tsv_subject, tsv_sender, tsv_recipients, tsv_names)
  select email_id, mailbox_id, attachment_shas, setweight(subject, 'A') || setweight(sender, 'B') || setweight(recipients || names, 'C') || body || attachments,
    subject, sender, recipients, names
  from (select d.email_id, d.mailbox_id, d.attachment_shas, ${DOC_FIELDS.map((f) => `${fieldVector(f)} as ${f}`).join(', ')}
    from json_to_recordset($1::json) as d (email_id text, mailbox_id text, attachment_shas text, ${DOC_FIELDS.map((f) => `${f}_v text, ${f}_w text, ${f}_p text[], ${f}_n text`).join(', ')})) as d
  on conflict (email_id) do update set mailbox_id = excluded.mailbox_id, attachment_shas = excluded.attachment_shas, tsv = excluded.tsv, tsv_subject = excluded.tsv_subject,
    tsv_sender = excluded.tsv_sender, tsv_recipients = excluded.tsv_recipients, tsv_names = excluded.tsv_names`;

/** The ranked rows of a `n left join page` result (one row with no id when the page is empty). */
function rankedRows<K extends 'email_id' | 'file_id'>(rows: ({ [k in K]: string | null } & { rank: number | null; total: number })[], id: K): Ranked<{ [k in K]: string } & { rank: number }> {
  return {
    rows: rows.filter((r) => r[id] !== null).map((r) => ({ [id]: r[id], rank: Number(r.rank) }) as { [k in K]: string } & { rank: number }),
    truncated: Number(rows[0]?.total ?? 0) > MAX_RANKED_MATCHES,
  };
}

export class PostgresSearchIndex implements SearchIndex {
  private readonly cfg: RawBuilder<unknown>;

  constructor(private readonly language: string) {
    // Validated by the config schema as a plain identifier; bound as a value and cast, never spliced.
    this.cfg = sql`${language}::regconfig`;
  }

  // Received mail: the body's tsvector built here when its words are known (src/search/lexeme-cache.ts).
  prepareBody(db: Kysely<DB>, body: string): PreparedText {
    const prepared = this.prepare(body, BODY_CHARS);
    return prepared.words ? { ...prepared, tsvector: lexemeCache(db, this.language).tsvector(prepared.words) } : prepared;
  }

  private prepare(text: string, max = EMAIL_FIELD_CHARS): PreparedText {
    const cut = text.length > max ? text.slice(0, max) : text;
    const words = textWords(cut, WORDS_BY_POSITION);
    return words ? { words } : { words: null, normalized: normalizeText(cut) };
  }

  private vec(text: string, max?: number) {
    return this.vecOf(this.prepare(text, max));
  }

  private vecOf({ normalized, words, tsvector }: PreparedText) {
    if (tsvector != null) return sql`${tsvector}::tsvector`;
    if (!words) return sql`to_tsvector(${this.cfg}, ${normalized ?? ''})`;
    const args = functionArguments(words);
    return sql`search_tsvector_from_words(${this.cfg}, ${args.words}, ${args.positions}::text[])`;
  }

  private query(text: string) {
    return sql`to_tsquery(${this.cfg}, ${text})`;
  }

  // Batched: one statement for up to 200 documents (imports and the backfill index thousands at once).
  async putEmails(db: Kysely<DB>, docs: EmailDoc[]): Promise<void> {
    for (const write of this.emailWrites(db, docs)) await db.executeQuery(write);
  }

  emailWrites(db: Kysely<DB>, docs: EmailDoc[]): CompiledQuery[] {
    // One row per email per statement: `on conflict do update` refuses the same key twice.
    const latest = [...new Map(docs.map((d) => [d.emailId, d])).values()];
    const out: CompiledQuery[] = [];
    for (let i = 0; i < latest.length; i += 200) {
      // The documents go as one JSON parameter, each field as the tsvector's text, its words, or
      // its normalized text (whichever it was prepared as): one text for every group, which
      // src/db/pg-prepared.ts prepares once (a `values` list per group was parsed and planned
      // anew each time, the tsvectors' texts included). All three hold letters and digits only
      // (src/search/query.ts normalizeText, word-positions.ts), so no lone surrogate reaches JSON.
      const rows = latest.slice(i, i + 200).map((d) => {
        const row: Record<string, unknown> = { email_id: d.emailId, mailbox_id: d.mailboxId, attachment_shas: JSON.stringify(d.attachmentShas) };
        const fields: Record<(typeof DOC_FIELDS)[number], PreparedText> = {
          subject: this.prepare(d.subject),
          sender: this.prepare(d.sender),
          recipients: this.prepare(d.recipients),
          names: this.prepare(d.names),
          body: d.preparedBody ?? this.prepare(d.body, BODY_CHARS),
          attachments: this.prepare(d.attachments, ATTACHMENT_CHARS),
        };
        for (const name of DOC_FIELDS) {
          const { tsvector, words, normalized } = fields[name];
          if (tsvector != null) row[`${name}_v`] = tsvector;
          else if (words) {
            const args = functionArguments(words);
            row[`${name}_w`] = args.words;
            row[`${name}_p`] = args.positions;
          } else row[`${name}_n`] = normalized ?? '';
        }
        return row;
      });
      out.push(CompiledQuery.raw(EMAIL_DOCS_FROM_JSON, [JSON.stringify(rows), this.language]));
    }
    return out;
  }

  async removeEmails(db: Kysely<DB>, emailIds: string[]): Promise<void> {
    for (let i = 0; i < emailIds.length; i += 500) await sql`delete from email_search_docs where email_id in (${sql.join(emailIds.slice(i, i + 500))})`.execute(db);
  }

  async putText(db: Kysely<DB>, r: TextRow): Promise<void> {
    const tsv = r.text ? this.vec(r.text, TEXT_CHARS) : sql`null`;
    await sql`insert into blob_texts (sha256, status, text, pages, error, extracted_at, tsv)
      values (${r.sha256}, ${r.status}, ${r.text}, ${r.pages}, ${r.error}, ${r.extractedAt}, ${tsv})
      on conflict (sha256) do update set status = excluded.status, text = excluded.text, pages = excluded.pages, error = excluded.error,
        extracted_at = excluded.extracted_at, tsv = excluded.tsv`.execute(db);
  }

  /** The weighted-tsv query (every term, negatives as !) plus one condition per field term. */
  private conditions(terms: Term[], fields: boolean) {
    const pos = terms.filter((t) => !t.negated);
    if (!pos.length) return null;
    const all = [...pos.map(tsTerm), ...terms.filter((t) => t.negated && (!fields || t.field === 'any')).map((t) => `!${tsTerm(t)}`)].join(' & ');
    const extra = fields
      ? terms
          .filter((t) => t.field !== 'any')
          .map((t) => {
            const hit = sql`${sql.ref(FIELD_COLUMN[t.field as keyof typeof FIELD_COLUMN])} @@ ${this.query(tsTerm(t))}`;
            return t.negated ? sql`not (${hit})` : hit;
          })
      : [];
    return { all: this.query(all), extra };
  }

  // `offset 0` keeps each match a subquery of its own (Postgres does not pull it up into the caller's
  // join): the text match runs first, on the GIN index, whatever the planner guesses about the join.
  emailMatches(q: SearchQuery, mailboxIds?: string[] | null) {
    const c = this.conditions(q.terms, true);
    if (!c) return null;
    const conds = [...c.extra, ...(mailboxIds?.length ? [sql`mailbox_id in (${sql.join(mailboxIds)})`] : [])];
    const extra = conds.length ? sql` and ${sql.join(conds, sql` and `)}` : sql``;
    return sql<{ email_id: string; rank: number }>`select email_id, (-ts_rank(tsv, ${c.all}))::float8 as rank from email_search_docs where tsv @@ ${c.all}${extra} offset 0`;
  }

  // The mailbox list is part of the scan: for a small scope the planner ANDs the mailbox_id btree
  // with the tsv GIN, so only the scope's documents are visited. (A composite GIN over both needs
  // the btree_gin extension, which a database role may not be allowed to install.) Only the narrow
  // docs table is read here: the caller reads `emails` for the batch it keeps, not for every match.
  async rankedEmails(db: Kysely<DB>, q: SearchQuery, mailboxIds: string[], after: RankKey | null, limit: number): Promise<Ranked<{ email_id: string; rank: number }>> {
    const c = this.conditions(q.terms, true);
    if (!c || !mailboxIds.length) return { rows: [], truncated: false };
    const extra = c.extra.length ? sql` and ${sql.join(c.extra, sql` and `)}` : sql``;
    const key = after ? sql`where rank > ${after[0]} or (rank = ${after[0]} and email_id > ${after[1]})` : sql``;
    // The newest MAX_RANKED_MATCHES matches (ids are time-ordered) are ranked: ts_rank reads each
    // document's whole tsvector, the id does not. One more is taken to tell whether the cap cut.
    const r = await sql<{ email_id: string | null; rank: number | null; total: number }>`with w as materialized (
          select email_id, tsv from email_search_docs where tsv @@ ${c.all} and mailbox_id = any(${mailboxIds}::text[])${extra}
          order by email_id desc limit ${MAX_RANKED_MATCHES + 1}),
        n as materialized (select count(*)::int as total, min(email_id) as oldest from w)
      select p.email_id, p.rank, n.total from n left join (
        select email_id, rank from (
          select email_id, (-ts_rank(tsv, ${c.all}))::float8 as rank from w
          where (select total from n) <= ${MAX_RANKED_MATCHES} or email_id > (select oldest from n)) m
        ${key} order by rank, email_id limit ${limit}) p on true
      order by p.rank, p.email_id`.execute(db);
    return rankedRows(r.rows, 'email_id');
  }

  // Files like emails: the text match (GIN on blob_texts.tsv) is joined to the narrow
  // file_search_docs (one row per live file: migration 0026) for the scope's mailboxes, the newest
  // MAX_RANKED_MATCHES files by id are kept, and only those are ranked (their tsvector read again by
  // primary key: the match itself reads no tsvector). Only then are candidates read from `files`
  // and checked against `where`, in rank order, until `limit` pass. Text is shared by content, so
  // the scope cannot live in the text's own index.
  async rankedFiles(db: Kysely<DB>, q: SearchQuery, mailboxIds: string[], where: Expression<SqlBool>, after: RankKey | null, limit: number): Promise<Ranked<{ file_id: string; rank: number }>> {
    const c = this.conditions(contentTerms(q), false);
    if (!c || !mailboxIds.length) return { rows: [], truncated: false };
    const key = after ? sql` and (r.rank > ${after[0]} or (r.rank = ${after[0]} and r.file_id > ${after[1]}))` : sql``;
    // MATERIALIZED: each step runs once, in this order. As one query the planner may misjudge the
    // text match as one row and run it again for every file (a nested loop that took minutes).
    const query = sql<{ file_id: string | null; rank: number | null; total: number }>`with w as materialized (
          select s.file_id, s.sha256 from blob_texts t join file_search_docs s on s.sha256 = t.sha256
          where t.tsv @@ ${c.all} and s.mailbox_id = any(${mailboxIds}::text[])
          order by s.file_id desc limit ${MAX_RANKED_MATCHES + 1}),
        n as materialized (select count(*)::int as total, min(file_id) as oldest from w),
        r as materialized (
          select w.file_id, (-ts_rank(t.tsv, ${c.all}))::float8 as rank from w join blob_texts t on t.sha256 = w.sha256
          where (select total from n) <= ${MAX_RANKED_MATCHES} or w.file_id > (select oldest from n))
      select p.file_id, p.rank, n.total from n left join (
        select r.file_id, r.rank from r join files on files.id = r.file_id
        where ${where}${key} order by r.rank, r.file_id limit ${limit}) p on true
      order by p.rank, p.file_id`;
    // When a fifth or more of all texts match, the planner prices a sequential scan of blob_texts
    // below the GIN bitmap; but the scan decompresses every row's tsvector to test it, where the
    // bitmap (exact for plain words) reads none: 200–270 ms against 70–90 ms for a two-word query
    // at 20,000 files (docs/search.md). So this statement runs without sequential scans, in a
    // transaction of its own (SET LOCAL), unless the caller's transaction holds it.
    const r = db.isTransaction
      ? await query.execute(db)
      : await db.transaction().execute(async (trx) => {
          await sql`set local enable_seqscan = off`.execute(trx);
          return query.execute(trx);
        });
    return rankedRows(r.rows, 'file_id');
  }

  textMatches(q: SearchQuery) {
    const c = this.conditions(contentTerms(q), false);
    if (!c) return null;
    return sql<{ sha256: string; rank: number }>`select sha256, (-ts_rank(tsv, ${c.all}))::float8 as rank from blob_texts where tsv @@ ${c.all} offset 0`;
  }
}
