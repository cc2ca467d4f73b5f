import { sql, SqliteAdapter, type Kysely } from 'kysely';

// Postgres: received mail's rows written without TOAST's work where it buys nothing.
//
// Postgres "toasts" a row longer than 2 KB before storing it: it tries to compress its longest
// values (pglz) and moves what is still long to the table's TOAST table, a row and an index entry
// per 2 KB. A received 5 KiB message makes three such rows in its commit, and a profile of the
// database under SMTP load found TOAST's work a sixth of the backend's CPU:
// - `blobs`: message.eml and message.json kept inline (migration 0029), stored as they are
//   (`storage external`), so each went to the TOAST table in three pieces;
// - `email_search_docs`: the tsvector, which pglz tries and fails to compress, then moved out too;
// - `emails`: the body's text, compressed by pglz in every commit (and the next longest values when
//   the row was still over 2 KB).
// The first two now stay whole in their row up to 8160 bytes (the most `toast_tuple_target` takes:
// a row must fit a page); longer ones are toasted as before. Nothing is larger on disk: neither
// value compressed. The emails' texts stay compressed, with lz4 (several times cheaper than pglz),
// where this Postgres has it (built --with-lz4, as the common distributions' packages are); rows
// written before keep their pglz values, which Postgres reads as before.
const WHOLE_UP_TO_A_PAGE = ['blobs', 'email_search_docs'];

export async function up(db: Kysely<any>): Promise<void> {
  if (db.getExecutor().adapter instanceof SqliteAdapter) return;
  for (const table of WHOLE_UP_TO_A_PAGE) await sql.raw(`alter table ${table} set (toast_tuple_target = 8160)`).execute(db);
  if (!(await hasLz4(db))) return;
  for (const column of await textColumns(db, 'emails')) await sql.raw(`alter table emails alter column "${column}" set compression lz4`).execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  if (db.getExecutor().adapter instanceof SqliteAdapter) return;
  for (const table of WHOLE_UP_TO_A_PAGE) await sql.raw(`alter table ${table} reset (toast_tuple_target)`).execute(db);
  for (const column of await textColumns(db, 'emails')) await sql.raw(`alter table emails alter column "${column}" set compression default`).execute(db);
}

/** The table's text columns, in the schema the connection's search_path names first. */
async function textColumns(db: Kysely<any>, table: string): Promise<string[]> {
  const { rows } = await sql<{ name: string }>`select column_name as name from information_schema.columns
    where table_schema = current_schema() and table_name = ${table} and data_type = 'text' order by ordinal_position`.execute(db);
  return rows.map((r) => r.name);
}

async function hasLz4(db: Kysely<any>): Promise<boolean> {
  const { rows } = await sql<{ lz4: boolean }>`select 'lz4' = any(enumvals) as lz4 from pg_settings where name = 'default_toast_compression'`.execute(db);
  return rows[0]?.lz4 === true;
}
