// A text's distinct words and where each stands, for Postgres to build the text's tsvector from
// (migration 0028, search_tsvector_from_words): stemming each distinct word once instead of every
// word costs Postgres a quarter as much for a typical message body.

/** Distinct words joined by spaces, in order of first use, and each one's positions ("1,7,30"). */
export interface WordPositions {
  words: string;
  positions: string[];
}

// Postgres's largest tsvector position: past it, to_tsvector piles positions onto 16,383.
const MAX_POSITION = 16_383;
// Postgres skips a word of 2,047 bytes or more (with a notice) without counting its position.
const MAX_WORD_LENGTH = 2_046;
// Texts whose every word Postgres's default parser reads as exactly one token, whatever stands
// around it: ASCII letters (asciiword), digits (uint), or both (numword). Digits, an e and a digit
// begin a float instead (`5e10x` is two tokens), so a text with such a word is left to to_tsvector.
// Checked before lowercasing: a few other letters lowercase to ASCII (the Kelvin sign to k).
const OTHER_CHARACTER = /[^A-Za-z0-9 ]/;
const FLOAT_START = /(?:^| )[0-9]+e[0-9]/;

/**
 * The words of a text already reduced to letters and digits (normalizeText), or null when the text
 * is better given to to_tsvector whole: fewer than `minWords` words (a short field costs less that
 * way), more words than tsvector positions, or any word outside the ones above (other scripts,
 * floats, very long words).
 */
export function wordPositions(normalized: string, minWords: number): WordPositions | null {
  if (OTHER_CHARACTER.test(normalized)) return null;
  const text = normalized.toLowerCase();
  if (FLOAT_START.test(text)) return null;
  // Each word's index in `words`, and its positions as the text Postgres receives ("1,7,30").
  const index = new Map<string, number>();
  const words: string[] = [];
  const positions: string[] = [];
  let position = 0;
  for (const word of text.split(' ')) {
    if (word === '') continue;
    if (word.length > MAX_WORD_LENGTH || ++position > MAX_POSITION) return null;
    const i = index.get(word);
    if (i === undefined) {
      index.set(word, words.length);
      words.push(word);
      positions.push(String(position));
    } else positions[i] += `,${position}`;
  }
  if (position < minWords) return null;
  return { words: words.join(' '), positions };
}
