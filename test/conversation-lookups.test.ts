import { expect, it } from 'vitest';
import { describeEachDatabase } from './harness.ts';
import { mailboxWithAddress } from './smtp-helpers.ts';
import { emailRow } from './search-seed.ts';
import { ConversationIndex, conversationLookups, type ConversationKeys } from '../src/inbound/conversations.ts';

// The group commit looks up every message's conversation in one statement (per 4,000 bound
// values) instead of one round trip per message: each lookup must find what it finds alone.
describeEachDatabase('conversation lookups of a group commit', (app) => {
  it('find, for each message, what its lookup alone finds: by Message-ID, by thread key, in the right mailbox, the earliest, or nothing', async () => {
    const user = await app().user();
    const a = await mailboxWithAddress(app(), user);
    const b = await mailboxWithAddress(app(), user);
    const { db } = app().started.deps;
    const at = new Date().toISOString();
    // Mailbox A: 40 emails in threads of four (thread keys t0…t9); B: 10, with Message-IDs of its own.
    const rows = [
      ...Array.from({ length: 40 }, (_, i) => ({ ...emailRow({ mailboxId: a.id, accountId: user.accountId, seq: i + 1, subject: 's', body: 'b', from: { address: 'x@example.com', name: null }, to: a.address, receivedAt: at }), thread_key: `<t${i % 10}@seed>` })),
      ...Array.from({ length: 10 }, (_, i) => emailRow({ mailboxId: b.id, accountId: user.accountId, seq: i + 1, subject: 's', body: 'b', from: { address: 'x@example.com', name: null }, to: b.address, receivedAt: at })),
    ];
    await db.insertInto('emails').values(rows).execute();
    const idOf = (box: string, seq: number) => `<${box}.${seq}@seed>`;
    const filler = (n: number, tag: string) => Array.from({ length: n }, (_, i) => `<filler-${tag}-${i}@example.com>`);
    const keys: ConversationKeys[] = [
      { mailboxId: a.id, threadKey: null, refs: [idOf(a.id, 7)] }, // a reply to A's 7th
      { mailboxId: a.id, threadKey: '<t3@seed>', refs: [] }, // the thread t3: its earliest (seq 4)
      { mailboxId: a.id, threadKey: '<new@example.com>', refs: [] }, // starts a conversation
      { mailboxId: b.id, threadKey: null, refs: [idOf(a.id, 7)] }, // A's message, asked in B: nothing
      { mailboxId: b.id, threadKey: idOf(b.id, 9), refs: [idOf(b.id, 2), idOf(b.id, 9)] }, // the earliest of two
      { mailboxId: a.id, threadKey: null, refs: [] }, // no keys: no lookup
      // Long References fields: the lookups no longer fit in one statement.
      ...Array.from({ length: 30 }, (_, i) => ({ mailboxId: i % 2 ? a.id : b.id, threadKey: null, refs: [...filler(199, String(i)), idOf(i % 2 ? a.id : b.id, 1 + (i % 10))] })),
      { mailboxId: a.id, threadKey: null, refs: [idOf(a.id, 7)] }, // the first lookup again
    ];
    expect(conversationLookups(db, keys).length).toBeGreaterThan(1);
    const found = await db.transaction().execute(async (trx) => {
      const together = new ConversationIndex(trx);
      await together.lookUpAll(keys);
      const out: [string | null, string | null][] = [];
      for (const k of keys) out.push([await together.find(k.mailboxId, k.threadKey, k.refs), await new ConversationIndex(trx).find(k.mailboxId, k.threadKey, k.refs)]);
      return out;
    });
    for (const [i, [together, alone]] of found.entries()) expect(together, `lookup ${i}`).toBe(alone);
    expect(found.slice(0, 6).map(([together]) => together)).toEqual(['c7', 'c4', null, null, 'c2', null]);
    expect(found.slice(6, 36).every(([together], i) => together === `c${1 + (i % 10)}`)).toBe(true);
  });
});
