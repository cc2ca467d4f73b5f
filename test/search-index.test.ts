import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate, openDatabase, type Database } from '../src/db/database.ts';
import { DATABASES } from './harness.ts';
import { createSearchIndex, MAX_RANKED_MATCHES, type EmailDoc, type SearchIndex } from '../src/search/search-index.ts';
import { parseQuery } from '../src/search/query.ts';

// One contract for both search indexes (SQLite FTS5, Postgres tsvector): the same documents and
// queries give the same matches on each database.

const doc = (id: string, d: Partial<EmailDoc>): EmailDoc => ({ emailId: id, mailboxId: 'bkt_x', subject: '', sender: '', recipients: '', body: '', names: '', attachments: '', attachmentShas: [], ...d });

for (const kind of DATABASES) {
  describe(`search index contract [${kind}]`, () => {
    let database: Database;
    let index: SearchIndex;
    let dir: string | undefined;
    const schema = `t_idx_${randomBytes(4).toString('hex')}`;

    beforeAll(async () => {
      if (kind === 'sqlite') {
        dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cubby-idx-'));
        database = await openDatabase(`sqlite:${path.join(dir, 'db.sqlite')}`);
      } else {
        database = await openDatabase(process.env.CUBBY_TEST_POSTGRES_URL!, schema);
      }
      await migrate(database);
      index = createSearchIndex(database.dialect, 'english');
      await database.db.transaction().execute((trx) =>
        index.putEmails(trx, [
          doc('e1', { subject: 'March invoice from Acme', sender: 'Acme Billing billing@acme.example', recipients: 'bob@home.example', body: 'Please pay the amount due.', names: 'invoice-march.pdf' }),
          doc('e2', { subject: 'Lunch', sender: 'Carol carol@friends.example', body: 'The invoice for lunch is attached. Acme was busy.' }),
          doc('e3', { subject: 'Holiday photos', sender: 'dave@family.example', recipients: 'acme@home.example', body: 'See attached', names: 'beach.jpg', attachments: 'A scanned receipt mentioning zebrafish and the march invoice.' }),
          doc('e4', { subject: 'Café meeting', body: 'We meet at the café near the station.' }),
        ]),
      );
      await database.db.transaction().execute(async (trx) => {
        await index.putText(trx, { sha256: 'a'.repeat(64), status: 'done', text: 'Quarterly report: revenue grew. Invoices are attached.', pages: 2, error: null, extractedAt: new Date().toISOString() });
        await index.putText(trx, { sha256: 'b'.repeat(64), status: 'encrypted', text: null, pages: null, error: 'password', extractedAt: new Date().toISOString() });
      });
    });

    afterAll(async () => {
      await database?.close();
      if (dir) fs.rmSync(dir, { recursive: true, force: true });
      if (kind === 'postgres') {
        const c = new pg.Client({ connectionString: process.env.CUBBY_TEST_POSTGRES_URL });
        await c.connect();
        await c.query(`drop schema if exists "${schema}" cascade`);
        await c.end();
      }
    });

    async function emails(q: string, mailboxIds?: string[]): Promise<string[]> {
      const m = index.emailMatches(parseQuery(q), mailboxIds);
      if (!m) return [];
      const r = await sql<{ email_id: string; rank: number }>`select email_id, rank from (${m}) as m order by rank, email_id`.execute(database.db);
      return r.rows.map((x) => x.email_id);
    }
    async function texts(q: string): Promise<string[]> {
      const m = index.textMatches(parseQuery(q));
      if (!m) return [];
      const r = await sql<{ sha256: string }>`select sha256 from (${m}) as m order by rank`.execute(database.db);
      return r.rows.map((x) => x.sha256.slice(0, 1));
    }

    it('matches every word, anywhere in the document, with stemming', async () => {
      expect((await emails('invoice')).sort()).toEqual(['e1', 'e2', 'e3']);
      expect((await emails('invoices acme')).sort()).toEqual(['e1', 'e2', 'e3']);
      expect(await emails('zebrafish')).toEqual(['e3']);
      expect(await emails('nothing-like-this')).toEqual([]);
    });

    it('narrows to given mailboxes', async () => {
      await database.db.transaction().execute((trx) => index.putEmails(trx, [doc('e7', { mailboxId: 'bkt_01Other', subject: 'invoice elsewhere' })]));
      expect(await emails('invoice', ['bkt_01Other'])).toEqual(['e7']);
      expect((await emails('invoice', ['bkt_x', 'bkt_01Other'])).sort()).toEqual(['e1', 'e2', 'e3', 'e7']);
      expect(await emails('invoice', ['bkt_none'])).toEqual([]);
      await database.db.transaction().execute((trx) => index.removeEmails(trx, ['e7']));
    });

    it('ranks a subject match above a body match', async () => {
      const r = await emails('invoice');
      expect(r[0]).toBe('e1');
    });

    it('matches phrases in order only', async () => {
      expect((await emails('"march invoice"')).sort()).toEqual(['e1', 'e3']);
      expect(await emails('"acme invoice"')).toEqual([]);
    });

    it('leaves out negated words and phrases', async () => {
      expect((await emails('invoice -lunch')).sort()).toEqual(['e1', 'e3']);
      expect(await emails('invoice -"march invoice"')).toEqual(['e2']);
    });

    it('restricts from:, to:, subject: and filename: to their fields', async () => {
      expect(await emails('from:acme')).toEqual(['e1']);
      expect(await emails('to:acme')).toEqual(['e3']);
      expect(await emails('from:billing@acme.example')).toEqual(['e1']);
      expect(await emails('subject:invoice')).toEqual(['e1']);
      expect(await emails('filename:invoice-march.pdf')).toEqual(['e1']);
      expect(await emails('invoice -from:acme').then((r) => r.sort())).toEqual(['e2', 'e3']);
    });

    it('treats query syntax characters as plain text (no injection)', async () => {
      for (const q of ['invoice"', 'invoice*', 'NEAR(invoice acme)', 'invoice:acme', "invoice' OR 1=1 --", 'invoice & acme | !x', 'invoice AND OR NOT', '{subject}:invoice', 'invoice^2']) {
        await expect(emails(q), q).resolves.toBeInstanceOf(Array);
      }
      expect(await emails('"acme" NEAR')).toEqual([]); // "near" is a word here: no document has both
      expect((await emails('NEAR invoice')).length).toBe(0);
    });

    it('replaces a document when it is indexed again, and removes it', async () => {
      await database.db.transaction().execute((trx) => index.putEmails(trx, [doc('e5', { subject: 'first words' })]));
      await database.db.transaction().execute((trx) => index.putEmails(trx, [doc('e5', { subject: 'second words' })]));
      expect(await emails('first')).toEqual([]);
      expect(await emails('second')).toEqual(['e5']);
      await database.db.transaction().execute((trx) => index.removeEmails(trx, ['e5']));
      expect(await emails('second')).toEqual([]);
    });

    it('indexes a document whose fields hold lone surrogates (broken UTF-16 from a hostile message) by its other words', async () => {
      const broken = 'lonely\ud800 surrogate\udfff';
      const words = Array.from({ length: 80 }, (_, i) => `filler${i}`).join(' ');
      await database.db.transaction().execute((trx) => index.putEmails(trx, [doc('e8', { subject: `surrogatesubject ${broken}`, sender: broken, body: `${broken} surrogatebody ${words}`, names: `${broken}.txt` })]));
      expect(await emails('surrogatesubject')).toEqual(['e8']);
      expect(await emails('surrogatebody')).toEqual(['e8']);
    });

    it('indexes hundreds of kilobytes of random words in every field (Postgres caps tsvectors at 1 MB)', async () => {
      // ~800 KB of distinct words: uncapped, its tsvector would pass Postgres's 1 MB limit.
      const noise = () => Array.from({ length: 75_000 }, () => randomBytes(5).toString('hex')).join(' ');
      await database.db.transaction().execute(async (trx) => {
        await index.putEmails(trx, [doc('e6', { subject: 'hugefirstword', body: noise(), attachments: noise(), names: noise().slice(0, 200_000) })]);
        await index.putText(trx, { sha256: 'c'.repeat(64), status: 'done', text: `hugetextword ${noise()}`, pages: null, error: null, extractedAt: new Date().toISOString() });
      });
      expect(await emails('hugefirstword')).toEqual(['e6']);
      expect(await texts('hugetextword')).toEqual(['c']);
    }, 60_000);

    it('pages ranked matches by keyset (rank, id): pages of 4 give the one long page, without repeats', async () => {
      // Ranks differ (the word in the subject, or 1-3 times in the body) and tie (same text).
      const docs = Array.from({ length: 30 }, (_, i) => doc(`p${String(i).padStart(2, '0')}`, { mailboxId: 'bkt_01Pages', subject: i % 7 === 0 ? 'keysetword report' : 'report', body: `${'keysetword '.repeat(1 + (i % 3))} filler ${'other '.repeat(i % 5)}` }));
      await database.db.transaction().execute((trx) => index.putEmails(trx, docs));
      const q = parseQuery('keysetword');
      const ranked = await index.rankedEmails(database.db, q, ['bkt_01Pages'], null, 100);
      expect(ranked.truncated).toBe(false);
      const whole = ranked.rows;
      expect(whole).toHaveLength(30);
      const paged: { email_id: string; rank: number }[] = [];
      for (let page = (await index.rankedEmails(database.db, q, ['bkt_01Pages'], null, 4)).rows; page.length; ) {
        paged.push(...page);
        const last = page.at(-1)!;
        const next = await index.rankedEmails(database.db, q, ['bkt_01Pages'], [Number(last.rank), last.email_id], 4);
        expect(next.truncated).toBe(false);
        page = next.rows;
      }
      expect(paged.map((r) => r.email_id)).toEqual(whole.map((r) => r.email_id));
      expect(new Set(paged.map((r) => r.email_id)).size).toBe(30);
      for (let i = 1; i < whole.length; i++) expect(whole[i]!.rank).toBeGreaterThanOrEqual(whole[i - 1]!.rank);
      // The five with the word in the subject (weighted 8) come first.
      expect(whole.slice(0, 5).map((r) => r.email_id).sort()).toEqual(['p00', 'p07', 'p14', 'p21', 'p28']);
      await database.db.transaction().execute((trx) => index.removeEmails(trx, docs.map((d) => d.emailId)));
    });

    it("ranks a mailbox's matches before any cut, however many matches other mailboxes have", async () => {
      // More matches elsewhere than are ranked (MAX_RANKED_MATCHES), all newer than the one here.
      const mine = doc('m0', { mailboxId: 'bkt_01Mine', subject: 'floodword here' });
      const theirs = Array.from({ length: MAX_RANKED_MATCHES + 50 }, (_, i) => doc(`x${String(i).padStart(5, '0')}`, { mailboxId: 'bkt_01Theirs', subject: 'floodword floodword there', body: 'floodword' }));
      await database.db.transaction().execute(async (trx) => {
        await index.putEmails(trx, [mine]);
        await index.putEmails(trx, theirs);
      });
      const q = parseQuery('floodword');
      expect(await index.rankedEmails(database.db, q, ['bkt_01Mine'], null, 10)).toEqual({ rows: [{ email_id: 'm0', rank: expect.any(Number) }], truncated: false });
      // A scope of more mailboxes than MATCH narrows by is checked on the docs table: same answer.
      const many = [...Array.from({ length: 40 }, (_, i) => `bkt_01Empty${i}`), 'bkt_01Mine'];
      expect(await index.rankedEmails(database.db, q, many, null, 10)).toEqual({ rows: [{ email_id: 'm0', rank: expect.any(Number) }], truncated: false });
      // Over the cap: a page says so (the cut is the same on every page, the last one included).
      const other = await index.rankedEmails(database.db, q, ['bkt_01Theirs'], null, 5);
      expect(other.rows).toHaveLength(5);
      expect(other.truncated).toBe(true);
      expect(other.rows.map((r) => r.email_id)).not.toContain('m0');
      const last = other.rows.at(-1)!;
      const past = await index.rankedEmails(database.db, q, ['bkt_01Theirs'], [Number.MAX_VALUE, last.email_id], 5);
      expect(past).toEqual({ rows: [], truncated: true });
      // The same over a scope MATCH does not narrow (SQLite's one newest-first walk).
      const wide = await index.rankedEmails(database.db, q, [...many, 'bkt_01Theirs'], null, 5);
      expect(wide.truncated).toBe(true);
      expect(wide.rows.map((r) => r.email_id)).toEqual(other.rows.map((r) => r.email_id));
      expect(await index.rankedEmails(database.db, q, [], null, 10)).toEqual({ rows: [], truncated: false });
      // Both mailboxes: the newest MAX_RANKED_MATCHES are ranked, so the oldest match is past the cut.
      const both = await index.rankedEmails(database.db, q, ['bkt_01Mine', 'bkt_01Theirs'], null, MAX_RANKED_MATCHES + 100);
      expect(both.rows).toHaveLength(MAX_RANKED_MATCHES);
      expect(both.truncated).toBe(true);
      expect(both.rows.map((r) => r.email_id)).not.toContain('m0');
      // Exactly at the cap: every match ranked, not truncated.
      await database.db.transaction().execute((trx) => index.removeEmails(trx, theirs.slice(0, 51).map((d) => d.emailId)));
      const exact = await index.rankedEmails(database.db, q, ['bkt_01Mine', 'bkt_01Theirs'], null, MAX_RANKED_MATCHES + 100);
      expect(exact.rows).toHaveLength(MAX_RANKED_MATCHES);
      expect(exact.truncated).toBe(false);
      expect(exact.rows.map((r) => r.email_id)).toContain('m0');
      await database.db.transaction().execute((trx) => index.removeEmails(trx, [mine, ...theirs].map((d) => d.emailId)));
    }, 180_000);

    it('searches extracted text; contents without text never match', async () => {
      expect(await texts('invoice revenue')).toEqual(['a']);
      expect(await texts('password')).toEqual([]);
      expect(index.textMatches(parseQuery('from:acme'))).toBeNull();
    });
  });
}
