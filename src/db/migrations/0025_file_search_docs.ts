import { sql, SqliteAdapter, type Kysely } from 'kysely';

// SQLite search (src/search/index.sqlite.ts): one narrow row per live file whose current version's
// content has an extracted text, keyed by that text's full-text rowid (`blob_texts.doc_id`). A file
// match then costs one look-up in this small table, in the order FTS5 returns its rowids, instead of
// a join through `blob_texts` (whose rows hold the whole text), `file_versions` and `files` for every
// match before the scope could be checked (ranking the files of a 100,000-file account read five
// scattered pages per match). The mailbox id is here, so a search checks its scope per match on this
// table and reads `files` for the page it returns only.
//
// Kept by triggers, so that every path that creates, moves, deletes, restores or versions a file,
// and every extraction result, keeps it current without each having to remember it:
// - a file inserted, or its current version, mailbox or deletion changed: its row is rebuilt;
// - a version inserted that is already its file's current one (the file row may come first);
// - a text stored (putText replaces the row, so its doc_id is new) or deleted.
// Searches still check every returned file against `files` (scope, withheld mail, filters), so a row
// here can make a search slower, never show a file it should not.
// Postgres ranks files on its own tables (index.postgres.ts): nothing to add there.
export async function up(db: Kysely<any>): Promise<void> {
  if (!(db.getExecutor().adapter instanceof SqliteAdapter)) return;
  await sql`create table file_search_docs (
    text_doc_id integer not null,
    file_id text not null,
    mailbox_id text not null,
    primary key (text_doc_id, file_id)) without rowid`.execute(db);
  await sql`create index file_search_docs_file on file_search_docs (file_id)`.execute(db);
  const rebuild = (file: string) => `
    delete from file_search_docs where file_id = ${file}.id;
    insert or ignore into file_search_docs (text_doc_id, file_id, mailbox_id)
      select t.doc_id, ${file}.id, ${file}.mailbox_id from file_versions v join blob_texts t on t.sha256 = v.sha256
      where v.id = ${file}.current_version_id and ${file}.deleted_at is null;`;
  await sql.raw(`create trigger file_search_docs_file_insert after insert on files begin ${rebuild('new')} end`).execute(db);
  await sql.raw(`create trigger file_search_docs_file_update after update of current_version_id, deleted_at, mailbox_id on files begin ${rebuild('new')} end`).execute(db);
  await sql.raw(`create trigger file_search_docs_file_delete after delete on files begin delete from file_search_docs where file_id = old.id; end`).execute(db);
  await sql.raw(`create trigger file_search_docs_version_insert after insert on file_versions begin
    insert or ignore into file_search_docs (text_doc_id, file_id, mailbox_id)
      select t.doc_id, f.id, f.mailbox_id from files f join blob_texts t on t.sha256 = new.sha256
      where f.id = new.file_id and f.current_version_id = new.id and f.deleted_at is null;
    end`).execute(db);
  await sql.raw(`create trigger file_search_docs_version_delete after delete on file_versions begin
    delete from file_search_docs where file_id = old.file_id and not exists (select 1 from files f where f.id = old.file_id and f.current_version_id is not old.id);
    end`).execute(db);
  await sql.raw(`create trigger file_search_docs_text_insert after insert on blob_texts begin
    insert or ignore into file_search_docs (text_doc_id, file_id, mailbox_id)
      select new.doc_id, f.id, f.mailbox_id from file_versions v join files f on f.id = v.file_id and f.current_version_id = v.id
      where v.sha256 = new.sha256 and f.deleted_at is null;
    end`).execute(db);
  await sql.raw(`create trigger file_search_docs_text_delete after delete on blob_texts begin delete from file_search_docs where text_doc_id = old.doc_id; end`).execute(db);
  // Existing files (one statement: a narrow row per live file with a stored text).
  await sql`insert or ignore into file_search_docs (text_doc_id, file_id, mailbox_id)
    select t.doc_id, f.id, f.mailbox_id from files f join file_versions v on v.id = f.current_version_id join blob_texts t on t.sha256 = v.sha256
    where f.deleted_at is null`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  if (!(db.getExecutor().adapter instanceof SqliteAdapter)) return;
  for (const t of ['file_insert', 'file_update', 'file_delete', 'version_insert', 'version_delete', 'text_insert', 'text_delete']) await sql.raw(`drop trigger if exists file_search_docs_${t}`).execute(db);
  await sql`drop table if exists file_search_docs`.execute(db);
}
