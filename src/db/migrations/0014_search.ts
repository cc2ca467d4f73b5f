import { sql, SqliteAdapter, type Kysely } from 'kysely';
import { newId } from '../../ids.ts';

// Search (src/search): the text extracted from each stored content (keyed by SHA-256, so a file
// copied, moved or attached to many emails is extracted once), and one search document per email.
// SQLite indexes them with FTS5 (contentless tables whose rowids are the documents' doc_id; the
// autoincrement ids are never reused, so a stale index entry can never point at another document);
// Postgres keeps tsvector columns with GIN indexes. Existing data is indexed in the background by
// the `search.backfill` job queued here.
export async function up(db: Kysely<any>): Promise<void> {
  const sqlite = db.getExecutor().adapter instanceof SqliteAdapter;
  if (sqlite) {
    await sql`create table blob_texts (
      doc_id integer primary key autoincrement,
      sha256 text not null unique,
      status text not null,
      text text,
      pages integer,
      error text,
      extracted_at text not null)`.execute(db);
    await sql`create table email_search_docs (
      doc_id integer primary key autoincrement,
      email_id text not null unique,
      mailbox_id text not null,
      attachment_shas text not null)`.execute(db);
    // `mailbox` holds the mailbox id as a word, so that a search in one mailbox narrows the match
    // inside FTS5 instead of ranking every mailbox's matches first.
    const tokenize = `tokenize='porter unicode61 remove_diacritics 2'`;
    await sql.raw(`create virtual table blob_text_fts using fts5(body, content='', contentless_delete=1, ${tokenize})`).execute(db);
    await sql.raw(`create virtual table email_fts using fts5(subject, sender, recipients, body, names, attachments, mailbox, content='', contentless_delete=1, ${tokenize})`).execute(db);
  } else {
    await sql`create table blob_texts (
      sha256 text primary key,
      status text not null,
      text text,
      pages integer,
      error text,
      extracted_at text not null,
      tsv tsvector)`.execute(db);
    await sql`create index blob_texts_tsv on blob_texts using gin (tsv)`.execute(db);
    await sql`create table email_search_docs (
      email_id text primary key,
      mailbox_id text not null,
      attachment_shas text not null,
      tsv tsvector not null,
      tsv_subject tsvector not null,
      tsv_sender tsvector not null,
      tsv_recipients tsvector not null,
      tsv_names tsvector not null)`.execute(db);
    await sql`create index email_search_docs_tsv on email_search_docs using gin (tsv)`.execute(db);
  }
  await db.schema.createIndex('email_search_docs_mailbox').on('email_search_docs').column('mailbox_id').execute();
  const now = new Date().toISOString();
  await db
    .insertInto('jobs')
    .values({ id: newId('job'), task: 'search.backfill', payload: '{"after":null}', status: 'queued', run_at: now, attempts: 0, max_attempts: 10, unique_key: 'search.backfill', created_at: now, updated_at: now })
    .execute();
}
