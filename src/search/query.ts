import { invalidArgument } from '../errors.ts';

// The search syntax, parsed by our own small parser into plain parameters. User text never reaches
// FTS5 or tsquery syntax: each term is reduced to its words (runs of letters and digits), and the
// index builds its own query from those words. So `"`, `*`, `NEAR`, `:` or `&` in a query are just
// characters (or words), never operators.
//
//   invoice acme          both words (anywhere)
//   "march invoice"       the words next to each other, in order
//   -draft  -"old copy"   leaves out matches with the word or phrase
//   from:acme to:bob subject:invoice filename:report.pdf
//   has:attachment  before:2025-04-01  after:2025-03-01

export type Field = 'any' | 'subject' | 'from' | 'to' | 'filename';

export interface Term {
  /** Lower-cased words; more than one is a phrase. */
  words: string[];
  field: Field;
  negated: boolean;
}

export interface SearchQuery {
  terms: Term[];
  hasAttachment: boolean;
  /** ISO date-times (UTC) for before:/after:, compared with received_at / updated_at. */
  before: string | null;
  after: string | null;
}

export const MAX_QUERY_LENGTH = 1000;
const MAX_TERMS = 32;
const MAX_WORDS = 64;
const MAX_WORD_CHARS = 100;
const FIELDS: Record<string, Field> = { from: 'from', to: 'to', subject: 'subject', filename: 'filename', file: 'filename' };

/** Letters and digits: the same word boundaries both databases' indexes use (see normalizeText). */
export function wordsOf(text: string): string[] {
  return (text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []).map((w) => w.slice(0, MAX_WORD_CHARS));
}

/** Text as the index sees it: everything but letters and digits is a word break. */
export function normalizeText(text: string): string {
  return text.replace(/[^\p{L}\p{N}]+/gu, ' ');
}

function dateBound(field: string, value: string, endOfDay: boolean): string {
  const v = value.trim();
  const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(v);
  const ms = m ? Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3])) + (endOfDay ? 86_400_000 : 0) : /^\d{4}-\d{2}-\d{2}T/.test(v) ? Date.parse(v) : NaN;
  if (!Number.isFinite(ms) || (m && new Date(ms - (endOfDay ? 86_400_000 : 0)).getUTCDate() !== Number(m[3]))) {
    throw invalidArgument('q', `${field}: needs a date such as 2025-03-31`, { operator: field, value: v.slice(0, 40) });
  }
  return new Date(ms).toISOString();
}

/**
 * Parses `q`. Throws INVALID_ARGUMENT (field `q`) for a query that is too long, has too many
 * terms, a bad date or an unknown `has:` value, or nothing to look for at all.
 */
export function parseQuery(q: string, opts: { allowFilterOnly?: boolean } = {}): SearchQuery {
  if (q.length > MAX_QUERY_LENGTH) throw invalidArgument('q', `is longer than ${MAX_QUERY_LENGTH} characters`, { max_length: MAX_QUERY_LENGTH });
  const out: SearchQuery = { terms: [], hasAttachment: false, before: null, after: null };
  const re = /\s*(-)?(?:([A-Za-z]+):)?(?:"([^"]*)"?|(\S+))/gy;
  let words = 0;
  for (let m = re.exec(q); m && m[0].trim() !== ''; m = re.exec(q)) {
    const negated = m[1] === '-';
    const op = m[2]?.toLowerCase();
    const value = m[3] ?? m[4] ?? '';
    let field: Field = 'any';
    if (op === 'has') {
      if (!/^attachments?$/i.test(value)) throw invalidArgument('q', 'has: takes "attachment"', { operator: 'has' });
      if (!negated) out.hasAttachment = true;
      continue;
    }
    if (op === 'before' || op === 'after') {
      out[op] = dateBound(op, value, op === 'before' ? false : true);
      continue;
    }
    let text = value;
    if (op && FIELDS[op]) field = FIELDS[op]!;
    else if (op) text = `${m[2]}:${value}`; // not an operator: an ordinary word with a colon
    const w = wordsOf(text);
    if (!w.length) continue;
    if (out.terms.length >= MAX_TERMS) throw invalidArgument('q', `has more than ${MAX_TERMS} terms`, { max_terms: MAX_TERMS });
    words += w.length;
    if (words > MAX_WORDS) throw invalidArgument('q', `has more than ${MAX_WORDS} words`, { max_words: MAX_WORDS });
    out.terms.push({ words: w, field, negated });
  }
  const positive = out.terms.some((t) => !t.negated);
  const filters = out.hasAttachment || out.before !== null || out.after !== null;
  if (!positive && !(opts.allowFilterOnly && filters)) {
    throw invalidArgument('q', out.terms.length ? 'needs at least one word to look for (it only excludes words)' : 'has no words to look for', { reason: 'empty_query' });
  }
  return out;
}

/** The query with only what applies to file content (words in any field). */
export function contentTerms(q: SearchQuery): Term[] {
  return q.terms.filter((t) => t.field === 'any');
}
