import type { SearchQuery } from './query.ts';

// Plain-text snippets: a short window of the first text that holds one of the query's words, with
// whitespace collapsed. No markup, so nothing in it can be rendered as HTML by a client. Callers
// only pass text the viewer may read (withheld mail never reaches here for API keys).

const BEFORE = 60;
const AFTER = 140;

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** Words to look for: each positive word, and its stem-ish prefix for stemmed matches (invoices ~ invoice). */
function needles(q: SearchQuery): RegExp[] {
  const words = q.terms.filter((t) => !t.negated).flatMap((t) => t.words);
  const out: RegExp[] = [];
  for (const w of words) out.push(new RegExp(`(?<![\\p{L}\\p{N}])${escape(w)}`, 'iu'));
  for (const w of words) if (w.length > 5) out.push(new RegExp(`(?<![\\p{L}\\p{N}])${escape(w.slice(0, Math.max(4, w.length - 3)))}`, 'iu'));
  return out;
}

export function snippetOf(texts: string[], q: SearchQuery): string | null {
  const patterns = needles(q);
  for (const p of patterns) {
    for (const raw of texts) {
      if (!raw) continue;
      const m = p.exec(raw);
      if (!m) continue;
      const start = Math.max(0, m.index - BEFORE);
      const end = Math.min(raw.length, m.index + AFTER);
      const body = raw.slice(start, end).replace(/\s+/g, ' ').trim();
      return `${start > 0 ? '…' : ''}${body}${end < raw.length ? '…' : ''}`;
    }
  }
  const first = texts.find((t) => t.trim());
  return first ? first.replace(/\s+/g, ' ').trim().slice(0, BEFORE + AFTER) : null;
}
