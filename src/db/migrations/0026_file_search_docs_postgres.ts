import { sql, SqliteAdapter, type Kysely } from 'kysely';

// Postgres search (src/search/index.postgres.ts): one narrow row per live file with a current
// version, `(file_id, mailbox_id, sha256)`, the Postgres side of SQLite's `file_search_docs`
// (migration 0025). A file search then joins the text match (`blob_texts`, GIN on `tsv`) to this
// small table for the scope's mailboxes, keeps the newest 10,000 matching files by id and ranks
// only those, instead of ranking every matching text in the database and then joining each through
// `file_versions` and `files` (the wide rows) to find whose it is. Unlike SQLite's table, a row does
// not wait for the text: whether a content has text is the join with `blob_texts`, so storing or
// replacing a text needs no trigger here.
//
// Kept by triggers, so that every path that creates, versions, restores, moves or deletes a file
// keeps it current without having to remember it:
// - a file inserted, or its current version, mailbox or deletion changed: its row is rebuilt;
// - a version inserted that is already its file's current one (the file row may come first);
// - a version deleted that was its file's current one; a file deleted.
// Searches still check every file they return against `files` (scope, withheld mail, filters), so
// a stale row here could make a search slower, never show a file it should not.
export async function up(db: Kysely<any>): Promise<void> {
  if (db.getExecutor().adapter instanceof SqliteAdapter) return;
  await sql`create table file_search_docs (
    file_id text primary key,
    mailbox_id text not null,
    sha256 text not null)`.execute(db);
  await sql`create index file_search_docs_sha256 on file_search_docs (sha256)`.execute(db);
  await sql`create index file_search_docs_mailbox on file_search_docs (mailbox_id, file_id)`.execute(db);
  await sql.raw(`create function file_search_docs_file() returns trigger language plpgsql as $$
    begin
      if tg_op = 'DELETE' then
        delete from file_search_docs where file_id = old.id;
        return null;
      end if;
      delete from file_search_docs where file_id = new.id;
      if new.deleted_at is null and new.current_version_id is not null then
        insert into file_search_docs (file_id, mailbox_id, sha256)
          select new.id, new.mailbox_id, v.sha256 from file_versions v where v.id = new.current_version_id and v.sha256 is not null;
      end if;
      return null;
    end $$`).execute(db);
  await sql.raw(fileSearchDocsVersionFunction()).execute(db);
  await sql`create trigger file_search_docs_file_insert after insert on files for each row execute function file_search_docs_file()`.execute(db);
  await sql`create trigger file_search_docs_file_update after update of current_version_id, deleted_at, mailbox_id on files for each row execute function file_search_docs_file()`.execute(db);
  await sql`create trigger file_search_docs_file_delete after delete on files for each row execute function file_search_docs_file()`.execute(db);
  await sql`create trigger file_search_docs_version_insert after insert on file_versions for each row execute function file_search_docs_version()`.execute(db);
  await sql`create trigger file_search_docs_version_delete after delete on file_versions for each row execute function file_search_docs_version()`.execute(db);
  // Existing files (one statement: a narrow row per live file).
  await sql`insert into file_search_docs (file_id, mailbox_id, sha256)
    select f.id, f.mailbox_id, v.sha256 from files f join file_versions v on v.id = f.current_version_id
    where f.deleted_at is null and v.sha256 is not null`.execute(db);
  await sql`analyze file_search_docs`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  if (db.getExecutor().adapter instanceof SqliteAdapter) return;
  for (const t of ['file_insert', 'file_update', 'file_delete']) await sql.raw(`drop trigger if exists file_search_docs_${t} on files`).execute(db);
  for (const t of ['version_insert', 'version_delete']) await sql.raw(`drop trigger if exists file_search_docs_${t} on file_versions`).execute(db);
  await sql`drop function if exists file_search_docs_file()`.execute(db);
  await sql`drop function if exists file_search_docs_version()`.execute(db);
  await sql`drop table if exists file_search_docs`.execute(db);
}

/**
 * The version trigger's function. `upsertWhere` limits the upsert's update (migration 0030 passes
 * one so that a row already as it should be is not rewritten); migration 0030's `down` builds this
 * migration's function again from here.
 */
export function fileSearchDocsVersionFunction(upsertWhere = ''): string {
  return `create or replace function file_search_docs_version() returns trigger language plpgsql as $$
    begin
      if tg_op = 'DELETE' then
        delete from file_search_docs where file_id = old.file_id
          and not exists (select 1 from files f where f.id = old.file_id and f.current_version_id is distinct from old.id);
        return null;
      end if;
      if new.sha256 is not null then
        insert into file_search_docs (file_id, mailbox_id, sha256)
          select f.id, f.mailbox_id, new.sha256 from files f where f.id = new.file_id and f.current_version_id = new.id and f.deleted_at is null
          on conflict (file_id) do update set mailbox_id = excluded.mailbox_id, sha256 = excluded.sha256${upsertWhere ? `
          where ${upsertWhere}` : ''};
      end if;
      return null;
    end $$`;
}
