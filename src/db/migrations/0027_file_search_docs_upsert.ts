import { sql, SqliteAdapter, type Kysely } from 'kysely';

// Postgres: the file trigger of `file_search_docs` (migration 0026) upserts a file's row instead of
// deleting it and inserting it again. A new file has no row to delete (or, if its version row came
// first, the upsert replaces it), so the delete only cost time: in pg_stat_statements it was 38 %
// of Postgres's execution time while receiving mail (two files per message), because PL/pgSQL
// kept the plan it made while the table was nearly empty (a sequential scan) until the next
// ANALYZE, and each delete then read the whole growing table. An update still removes the row of a
// file left without a searchable current version (deleted, or a version with no content).
export async function up(db: Kysely<any>): Promise<void> {
  if (db.getExecutor().adapter instanceof SqliteAdapter) return;
  await sql.raw(`create or replace function file_search_docs_file() returns trigger language plpgsql as $$
    begin
      if tg_op = 'DELETE' then
        delete from file_search_docs where file_id = old.id;
        return null;
      end if;
      if new.deleted_at is null and new.current_version_id is not null then
        insert into file_search_docs (file_id, mailbox_id, sha256)
          select new.id, new.mailbox_id, v.sha256 from file_versions v where v.id = new.current_version_id and v.sha256 is not null
          on conflict (file_id) do update set mailbox_id = excluded.mailbox_id, sha256 = excluded.sha256;
        if found then
          return null;
        end if;
      end if;
      -- A new file's version row may come after it: the version's trigger adds the row then.
      if tg_op = 'UPDATE' then
        delete from file_search_docs where file_id = new.id;
      end if;
      return null;
    end $$`).execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  if (db.getExecutor().adapter instanceof SqliteAdapter) return;
  await sql.raw(`create or replace function file_search_docs_file() returns trigger language plpgsql as $$
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
}
