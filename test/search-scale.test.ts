import { expect, it } from 'vitest';
import { describeEachDatabase } from './harness.ts';
import { inbox } from './emails-helpers.ts';
import { dbOf } from './factories.ts';
import { emailRow, storeEmails } from './search-seed.ts';
import { searchIndex } from '../src/search/search-index.ts';

// Search over more mail than SMTP could deliver in a test, seeded through the store layer: tenancy
// holds when another account has far more matches, paging is stable past 1,000 results, and withheld
// mail that outranks everything is skipped batch after batch.

const word = () => `zs${Math.random().toString(36).slice(2, 9)}`;

describeEachDatabase('search at scale', (app) => {
  it("never matches a foreign mailbox's mail, pages 1,050 results without repeats, and skips withheld mail that ranks first", async () => {
    const owner = await app().user();
    const stranger = await app().user();
    const mine = await inbox(app(), owner);
    const theirs = await inbox(app(), stranger);
    const w = word();
    const db = dbOf(app());
    const index = searchIndex(app().started.deps);
    const at = (i: number) => new Date(Date.UTC(2025, 0, 1) + i * 60_000).toISOString();
    const from = { address: 'sender@example.com', name: 'Sender' };
    // Mine first (older), theirs after (newer, and more of them): a search ranked before narrowing
    // would meet theirs first.
    const clean = Array.from({ length: 1050 }, (_, i) => emailRow({ mailboxId: mine.id, accountId: owner.accountId, seq: i + 1, subject: `Note ${i}`, body: `${w} ${'filler '.repeat(i % 9)}`, from, to: mine.address, receivedAt: at(i) }));
    const junk = Array.from({ length: 60 }, (_, i) => emailRow({ mailboxId: mine.id, accountId: owner.accountId, seq: 2000 + i, subject: `${w} ${w} ${w}`, body: `${w} ${w}`, from, to: mine.address, receivedAt: at(2000 + i), label: 'Junk' }));
    const foreign = Array.from({ length: 1500 }, (_, i) => emailRow({ mailboxId: theirs.id, accountId: stranger.accountId, seq: i + 1, subject: `${w} offer`, body: `${w} ${w}`, from, to: theirs.address, receivedAt: at(5000 + i) }));
    await storeEmails(db, index, [...clean, ...junk]);
    await storeEmails(db, index, foreign);

    // Every page of 100 to the end, across all the owner's mailboxes.
    const seen: string[] = [];
    const scores: number[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const r = await app().request('GET', '/v1/search', { key: owner.key, query: { q: w, kind: 'email', limit: 100, cursor } });
      expect(r.status, r.text).toBe(200);
      for (const x of r.body.data.results) {
        seen.push(x.id);
        scores.push(x.score);
        expect(x.mailbox_id).toBe(mine.id);
      }
      cursor = r.body.data.pagination.next_cursor ?? undefined;
      pages++;
    } while (cursor && pages < 20);
    expect(pages).toBe(11); // the last page starts at depth 1,000
    expect(seen).toHaveLength(1050);
    expect(new Set(seen).size).toBe(1050);
    expect([...seen].sort()).toEqual(clean.map((e) => e.id).sort());
    for (let i = 1; i < scores.length; i++) expect(scores[i]).toBeLessThanOrEqual(scores[i - 1]!);

    // One mailbox, a small page: the 60 junk emails outrank every clean one and are skipped.
    const one = await app().request('GET', '/v1/search', { key: owner.key, query: { q: w, mailbox_id: mine.id, kind: 'email', limit: 5 } });
    expect(one.status, one.text).toBe(200);
    expect(one.body.data.results.map((x: any) => x.id)).toEqual(seen.slice(0, 5));

    // The other account sees only its own.
    const other = await app().request('GET', '/v1/search', { key: stranger.key, query: { q: w, limit: 100 } });
    expect(other.body.data.results).toHaveLength(100);
    expect(other.body.data.results.every((x: any) => x.mailbox_id === theirs.id)).toBe(true);
    expect(other.body.data.pagination.has_more).toBe(true);
    const peek = await app().request('GET', '/v1/search', { key: stranger.key, query: { q: w, mailbox_id: mine.id } });
    expect(peek.status).toBe(404);

    // The emails list combines q with its own order and cursor.
    const list = await app().request('GET', `/v1/mailboxes/${mine.id}/emails`, { key: owner.key, query: { q: w, limit: 100 } });
    expect(list.status, list.text).toBe(200);
    expect(list.body.data.emails).toHaveLength(100);
    expect(list.body.data.emails.every((e: any) => clean.some((c) => c.id === e.id))).toBe(true);
  }, 180_000);
});
