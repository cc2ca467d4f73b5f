import type { CompiledQuery, Expression, Kysely, RawBuilder, SqlBool } from 'kysely';
import type { DB } from '../db/schema.ts';
import type { Dialect } from '../db/database.ts';
import type { SearchQuery } from './query.ts';
import type { WordPositions } from './word-positions.ts';
import { SqliteSearchIndex } from './index.sqlite.ts';
import { PostgresSearchIndex } from './index.postgres.ts';

// One interface over the two databases' full-text search (SQLite FTS5; Postgres tsvector + GIN).
// Writes take the caller's transaction, so an email is searchable exactly when it is stored.
// Matches are subqueries that callers join to `emails` or to file versions; they carry a rank where
// lower is better on both databases. Every user word reaches the database as a bound parameter or
// as a quoted token of letters and digits only (see query.ts): never as query syntax.

/** What an email is found by. Attachment text is added by the extraction job when it is known. */
export interface EmailDoc {
  emailId: string;
  mailboxId: string;
  subject: string;
  sender: string;
  recipients: string;
  body: string;
  /** Attachment file names. */
  names: string;
  /** Extracted text of the attachments. */
  attachments: string;
  attachmentShas: string[];
  /** `body` made ready by the same index's prepareBody, ahead of the write (received mail). */
  preparedBody?: PreparedText;
}

/**
 * A text made ready for an index's write ahead of it (Postgres: reduced to letters and digits, and
 * split into its distinct words: src/search/word-positions.ts), so that the work is done before a
 * group commit instead of inside it. Opaque to callers.
 */
export interface PreparedText {
  /** Its words, when it goes to Postgres as words (the others, a short or unusual text, go whole). */
  readonly words: WordPositions | null;
  /** The text reduced to letters and digits, when it goes whole. */
  readonly normalized?: string;
  /** The finished tsvector's text, when it could be built ahead (Postgres: src/search/lexeme-cache.ts). */
  readonly tsvector?: string | null;
}

export interface TextRow {
  sha256: string;
  status: string;
  text: string | null;
  pages: number | null;
  error: string | null;
  extractedAt: string;
}

/**
 * At most this many matches of one query are ranked: the newest ones (by index order on SQLite, by
 * id on Postgres, both close to arrival order); a search says when it cut (`truncated`). A word in
 * nearly every email of a large mailbox would otherwise cost a rank computation per email on every
 * page; past this many, recent mail is what a person looking for it most likely means. Narrow the
 * query (more words, `from:`, dates) to reach older mail. Emails and files are cut apart (a search
 * of both ranks up to twice this many). 10,000 since migration 0025 (was 20,000): on SQLite `bm25`
 * costs 2–4 µs per ranked match (a docsize look-up and the match's positions), and a search across
 * a 1,000,000-email account with files ranked up to 40,000 matches per page, which kept its p99
 * over 150 ms (docs/search.md).
 */
export const MAX_RANKED_MATCHES = 10_000;

/** A keyset position in a ranked list: (rank, id); lower ranks are better. */
export type RankKey = [number, string];

/**
 * One batch of ranked candidates, and whether the query had more matches in scope than
 * MAX_RANKED_MATCHES (so the oldest of them were not ranked at all, on any page).
 */
export interface Ranked<R> {
  rows: R[];
  truncated: boolean;
}

export interface SearchIndex {
  putEmails(db: Kysely<DB>, docs: EmailDoc[]): Promise<void>;
  /**
   * The same as statements that read nothing, for a write batch (src/db/write-batch.ts); null when
   * this index must read while it writes (SQLite's FTS rows are keyed by the documents' row ids).
   */
  emailWrites(db: Kysely<DB>, docs: EmailDoc[]): CompiledQuery[] | null;
  /** An email body made ready for emailWrites (EmailDoc.preparedBody); null when this index has nothing to prepare. */
  prepareBody(db: Kysely<DB>, body: string): PreparedText | null;
  removeEmails(db: Kysely<DB>, emailIds: string[]): Promise<void>;
  /** Stores (or replaces) the extraction result of one content, and indexes its text. */
  putText(db: Kysely<DB>, row: TextRow): Promise<void>;
  /**
   * `(email_id, rank)` of the emails matching the query's words, or null when it has none. With
   * `mailboxIds`, only emails of those mailboxes (a narrowing for speed: callers still check scope).
   */
  emailMatches(q: SearchQuery, mailboxIds?: string[] | null): RawBuilder<{ email_id: string; rank: number }> | null;
  /**
   * One batch of ranked candidates for `/v1/search`: `(email_id, rank)` of the emails of
   * `mailboxIds` (the scope, resolved by the caller from src/auth/access.ts) that match the query,
   * best first, then by id, strictly after the keyset `after`, at most `limit`. The mailbox list
   * narrows the match inside the index itself, so another tenant's matches are never ranked; the
   * caller still checks every row it keeps against the emails table. Of the matches in those
   * mailboxes, the newest MAX_RANKED_MATCHES are ranked (`truncated` when there were more).
   */
  rankedEmails(db: Kysely<DB>, q: SearchQuery, mailboxIds: string[], after: RankKey | null, limit: number): Promise<Ranked<{ email_id: string; rank: number }>>;
  /**
   * Files of `mailboxIds` (the scope, resolved by the caller) whose current version's text matches
   * the query's plain words and that meet `where` (a condition on `files`, built by the caller: scope
   * again, withheld mail, the query's filters), best first, then by id, strictly after `after`, at
   * most `limit`: `(file_id, rank)`. Of the live files in those mailboxes whose current text matches,
   * the newest MAX_RANKED_MATCHES (by the text's index order on SQLite, by file id on Postgres) are
   * ranked, on both databases (`truncated` when there were more): the mailbox list is checked
   * before that cut, `where` after it.
   */
  rankedFiles(db: Kysely<DB>, q: SearchQuery, mailboxIds: string[], where: Expression<SqlBool>, after: RankKey | null, limit: number): Promise<Ranked<{ file_id: string; rank: number }>>;
  /** `(sha256, rank)` of contents whose text matches the query's plain words, or null when it has none. */
  textMatches(q: SearchQuery): RawBuilder<{ sha256: string; rank: number }> | null;
}

/** The index for this deployment's database and language (stateless; cheap to make). */
export function searchIndex(deps: { dialect: Dialect; config: { search: { language: string } } }): SearchIndex {
  return createSearchIndex(deps.dialect, deps.config.search.language);
}

export function createSearchIndex(dialect: Dialect, language: string): SearchIndex {
  return dialect === 'postgres' ? new PostgresSearchIndex(language) : new SqliteSearchIndex();
}
