import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CompiledQuery } from 'kysely';
import { migrate, openDatabase, type Database } from '../src/db/database.ts';
import { conversationLookup } from '../src/inbound/conversations.ts';

// The conversation lookup runs for every received message with a Message-ID, inside the group
// commit. SQLite has no table statistics unless ANALYZE has run, and planned the lookup as a
// WHERE … OR … ORDER BY seq LIMIT 1 from the (mailbox_id, seq) index: it read the mailbox's emails
// in order until one matched, all of them for a message that starts a conversation. Behaviour
// (replies join, unknown parents) is tested end to end on both databases in smtp-receive.test.ts;
// Postgres plans by its statistics, not by the query's shape, so the plan is checked on SQLite.
describe('conversation lookup plan [sqlite]', () => {
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

  it('reads emails only through the Message-ID and thread-key indexes', async () => {
    const refs = ['<a@example.com>', '<b@example.com>'];
    for (const [threadKey, refsOf] of [['<a@example.com>', refs], ['<c@example.com>', []], [null, refs], [null, ['<a@example.com>']]] as const) {
      const steps = await plan(conversationLookup(database.db, 'mbx_x', threadKey, [...refsOf])!);
      expect(onlyKeyLookups(steps), steps.join(' | ')).toBe(true);
    }
    expect(conversationLookup(database.db, 'mbx_x', null, [])).toBeNull();
  });

  it('tells the ordered scan apart (the check above can fail)', async () => {
    const scan = await plan(
      database.db.selectFrom('emails').select('conversation_id').where('mailbox_id', '=', 'mbx_x')
        .where((eb) => eb.or([eb('message_id', 'in', ['<a@example.com>']), eb('thread_key', '=', '<a@example.com>')]))
        .orderBy('seq', 'asc').limit(1).compile(),
    );
    expect(onlyKeyLookups(scan), scan.join(' | ')).toBe(false);
  });
});
