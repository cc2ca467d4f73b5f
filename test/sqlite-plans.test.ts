import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { CompiledQuery } from 'kysely';
import { migrate, openDatabase, type Database } from '../src/db/database.ts';
import { conversationLookup, conversationLookups } from '../src/inbound/conversations.ts';
import { collectGarbageBlobs, purgeDeletedMailboxes } from '../src/files/purge.service.ts';
import type { BlobStore } from '../src/blobs/blob-store.ts';

// SQLite has no table statistics unless ANALYZE has run, and Cubby does not run it: plans come
// from the statements' shapes. Statements that run for every received message, or periodically
// over everything, must reach the tables that grow with mail (emails, files, versions, blobs)
// through an index. Behaviour is tested end to end on both databases elsewhere
// (smtp-receive.test.ts, files.test.ts); Postgres plans by its statistics, so the plans are
// checked on SQLite, on an empty migrated database (no statistics, as after a fresh start).
describe('statement plans without statistics [sqlite]', () => {
  let dir: string;
  let database: Database;
  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cubby-conv-'));
    database = await openDatabase(`sqlite:${path.join(dir, 'db.sqlite')}`);
    await migrate(database);
  });
  afterAll(async () => {
    await database?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const plan = async (q: CompiledQuery) =>
    (await database.db.executeQuery<{ detail: string }>(CompiledQuery.raw(`explain query plan ${q.sql}`, [...q.parameters]))).rows.map((r) => r.detail);
  /** Every read of `emails` is a search on the Message-ID or thread-key index with both its columns. */
  const onlyKeyLookups = (steps: string[]) => {
    const reads = steps.filter((d) => /\bemails\b/.test(d));
    return reads.length > 0 && reads.every((d) => /^SEARCH emails USING INDEX emails_(message_id|thread_key) \(mailbox_id=\? AND (message_id|thread_key)=\?\)$/.test(d));
  };

  // The conversation lookup runs for every received message with a Message-ID, inside the group
  // commit. Planned as a WHERE … OR … ORDER BY seq LIMIT 1, it read the mailbox's emails in order
  // from the (mailbox_id, seq) index until one matched: all of them for a new conversation.
  it('the conversation lookup reads emails only through the Message-ID and thread-key indexes', async () => {
    const refs = ['<a@example.com>', '<b@example.com>'];
    for (const [threadKey, refsOf] of [['<a@example.com>', refs], ['<c@example.com>', []], [null, refs], [null, ['<a@example.com>']]] as const) {
      const steps = await plan(conversationLookup(database.db, 'mbx_x', threadKey, [...refsOf])!);
      expect(onlyKeyLookups(steps), steps.join(' | ')).toBe(true);
    }
    expect(conversationLookup(database.db, 'mbx_x', null, [])).toBeNull();
  });

  it("a group commit's lookups in one statement keep each lookup's plan", async () => {
    const keys = [
      { mailboxId: 'mbx_x', threadKey: '<a@example.com>', refs: ['<a@example.com>', '<b@example.com>'] },
      { mailboxId: 'mbx_y', threadKey: null, refs: ['<c@example.com>'] },
      { mailboxId: 'mbx_x', threadKey: '<d@example.com>', refs: [] },
    ];
    const [combined, ...more] = conversationLookups(database.db, keys);
    expect(more).toEqual([]);
    const steps = await plan(combined!);
    expect(onlyKeyLookups(steps), steps.join(' | ')).toBe(true);
    expect(steps.filter((d) => /\bemails\b/.test(d))).toHaveLength(5);
  });

  it('tells the ordered scan apart (the check above can fail)', async () => {
    const scan = await plan(
      database.db.selectFrom('emails').select('conversation_id').where('mailbox_id', '=', 'mbx_x')
        .where((eb) => eb.or([eb('message_id', 'in', ['<a@example.com>']), eb('thread_key', '=', '<a@example.com>')]))
        .orderBy('seq', 'asc').limit(1).compile(),
    );
    expect(onlyKeyLookups(scan), scan.join(' | ')).toBe(false);
  });

  /** The SQL texts better-sqlite3 prepares while `work` runs (statements met for the first time). */
  async function prepared(work: () => Promise<unknown>): Promise<string[]> {
    const texts: string[] = [];
    const original = BetterSqlite3.prototype.prepare;
    BetterSqlite3.prototype.prepare = function (this: BetterSqlite3.Database, source: string) {
      texts.push(source);
      return original.call(this, source);
    } as typeof original;
    try {
      await work();
    } finally {
      BetterSqlite3.prototype.prepare = original;
    }
    return texts;
  }

  it('the periodic purge of deleted mailboxes and the blob collector search the tables that grow with mail', async () => {
    const blobs = { delete: async () => {} } as unknown as BlobStore;
    // One blob row, so the collector goes on from its page bounds to the orphan search.
    await database.db.insertInto('blobs').values({ sha256: 'a'.repeat(64), byte_size: 1, md5: '', created_at: '2020-01-01T00:00:00.000Z', inline_bytes: null }).execute();
    const texts = await prepared(async () => {
      await purgeDeletedMailboxes(database.db);
      await collectGarbageBlobs(database.db, blobs, new Date());
    });
    const reads = texts.filter((t) => /^\s*(select|delete|with)/i.test(t) && /\b(files|file_versions|emails|blobs)\b/.test(t));
    expect(reads.length).toBeGreaterThanOrEqual(3); // the purge's files lookup, the collector's page bounds and orphan search
    for (const text of reads) {
      const steps = (await database.db.executeQuery<{ detail: string }>(CompiledQuery.raw(`explain query plan ${text}`, Array((text.match(/\?/g) ?? []).length).fill(null)))).rows.map((r) => r.detail);
      const scans = steps.filter((d) => /^SCAN (files|file_versions|emails|blobs)\b/.test(d));
      expect(scans, `${text}\n${steps.join(' | ')}`).toEqual([]);
    }
  });
});
