import { sql, type Kysely } from 'kysely';
import type { DB } from '../db/schema.ts';
import type { WordPositions } from './word-positions.ts';

// Postgres search: what the text search configuration makes of each word (its lexeme, or none for a
// stop word), learned from Postgres and kept per database. A body whose words are all known goes to
// Postgres as a finished tsvector, which it only has to read (tsvectorin: about a tenth of what
// to_tsvector costs for a 5 KiB body), built here exactly as to_tsvector would build it. A body with
// a word not known yet goes as its distinct words (search_tsvector_from_words), and the new words
// are learned in the background, off the path of the message.
//
// Only for configurations whose every dictionary takes one word at a time (simple or snowball, as
// the built-in languages are; checked once), and only for words the parser reads as one token
// (word-positions.ts): then a word's lexeme does not depend on the words around it.

// to_tsvector keeps a lexeme's first 255 positions (MAXNUMPOS - 1); tsvectorin would keep 256.
const MAX_POSITIONS = 255;
/** Words kept at most (about 100 bytes each); past it the cache starts again. */
const MAX_WORDS = 50_000;
/** Words asked for per learning query, and waiting at most. */
const LEARN_BATCH = 2_000;
/** After a failed learning query (Postgres away, say), nothing is asked again for this long. */
const RETRY_AFTER_MS = 60_000;

export class LexemeCache {
  /**
   * A word's lexeme as it starts its entry in a tsvector's text (`'lexeme':`, quoted once here rather
   * than for every message); null for a stop word; false for a word Postgres turns into several (left
   * to it).
   */
  private readonly known = new Map<string, string | null | false>();
  private readonly wanted = new Set<string>();
  private learning: Promise<void> | null = null;
  private wordByWord: boolean | null = null;
  private quietUntil = 0;

  constructor(
    private readonly db: Kysely<DB>,
    private readonly language: string,
  ) {}

  /**
   * The tsvector text to_tsvector would make of the text these words come from, or null when a word
   * is not known yet (it is learned meanwhile) or the configuration does not allow it.
   */
  tsvector(w: WordPositions): string | null {
    if (this.wordByWord === false) return null;
    const byLexeme = new Map<string, number[]>();
    let merged: Set<string> | null = null;
    let missing = false;
    for (let i = 0; i < w.words.length; i++) {
      const entry = this.known.get(w.words[i]!);
      if (entry === undefined) {
        missing = true;
        if (this.wanted.size < LEARN_BATCH) this.wanted.add(w.words[i]!);
        continue;
      }
      if (entry === false) return null;
      if (entry === null || missing) continue;
      const at = byLexeme.get(entry);
      if (!at) byLexeme.set(entry, w.positions[i]!);
      else {
        // Two words with one stem ("report", "reports"): their positions, in order.
        byLexeme.set(entry, at.concat(w.positions[i]!));
        (merged ??= new Set()).add(entry);
      }
    }
    if (missing) {
      this.learnSoon();
      return null;
    }
    const parts: string[] = [];
    for (const [entry, positions] of byLexeme) {
      if (merged?.has(entry)) positions.sort((a, b) => a - b);
      const kept = positions.length > MAX_POSITIONS ? positions.slice(0, MAX_POSITIONS) : positions;
      parts.push(entry + kept.join(','));
    }
    return parts.join(' ');
  }

  /** Settles once the words asked for so far are learned (or could not be). */
  async settled(): Promise<void> {
    while (this.learning) await this.learning;
  }

  private learnSoon(): void {
    if (this.learning || Date.now() < this.quietUntil) return;
    this.learning = this.learnWanted()
      .catch(() => {
        this.quietUntil = Date.now() + RETRY_AFTER_MS;
      })
      .finally(() => {
        this.learning = null;
      });
  }

  private async learnWanted(): Promise<void> {
    this.wordByWord ??= await this.configurationIsWordByWord();
    if (!this.wordByWord) return this.wanted.clear();
    while (this.wanted.size) {
      const words = [...this.wanted].slice(0, LEARN_BATCH);
      const { rows } = await sql<{ word: string; lexemes: string[] }>`select word, array(select lexeme from unnest(to_tsvector(${this.language}::regconfig, word))) as lexemes
        from unnest(${words}::text[]) as word`.execute(this.db);
      if (this.known.size + rows.length > MAX_WORDS) this.known.clear();
      for (const { word, lexemes } of rows) this.known.set(word, lexemes.length === 0 ? null : lexemes.length === 1 ? entryStart(lexemes[0]!) : false);
      for (const word of words) this.wanted.delete(word);
    }
  }

  /** Asked of Postgres (migration 0028), which makes the same test before building from words. */
  private async configurationIsWordByWord(): Promise<boolean> {
    const { rows } = await sql<{ ok: boolean }>`select search_config_word_by_word(${this.language}::regconfig) as ok`.execute(this.db);
    return rows[0]?.ok === true;
  }
}

/** `'lexeme':`, quoted as tsvectorin reads it. */
function entryStart(lexeme: string): string {
  return `'${lexeme.replace(/\\/g, '\\\\').replace(/'/g, "''")}':`;
}

const caches = new WeakMap<Kysely<DB>, Map<string, LexemeCache>>();

/** The cache of this database (the app's root Kysely instance) and configuration. */
export function lexemeCache(db: Kysely<DB>, language: string): LexemeCache {
  let byLanguage = caches.get(db);
  if (!byLanguage) caches.set(db, (byLanguage = new Map()));
  let cache = byLanguage.get(language);
  if (!cache) byLanguage.set(language, (cache = new LexemeCache(db, language)));
  return cache;
}
