// A text's distinct words and where each stands, for its tsvector to be built from them: by
// Postgres, stemming each distinct word once instead of every word (migration 0028,
// search_tsvector_from_words), or here, from the lexemes Postgres gave those words before
// (lexeme-cache.ts).

/** Distinct words (lowercased) in order of first use, and each one's positions (ascending, from 1). */
export interface WordPositions {
  words: string[];
  positions: number[][];
}

// Postgres's largest tsvector position: past it, to_tsvector piles positions onto 16,383.
const MAX_POSITION = 16_383;
// Postgres skips a word of 2,047 bytes or more (with a notice) without counting its position.
const MAX_WORD_LENGTH = 2_046;
const LETTER_OR_DIGIT = /^[\p{L}\p{N}]$/u;

/**
 * The words of `text` as normalizeText (src/search/query.ts) leaves them, runs of letters and
 * digits, in one pass over the text; or null when the text is better given to to_tsvector whole:
 * fewer than `minWords` words (a short field costs less that way), more words than tsvector
 * positions, a word of 2,047 characters or more, or a word Postgres's default parser might not read
 * as exactly one token. Words of ASCII letters (asciiword), digits (uint) or both (numword) are one
 * token whatever stands around them. Letters and digits of other scripts are left to Postgres (a few
 * even lowercase to ASCII: the Kelvin sign to k), and so are digits followed by an e and a digit,
 * which begin a float (`5e10x` is two tokens).
 */
export function textWords(text: string, minWords: number): WordPositions | null {
  const index = new Map<string, number>();
  const words: string[] = [];
  const positions: number[][] = [];
  let position = 0;
  let start = -1;
  let upper = false;
  for (let i = 0; i <= text.length; i++) {
    const c = i < text.length ? text.charCodeAt(i) : 32;
    if ((c >= 97 && c <= 122) || (c >= 48 && c <= 57)) {
      if (start < 0) start = i;
      continue;
    }
    if (c >= 65 && c <= 90) {
      if (start < 0) start = i;
      upper = true;
      continue;
    }
    const end = i;
    if (c >= 128) {
      const point = text.codePointAt(i)!;
      if (LETTER_OR_DIGIT.test(String.fromCodePoint(point))) return null;
      if (point > 0xffff) i++;
    }
    if (start < 0) continue;
    if (end - start > MAX_WORD_LENGTH || ++position > MAX_POSITION || floatStart(text, start, end)) return null;
    const word = upper ? text.slice(start, end).toLowerCase() : text.slice(start, end);
    start = -1;
    upper = false;
    const at = index.get(word);
    if (at === undefined) {
      index.set(word, words.length);
      words.push(word);
      positions.push([position]);
    } else positions[at]!.push(position);
  }
  return position < minWords ? null : { words, positions };
}

/** Digits, then an e, then a digit: where Postgres's parser reads a float. */
function floatStart(text: string, start: number, end: number): boolean {
  let i = start;
  while (i < end && text.charCodeAt(i) >= 48 && text.charCodeAt(i) <= 57) i++;
  if (i === start || i + 1 >= end || (text.charCodeAt(i) | 32) !== 101) return false;
  const next = text.charCodeAt(i + 1);
  return next >= 48 && next <= 57;
}

/** The arguments of search_tsvector_from_words: the words joined by spaces, each one's positions as "1,7,30". */
export function functionArguments(w: WordPositions): { words: string; positions: string[] } {
  return { words: w.words.join(' '), positions: w.positions.map((p) => p.join(',')) };
}
