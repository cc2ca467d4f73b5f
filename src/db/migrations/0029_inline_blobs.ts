import { sql, SqliteAdapter, type Kysely } from 'kysely';

// Small blobs kept in the database row that records them (src/blobs/inline-blobs.ts).
//
// A received 5 KiB message is two small blobs (message.eml, message.json). In the store each cost a
// write with O_DSYNC, a rename and a directory fsync on a writer thread, and a hand-over to that
// thread and back: about 0.5 ms of CPU per message, and the commit waited for them. In its `blobs`
// row the bytes are written by the group commit that records the message, in the one WAL sync it
// makes anyway. Null: the bytes are in the blob store, as before.
export async function up(db: Kysely<any>): Promise<void> {
  const sqlite = db.getExecutor().adapter instanceof SqliteAdapter;
  await db.schema.alterTable('blobs').addColumn('inline_bytes', sqlite ? 'blob' : 'bytea').execute();
  // Stored as they are: mail is often compressed already (base64 of images, archives), and Postgres
  // would try to compress each value within the commit.
  if (!sqlite) await sql`alter table blobs alter column inline_bytes set storage external`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('blobs').dropColumn('inline_bytes').execute();
}
