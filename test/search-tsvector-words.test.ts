import fs from 'node:fs';
import path from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { normalizeText } from '../src/search/query.ts';
import { functionArguments, textWords, type WordPositions } from '../src/search/word-positions.ts';
import { LexemeCache, lexemeCache } from '../src/search/lexeme-cache.ts';
import { labelNow, mailboxWithAddress, sendMail } from './smtp-helpers.ts';
import { startTestApp, type TestApp } from './harness.ts';

// On Postgres a long text's tsvector is built from its distinct words and their positions
// (src/search/word-positions.ts, migration 0028). It must be exactly the tsvector to_tsvector makes
// of the whole text, or searches and their ranking would change: compared here on real messages and
// on generated texts made to hit the parser's and tsvector's edges.

const FIXTURES = path.join(import.meta.dirname, 'fixtures', 'eml');
const fixtureTexts = fs
  .readdirSync(FIXTURES, { recursive: true, withFileTypes: true })
  .filter((e) => e.isFile() && e.name.endsWith('.eml'))
  .map((e) => fs.readFileSync(path.join(e.parentPath, e.name), 'utf8'));

/** A deterministic generator, so that a failure can be run again. */
function random(seed: number) {
  return () => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return seed / 0x7fffffff;
  };
}

const VOCABULARY = ('the a an and of to in is it report reports reporting reported invoice Invoice INVOICE shipping shipped ' +
  'running runs ran 2026 007 12345678901234567890 10am 2nd abc123 a1b2 0x1f e5 1e 12e x1e5 mailbox mailboxes cubby s z').split(' ');

function generated(rnd: () => number, words: number, vocabulary = VOCABULARY): string {
  const out: string[] = [];
  for (let i = 0; i < words; i++) out.push(vocabulary[Math.floor(rnd() * vocabulary.length)]!);
  return out.join(rnd() < 0.5 ? ' ' : ' -- ');
}

/**
 * What textWords must return, written plainly: the words of normalizeText's result, lowercased,
 * unless a character outside ASCII letters and digits is a letter or digit, a word starts with
 * digits, an e and a digit, a word is too long or there are too many or too few.
 */
function reference(text: string, minWords: number): WordPositions | null {
  const normalized = normalizeText(text);
  if (/[^A-Za-z0-9 ]/.test(normalized)) return null;
  const all = normalized.toLowerCase().split(' ').filter(Boolean);
  if (all.length < minWords || all.length > 16_383 || all.some((w) => w.length > 2046 || /^[0-9]+e[0-9]/.test(w))) return null;
  const out: WordPositions = { words: [], positions: [] };
  all.forEach((w, i) => {
    const at = out.words.indexOf(w);
    if (at < 0) {
      out.words.push(w);
      out.positions.push([i + 1]);
    } else out.positions[at]!.push(i + 1);
  });
  return out;
}

describe('textWords', () => {
  it('lists each distinct word once, in order of first use, with its positions', () => {
    const words = textWords('The report, the REPORT and the invoice.', 1)!;
    expect(words).toEqual({ words: ['the', 'report', 'and', 'invoice'], positions: [[1, 3, 6], [2, 4], [5], [7]] });
    expect(functionArguments(words)).toEqual({ words: 'the report and invoice', positions: ['1,3,6', '2,4', '5', '7'] });
  });

  it('finds the words normalizeText leaves, in one pass', () => {
    const rnd = random(5);
    const pieces = ['Report', 'the', '2026', 'a1', '12e', '1e5', ' ', ', ', '\n', '--', '\u00a0', '\u2014', '😀', 'é', '\u212A', '²', 'x'.repeat(2047), '\ud800', 'INVOICE', 'e5'];
    const texts = [...fixtureTexts, ...Array.from({ length: 2000 }, () => Array.from({ length: 1 + Math.floor(rnd() * 12) }, () => pieces[Math.floor(rnd() * pieces.length)]).join(rnd() < 0.5 ? ' ' : ''))];
    let some = 0;
    for (const text of texts) {
      const expected = reference(text, 1);
      if (expected) some++;
      expect(textWords(text, 1), JSON.stringify(text.slice(0, 80))).toEqual(expected);
    }
    expect(some).toBeGreaterThan(200);
  });

  it('leaves to to_tsvector what it cannot promise to split as Postgres would', () => {
    expect(textWords('only three words', 64)).toBeNull();
    expect(textWords('café au lait', 1)).toBeNull();
    expect(textWords('\u212Aelvin sign', 1)).toBeNull();
    expect(textWords('a 5e10x float', 1)).toBeNull();
    expect(textWords('1e5', 1)).toBeNull();
    expect(textWords(`long ${'y'.repeat(2047)} word`, 1)).toBeNull();
    expect(textWords(Array(16_384).fill('w').join(' '), 1)).toBeNull();
    expect(textWords(Array(16_383).fill('w').join(' '), 1)?.positions[0]).toHaveLength(16_383);
    expect(textWords(`e5 x1e5 12e ${'y'.repeat(2046)}`, 1)?.words).toEqual(['e5', 'x1e5', '12e', 'y'.repeat(2046)]);
  });
});

describe.skipIf(!process.env.CUBBY_TEST_POSTGRES_URL)('tsvectors from distinct words on Postgres', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp('postgres');
  });
  afterAll(() => app?.stop());

  /** Both tsvectors of each text as text (lexemes, positions and weights), for the texts sent by word. */
  async function compare(texts: string[], config: string) {
    const { db } = app.started.deps;
    let byWord = 0;
    for (const text of texts) {
      const normalized = normalizeText(text);
      const words = textWords(text, 1);
      if (!words) continue;
      byWord++;
      const args = functionArguments(words);
      const { rows } = await sql<{ built: string; whole: string }>`select search_tsvector_from_words(${config}::regconfig, ${args.words}, ${args.positions}::text[])::text as built,
        to_tsvector(${config}::regconfig, ${normalized})::text as whole`.execute(db);
      expect(rows[0]!.built, text.slice(0, 200)).toBe(rows[0]!.whole);
    }
    return byWord;
  }

  it('matches to_tsvector on the real messages of the fixtures', async () => {
    const byWord = await compare(fixtureTexts, 'english');
    expect(byWord).toBeGreaterThanOrEqual(10);
  });

  it('matches to_tsvector on generated texts in several configurations', async () => {
    const rnd = random(20261128);
    const texts = Array.from({ length: 60 }, (_, i) => generated(rnd, 1 + Math.floor(rnd() * (i < 50 ? 800 : 5000))));
    for (const config of ['english', 'simple', 'german']) expect(await compare(texts, config)).toBe(texts.length);
  });

  it('matches to_tsvector on random words of letters and digits (the parser reads each as one token)', async () => {
    const rnd = random(7);
    const alphabet = 'abcdeeeexyz0123456789';
    const words = Array.from({ length: 600 }, () => Array.from({ length: 1 + Math.floor(rnd() * 8) }, () => alphabet[Math.floor(rnd() * alphabet.length)]).join(''));
    // Digits, an e and a digit begin a float: such texts go to to_tsvector whole (checked above).
    const vocabulary = words.filter((w) => !/^[0-9]+e[0-9]/.test(w));
    expect(vocabulary.length).toBeGreaterThan(400);
    const texts = Array.from({ length: 30 }, () => generated(rnd, 300, vocabulary));
    expect(await compare(texts, 'english')).toBe(texts.length);
  });

  it('keeps 255 positions of a lexeme, as to_tsvector does, when several words share it', async () => {
    const texts = [Array(300).fill('report').join(' '), Array(200).fill('report reports').join(' '), `${Array(254).fill('runs').join(' ')} running ran`];
    expect(await compare(texts, 'english')).toBe(3);
  });

  it('builds the tsvector here from the lexemes learned for its words, exactly as to_tsvector does', async () => {
    const { db } = app.started.deps;
    const rnd = random(11);
    const texts = [
      ...fixtureTexts,
      ...Array.from({ length: 20 }, () => generated(rnd, 1 + Math.floor(rnd() * 3000))),
      Array(300).fill('report').join(' '),
      Array(200).fill('report reports').join(' '),
      'the and of a',
    ];
    for (const config of ['english', 'simple']) {
      const cache = new LexemeCache(db, config);
      let built = 0;
      for (const text of texts) {
        const normalized = normalizeText(text);
        const words = textWords(text, 1);
        if (!words) continue;
        // Not known yet: left to Postgres while the words are learned.
        if (cache.tsvector(words) === null) await cache.settled();
        const tsvector = cache.tsvector(words);
        expect(tsvector).not.toBeNull();
        built++;
        const { rows } = await sql<{ built: string; whole: string }>`select ${tsvector}::tsvector::text as built, to_tsvector(${config}::regconfig, ${normalized})::text as whole`.execute(db);
        expect(rows[0]!.built, text.slice(0, 200)).toBe(rows[0]!.whole);
      }
      expect(built).toBeGreaterThanOrEqual(30);
    }
  });

  it('parses the text whole in a configuration whose dictionaries read words together (a thesaurus)', async () => {
    const { db } = app.started.deps;
    const schema = (await sql<{ s: string }>`select current_schema() as s`.execute(db)).rows[0]!.s;
    await sql.raw(`create text search dictionary ${schema}.thesaurus (template = thesaurus, dictfile = thesaurus_sample, dictionary = english_stem)`).execute(db);
    await sql.raw(`create text search configuration ${schema}.with_thesaurus (copy = english)`).execute(db);
    await sql.raw(`alter text search configuration ${schema}.with_thesaurus alter mapping for asciiword with ${schema}.thesaurus, english_stem`).execute(db);
    const config = `${schema}.with_thesaurus`;
    const text = generated(random(3), 500, [...VOCABULARY, 'one', 'two', 'three', 'supernovae', 'stars', 'booking', 'tickets']);
    expect(await compare([text], config)).toBe(1);
    // Word by word would have been wrong here: "one two" is one thesaurus entry, "one" another.
    const words = functionArguments(textWords(text, 1)!);
    const { rows } = await sql<{ naive: string; whole: string }>`select (select string_agg('''' || l.lexeme || ''':' || (${words.positions}::text[])[p], ' ')::tsvector
        from unnest(to_tsvector(${config}::regconfig, ${words.words})) l, unnest(l.positions) p)::text as naive, to_tsvector(${config}::regconfig, ${normalizeText(text)})::text as whole`.execute(db);
    expect(rows[0]!.naive).not.toBe(rows[0]!.whole);
    // Nor are its words' lexemes kept to build tsvectors here.
    const cache = new LexemeCache(db, config);
    expect(cache.tsvector(textWords(text, 1)!)).toBeNull();
    await cache.settled();
    expect(cache.tsvector(textWords(text, 1)!)).toBeNull();
  });

  it('finds received mail by stem and phrase once its words are known and Cubby builds the body tsvector', async () => {
    const user = await app.user();
    const box = await mailboxWithAddress(app, user);
    const marker = `zq${Math.random().toString(36).slice(2, 8)}x`;
    const filler = generated(random(9), 80);
    const body = `${filler} the quarterly shipment reports ${marker} invoice. ${filler}`;
    const [first] = (await sendMail(app, { to: box.address, subject: 'first', text: body })).emailIds;
    // The first message taught the cache its words: the second one's tsvector is built by Cubby.
    const cache = lexemeCache(app.started.deps.db, app.started.deps.config.search.language);
    await cache.settled();
    expect(cache.tsvector(textWords(body, 1)!)).not.toBeNull();
    const [second] = (await sendMail(app, { to: box.address, subject: 'second', text: body })).emailIds;
    await labelNow(app);
    const found = async (q: string) => {
      const res = await app.request('GET', `/v1/mailboxes/${box.id}/emails`, { key: user.key, query: { q } });
      expect(res.status, res.text).toBe(200);
      return res.body.data.emails.map((e: { id: string }) => e.id).sort();
    };
    expect(await found(marker)).toEqual([first, second].sort());
    expect(await found('"quarterly shipment reporting"')).toEqual([first, second].sort());
    expect(await found(`"reports ${marker} invoice"`)).toEqual([first, second].sort());
    expect(await found('"shipment quarterly"')).toEqual([]);
  });
});
