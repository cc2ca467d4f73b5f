import { describe, expect, it } from 'vitest';
import { parseQuery } from '../src/search/query.ts';
import { AppError } from '../src/errors.ts';

describe('search query parser', () => {
  it('reads words, phrases, negation and operators into plain terms', () => {
    const q = parseQuery('Invoice "March report" -draft -"old copy" from:acme.example to:Bob subject:paid filename:x.pdf has:attachment after:2025-03-01 before:2025-03-31');
    expect(q.terms).toEqual([
      { words: ['invoice'], field: 'any', negated: false },
      { words: ['march', 'report'], field: 'any', negated: false },
      { words: ['draft'], field: 'any', negated: true },
      { words: ['old', 'copy'], field: 'any', negated: true },
      { words: ['acme', 'example'], field: 'from', negated: false },
      { words: ['bob'], field: 'to', negated: false },
      { words: ['paid'], field: 'subject', negated: false },
      { words: ['x', 'pdf'], field: 'filename', negated: false },
    ]);
    expect(q.hasAttachment).toBe(true);
    expect(q.after).toBe('2025-03-02T00:00:00.000Z');
    expect(q.before).toBe('2025-03-31T00:00:00.000Z');
  });

  it('keeps only letters and digits of anything that looks like FTS or SQL syntax', () => {
    expect(parseQuery('NEAR(a b) * "x" AND ^y').terms.map((t) => t.words)).toEqual([['near', 'a'], ['b'], ['x'], ['and'], ['y']]);
    expect(parseQuery("a' OR '1'='1").terms.flatMap((t) => t.words)).toEqual(['a', 'or', '1', '1']);
    expect(parseQuery('unknown:word').terms).toEqual([{ words: ['unknown', 'word'], field: 'any', negated: false }]);
    expect(parseQuery('café ÜBER').terms.map((t) => t.words)).toEqual([['café'], ['über']]);
  });

  const invalid = (q: string, opts?: { allowFilterOnly?: boolean }) => {
    try {
      parseQuery(q, opts);
    } catch (e) {
      expect(e).toBeInstanceOf(AppError);
      expect((e as AppError).code).toBe('INVALID_ARGUMENT');
      expect((e as AppError).details.field).toBe('q');
      return (e as AppError).message;
    }
    throw new Error(`${q} parsed`);
  };

  it('refuses queries with nothing to look for, too long or with bad operators', () => {
    expect(invalid('"" * : -')).toMatch(/no words/);
    expect(invalid('-draft')).toMatch(/at least one word/);
    expect(invalid('has:attachment')).toMatch(/no words/);
    expect(parseQuery('has:attachment', { allowFilterOnly: true }).hasAttachment).toBe(true);
    expect(invalid('x'.repeat(10_000))).toMatch(/longer than/);
    expect(invalid(Array.from({ length: 40 }, (_, i) => `w${i}`).join(' '))).toMatch(/more than 32 terms/);
    expect(invalid('before:yesterday')).toMatch(/date/);
    expect(invalid('before:2025-02-30')).toMatch(/date/);
    expect(invalid('has:pictures')).toMatch(/has:/);
  });
});
