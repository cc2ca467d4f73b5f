import { sql, SqliteAdapter, type Kysely } from 'kysely';
import { fileSearchDocsVersionFunction } from './0026_file_search_docs_postgres.ts';
import * as fileSearchDocsUpsert from './0027_file_search_docs_upsert.ts';

// Postgres: a file's `file_search_docs` row written once, not twice. A file and its current version
// written in one statement (received mail's group commit, src/db/write-batch.ts) fire both
// triggers of migrations 0026 and 0027 at the statement's end, and each upserted the same row: the
// first inserted it and the second rewrote it with the same values. Every new file so left a dead
// row version behind (in a run of 920 messages: 1,860 inserts and 1,860 updates of the table). Now
// an upsert changes a row only when its mailbox or content differs.
//
// The file trigger's `found` no longer tells whether the file is searchable (an upsert that changes
// nothing finds nothing), so it reads the current version's content first.

/** The upserts' condition: a row already holding this mailbox and content is left as it is. */
const ROW_DIFFERS = '(file_search_docs.mailbox_id, file_search_docs.sha256) is distinct from (excluded.mailbox_id, excluded.sha256)';

export async function up(db: Kysely<any>): Promise<void> {
  if (db.getExecutor().adapter instanceof SqliteAdapter) return;
  await sql.raw(`create or replace function file_search_docs_file() returns trigger language plpgsql as $$
    declare
      content text;
    begin
      if tg_op = 'DELETE' then
        delete from file_search_docs where file_id = old.id;
        return null;
      end if;
      if new.deleted_at is null and new.current_version_id is not null then
        select v.sha256 into content from file_versions v where v.id = new.current_version_id;
        if content is not null then
          insert into file_search_docs (file_id, mailbox_id, sha256) values (new.id, new.mailbox_id, content)
            on conflict (file_id) do update set mailbox_id = excluded.mailbox_id, sha256 = excluded.sha256
            where ${ROW_DIFFERS};
          return null;
        end if;
      end if;
      -- A new file's version row may come after it: the version's trigger adds the row then.
      if tg_op = 'UPDATE' then
        delete from file_search_docs where file_id = new.id;
      end if;
      return null;
    end $$`).execute(db);
  await sql.raw(fileSearchDocsVersionFunction(ROW_DIFFERS)).execute(db);
}

// The functions as migrations 0027 (the file's) and 0026 (the version's) left them.
export async function down(db: Kysely<any>): Promise<void> {
  if (db.getExecutor().adapter instanceof SqliteAdapter) return;
  await fileSearchDocsUpsert.up(db);
  await sql.raw(fileSearchDocsVersionFunction()).execute(db);
}
