import { expect, it } from 'vitest';
import { describeEachDatabase } from './harness.ts';
import { inbox } from './emails-helpers.ts';
import { dbOf } from './factories.ts';
import { webSignIn } from './account-helpers.ts';
import { emailRow, storeEmails, storeFiles } from './search-seed.ts';
import { searchIndex, MAX_RANKED_MATCHES } from '../src/search/search-index.ts';

// At most MAX_RANKED_MATCHES emails and as many files are ranked per query, the newest, on both
// databases; `truncated` says when a query had more matches in scope than that. Another account's
// matches never count towards the cap nor set the flag.

const word = () => `zt${Math.random().toString(36).slice(2, 9)}`;

describeEachDatabase('search cap', (app) => {
  it('ranks the newest 10,000 files and emails of the scope and says when it cut', async () => {
    const owner = await app().user();
    const stranger = await app().user();
    const mine = await inbox(app(), owner);
    const theirs = await inbox(app(), stranger);
    const w = word();
    const rare = word();
    const db = dbOf(app());
    const index = searchIndex(app().started.deps);
    const search = async (key: string, query: Record<string, string | number>) => {
      const r = await app().request('GET', '/v1/search', { key, query });
      expect(r.status, r.text).toBe(200);
      return r.body.data as { results: any[]; truncated: boolean; pagination: { has_more: boolean } };
    };

    // The stranger's copy first (oldest), then the owner's: one file with a rare word, then more
    // files than are ranked (sharing one text), all newer.
    await storeFiles(db, index, { id: theirs.id, accountId: stranger.accountId }, [`${w} shared`]);
    const [oldest] = await storeFiles(db, index, { id: mine.id, accountId: owner.accountId }, [`${w} ${rare} first`]);
    await storeFiles(db, index, { id: mine.id, accountId: owner.accountId }, Array.from({ length: MAX_RANKED_MATCHES }, () => `${w} many`));

    const files = await search(owner.key, { q: w, kind: 'file', limit: 50 });
    expect(files.truncated).toBe(true);
    // The dashboard's search page says so too, and how to reach older matches; not when nothing was cut.
    const web = await webSignIn(app(), owner.email);
    const cutPage = await web.get(`/search?q=${w}`);
    expect(cutPage.status).toBe(200);
    expect(cutPage.text).toContain(`only the newest ${MAX_RANKED_MATCHES.toLocaleString('en-US')} matching emails`);
    expect((await web.get(`/search?q=${encodeURIComponent(`${w} ${rare}`)}`)).text).not.toContain('only the newest');
    expect(files.results).toHaveLength(50);
    expect(files.results.every((r) => r.mailbox_id === mine.id && r.kind === 'file')).toBe(true);
    // The oldest match is past the cut: even its rare word's better rank does not bring it back.
    expect(files.results.map((r) => r.id)).not.toContain(oldest);
    // Narrowed, it is found, and nothing was cut.
    const narrow = await search(owner.key, { q: `${w} ${rare}`, kind: 'file' });
    expect(narrow.truncated).toBe(false);
    expect(narrow.results.map((r) => r.id)).toEqual([oldest]);
    // The stranger's one match: not cut by the owner's many, and only the stranger's own.
    const other = await search(stranger.key, { q: w });
    expect(other.truncated).toBe(false);
    expect(other.results.map((r) => r.mailbox_id)).toEqual([theirs.id]);

    // Emails: one over the cap in the owner's mailbox.
    const at = (i: number) => new Date(Date.UTC(2025, 0, 1) + i * 60_000).toISOString();
    const from = { address: 'sender@example.com', name: 'Sender' };
    await storeEmails(db, index, Array.from({ length: MAX_RANKED_MATCHES + 1 }, (_, i) => emailRow({ mailboxId: mine.id, accountId: owner.accountId, seq: i + 1, subject: `Note ${i}`, body: `${w} body`, from, to: mine.address, receivedAt: at(i) })));
    const emails = await search(owner.key, { q: w, kind: 'email', limit: 10 });
    expect(emails.truncated).toBe(true);
    expect(emails.results).toHaveLength(10);
    expect((await search(owner.key, { q: w, limit: 10 })).truncated).toBe(true);
    expect((await search(owner.key, { q: `${w} ${rare}` })).truncated).toBe(false);
    // Dates join `emails` in one query and rank every match: never cut.
    expect((await search(owner.key, { q: `${w} after:2020-01-01`, kind: 'email', limit: 10 })).truncated).toBe(false);

    // Surface A and MCP share the service; surface A says it too.
    const a = await app().request('GET', '/api/v1/search', { key: owner.key, query: { q: w, kind: 'file', limit: 5 } });
    expect(a.status, a.text).toBe(200);
    expect(a.body.data.truncated).toBe(true);
  }, 240_000);
});
