import { sql, SqliteAdapter, type Kysely } from 'kysely';

// Postgres: received mail's blobs and search documents kept whole in their rows, not moved to
// TOAST tables in 2 KB pieces.
//
// Postgres "toasts" a row longer than 2 KB before storing it: it tries to compress its longest
// values and moves what is still long to the table's TOAST table, a row and an index entry per 2 KB
// piece. A received 5 KiB message makes three such rows in its commit, and a profile of the
// database under SMTP load found TOAST's work a seventh of the backend's CPU. Two of them gain
// nothing from it:
// - `blobs`: message.eml and message.json kept in their rows (migration 0029) are stored as they
//   are (`storage external`), so each went to the TOAST table in three pieces;
// - `email_search_docs`: the tsvector, which compression barely shrinks, was tried, then moved out.
// Their rows now stay whole up to 8160 bytes (the most `toast_tuple_target` takes: a row must fit a
// page); longer ones are toasted as before. A 5 KiB message's rows take no more room this way (a
// bench run of 3,310 messages: `blobs` 16.2 MB against 17.2, `email_search_docs` 13.8 against 14.6,
// indexes and TOAST tables included).
//
// `emails` is left as it is: its row is updated once the message is labeled, and with the body's
// text in the TOAST table the new row version is a small one. Kept whole, or compressed only to
// fit, the table took twice and more the room.
const WHOLE_UP_TO_A_PAGE = ['blobs', 'email_search_docs'];

export async function up(db: Kysely<any>): Promise<void> {
  if (db.getExecutor().adapter instanceof SqliteAdapter) return;
  for (const table of WHOLE_UP_TO_A_PAGE) await sql.raw(`alter table ${table} set (toast_tuple_target = 8160)`).execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  if (db.getExecutor().adapter instanceof SqliteAdapter) return;
  for (const table of WHOLE_UP_TO_A_PAGE) await sql.raw(`alter table ${table} reset (toast_tuple_target)`).execute(db);
}
