import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from './harness.ts';
import { inbox, receive, type Box } from './emails-helpers.ts';
import { sha256Hex as sha256 } from '../src/ids.ts';

// Postgres: a 5 KiB message's blobs (message.eml, message.json) and its search document stay whole in
// their rows instead of being moved to the TOAST tables in 2 KB pieces (migration 0031). Rows longer
// than a page are still toasted, and read back whole. Long values Cubby writes are compressed with
// lz4 where the server has it, by the connection's setting (src/db/database.ts), not the columns'.

/** Words that neither repeat nor compress: a body whose text and tsvector are each over 2 KB. */
function distinctWords(n: number): string {
  return Array.from({ length: n }, () => `w${randomBytes(4).toString('hex')}`).join(' ');
}

describe.skipIf(!process.env.CUBBY_TEST_POSTGRES_URL)("received mail's rows on Postgres", () => {
  let app: TestApp;
  let box: Box;
  beforeAll(async () => {
    app = await startTestApp('postgres');
    box = await inbox(app, await app.user());
  });
  afterAll(() => app?.stop());

  /** Bytes in the TOAST table of `table` (0: nothing of it was moved out of its rows). */
  async function toastBytes(table: string): Promise<number> {
    const { rows } = await sql<{ bytes: string }>`select pg_relation_size(reltoastrelid) as bytes from pg_class
      where oid = to_regclass(${table}) and reltoastrelid <> 0`.execute(app.started.deps.db);
    expect(rows, `${table} has a TOAST table`).toHaveLength(1);
    return Number(rows[0]!.bytes);
  }

  async function emailRow(id: string) {
    const { rows } = await sql<{ raw_sha256: string; json_sha256: string; body_compression: string | null; body_text: string }>`
      select e.raw_sha256, v.sha256 as json_sha256, pg_column_compression(e.body_text) as body_compression, e.body_text
      from emails e join files f on f.id = e.json_file_id join file_versions v on v.id = f.current_version_id where e.id = ${id}`.execute(app.started.deps.db);
    return rows[0]!;
  }

  async function inlineBlob(sha: string) {
    const { rows } = await sql<{ bytes: Buffer; stored: number }>`select inline_bytes as bytes, pg_column_size(inline_bytes) as stored from blobs where sha256 = ${sha}`.execute(
      app.started.deps.db,
    );
    return rows[0]!;
  }

  it('keeps a 5 KiB message’s blobs and search document whole in their rows', async () => {
    const text = distinctWords(250); // 2.5 KB of text, 250 distinct lexemes: a search document of about 4.5 KB
    const id = await receive(app, box, { subject: 'whole rows', text });
    const email = await emailRow(id);
    for (const sha of [email.raw_sha256, email.json_sha256]) {
      const blob = await inlineBlob(sha);
      expect(blob.bytes.byteLength, 'the blob is over the 2 KB at which Postgres toasts a row').toBeGreaterThan(2100);
      expect(sha256(blob.bytes)).toBe(sha);
      // In its row: the bytes and a 4-byte header (a value in the TOAST table counts its bytes alone).
      expect(blob.stored, 'kept in its row, as it is').toBe(blob.bytes.byteLength + 4);
    }
    const { rows: doc } = await sql<{ size: number }>`select pg_column_size(tsv) as size from email_search_docs where email_id = ${id}`.execute(app.started.deps.db);
    expect(doc[0]!.size, 'the search document is over 2 KB').toBeGreaterThan(2100);
    expect(await toastBytes('blobs'), 'no piece of a blob in the TOAST table').toBe(0);
    expect(await toastBytes('email_search_docs'), 'no piece of a search document in the TOAST table').toBe(0);
    expect(email.body_text).toContain(text.slice(0, 200));
  });

  it('compresses the email’s text with lz4 where the server has it, by the connection’s setting', async (ctx) => {
    const { db } = app.started.deps;
    const { rows } = await sql<{ lz4: boolean }>`select 'lz4' = any(enumvals) as lz4 from pg_settings where name = 'default_toast_compression'`.execute(db);
    if (!rows[0]?.lz4) return ctx.skip(); // a server built without lz4 keeps pglz
    const id = await receive(app, box, { subject: 'compressed', text: `${'a line that repeats itself. '.repeat(200)}end` });
    const email = await emailRow(id);
    expect(email.body_compression).toBe('lz4');
    expect(email.body_text).toContain('a line that repeats itself. a line');
    // The columns keep the server's default: a dump of them restores where lz4 is missing.
    const { rows: columns } = await sql<{ n: number }>`select count(*)::int as n from pg_attribute
      where attrelid = to_regclass('emails') and attnum > 0 and attcompression <> ''`.execute(db);
    expect(columns[0]!.n).toBe(0);
  });

  it('still toasts a row longer than a page, and reads it back whole', async () => {
    const before = await toastBytes('blobs');
    const attachment = randomBytes(30_000); // kept inline (under 128 KiB), longer than a page
    const id = await receive(app, box, { subject: 'long', text: 'see attached', attachments: [{ filename: 'long.bin', content: attachment, contentType: 'application/octet-stream' }] });
    const email = await emailRow(id);
    const raw = await inlineBlob(email.raw_sha256);
    expect(raw.bytes.byteLength).toBeGreaterThan(40_000);
    expect(sha256(raw.bytes)).toBe(email.raw_sha256);
    const stored = await inlineBlob(sha256(attachment));
    expect(Buffer.compare(stored.bytes, attachment)).toBe(0);
    expect(await toastBytes('blobs')).toBeGreaterThan(before);
  });
});
