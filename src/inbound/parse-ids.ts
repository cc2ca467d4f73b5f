import { allFields, type HeaderBlock } from './parse-headers.ts';
import type { ParseLimits } from './parse-types.ts';

// Message-ID, In-Reply-To and References. postal-mime returns these fields verbatim (brackets,
// several ids, whitespace and all, and the first of duplicated Message-ID fields), so the rules
// are applied here on the raw values.

// An id: printable, no whitespace, brackets or control characters (UTF-8 allowed, RFC 6532).
const ID = /^[^\s<>\u0000-\u001f\u007f]+$/;

function stripComments(s: string): string {
  // Comments (RFC 5322 CFWS) around ids, e.g. `<a@b> (added by relay)`; not nested-aware on purpose.
  return s.replace(/\([^()]*\)/g, ' ');
}

/** The ids of one field value, in order: `<…>` tokens, else bare tokens that contain `@`. */
function idsIn(value: string, maxLength: number): { ids: string[]; junk: boolean } {
  const ids: string[] = [];
  let junk = false;
  const bracketed = value.match(/<[^<>]*>/g);
  if (bracketed) {
    for (const token of bracketed) {
      const id = token.slice(1, -1).trim();
      if (id && id.length <= maxLength && ID.test(id)) ids.push(id);
      else junk = true;
    }
  } else {
    for (const token of stripComments(value).split(/[\s,]+/)) {
      if (!token) continue;
      if (token.includes('@') && token.length <= maxLength && ID.test(token)) ids.push(token);
      else junk = true;
    }
  }
  return { ids, junk };
}

function fieldValues(block: HeaderBlock, lower: string): string[] {
  // Ids are ASCII (or UTF-8); bytes are read as UTF-8 and anything undecodable is refused by ID.
  return allFields(block, lower).map((f) => f.raw.toString('utf8'));
}

/**
 * The sender's Message-ID without brackets, case preserved; null when absent, unparseable, or
 * ambiguous (several ids in the field, or several Message-ID fields with different values).
 */
export function messageIdOf(block: HeaderBlock, limits: ParseLimits, warn: (code: string) => void): string | null {
  const values = fieldValues(block, 'message-id');
  if (values.length === 0) return null;
  const found = new Set<string>();
  for (const value of values) {
    const trimmed = stripComments(value).trim();
    if ((trimmed.match(/<[^<>]*>/g)?.length ?? 0) > 1) {
      warn('message_id_ambiguous');
      return null;
    }
    const inner = /^<([^<>]*)>$/.exec(trimmed)?.[1] ?? (trimmed.includes('<') ? null : trimmed);
    if (inner === null || inner === '' || inner.length > limits.maxIdLength || !ID.test(inner)) {
      warn('message_id_unparseable');
      return null;
    }
    found.add(inner);
  }
  if (found.size > 1) {
    warn('message_id_ambiguous');
    return null;
  }
  return [...found][0];
}

function dedupe(ids: string[]): string[] {
  return [...new Set(ids)];
}

export function inReplyToOf(block: HeaderBlock, limits: ParseLimits, warn: (code: string) => void): string[] {
  const ids = dedupe(fieldValues(block, 'in-reply-to').flatMap((v) => idsIn(v, limits.maxIdLength).ids));
  if (ids.length > limits.maxInReplyTo) {
    warn('in_reply_to_truncated');
    return ids.slice(0, limits.maxInReplyTo);
  }
  return ids;
}

/** References in order; over the cap, the first (thread root) and the most recent ones are kept. */
export function referencesOf(block: HeaderBlock, limits: ParseLimits, warn: (code: string) => void): string[] {
  const fields = allFields(block, 'references');
  if (fields.some((f) => f.cut)) warn('references_truncated');
  // A cut field is read from both ends: its start (the thread root) and its end (the latest ids).
  const values = fields.flatMap((f) => (f.tail ? [f.raw, f.tail] : [f.raw]).map((b) => b.toString('utf8')));
  const ids = dedupe(values.flatMap((v) => idsIn(v, limits.maxIdLength).ids));
  if (ids.length > limits.maxReferences) {
    warn('references_truncated');
    return limits.maxReferences <= 1 ? ids.slice(0, limits.maxReferences) : [ids[0], ...ids.slice(ids.length - (limits.maxReferences - 1))];
  }
  return ids;
}
