import fs from 'node:fs';
import path from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { normalizeText } from '../src/search/query.ts';
import { wordPositions } from '../src/search/word-positions.ts';
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

describe('wordPositions', () => {
  it('lists each distinct word once, in order of first use, with its positions', () => {
    expect(wordPositions(normalizeText('The report, the REPORT and the invoice.'), 1)).toEqual({
      words: 'the report and invoice',
      positions: ['1,3,6', '2,4', '5', '7'],
    });
  });

  it('leaves to to_tsvector what it cannot promise to split as Postgres would', () => {
    expect(wordPositions('only three words', 64)).toBeNull();
    expect(wordPositions('café au lait', 1)).toBeNull();
    expect(wordPositions('\u212Aelvin sign', 1)).toBeNull();
    expect(wordPositions('a 5e10x float', 1)).toBeNull();
    expect(wordPositions('1e5', 1)).toBeNull();
    expect(wordPositions(`long ${'y'.repeat(2047)} word`, 1)).toBeNull();
    expect(wordPositions(Array(16_384).fill('w').join(' '), 1)).toBeNull();
    expect(wordPositions(Array(16_383).fill('w').join(' '), 1)?.positions[0]?.split(',')).toHaveLength(16_383);
    expect(wordPositions(`e5 x1e5 12e ${'y'.repeat(2046)}`, 1)?.words).toBe(`e5 x1e5 12e ${'y'.repeat(2046)}`);
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
      const words = wordPositions(normalized, 1);
      if (!words) continue;
      byWord++;
      const { rows } = await sql<{ built: string; whole: string }>`select search_tsvector_from_words(${config}::regconfig, ${words.words}, ${words.positions}::text[])::text as built,
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
    const words = wordPositions(normalizeText(text), 1)!;
    const { rows } = await sql<{ naive: string; whole: string }>`select (select string_agg('''' || l.lexeme || ''':' || (${words.positions}::text[])[p], ' ')::tsvector
        from unnest(to_tsvector(${config}::regconfig, ${words.words})) l, unnest(l.positions) p)::text as naive, to_tsvector(${config}::regconfig, ${normalizeText(text)})::text as whole`.execute(db);
    expect(rows[0]!.naive).not.toBe(rows[0]!.whole);
  });
});
