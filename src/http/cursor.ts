import { createHmac, timingSafeEqual } from 'node:crypto';
import { invalidArgument } from '../errors.ts';

// Opaque keyset cursors: base64url(JSON payload) + "." + HMAC. The payload carries the
// last row's sort key and a hash of the list and filters it was made for, so a cursor
// from another list, account or filter set is refused rather than silently misread.

type Key = (string | number | null)[];

function stableJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(stableJson).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : 1));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${stableJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value ?? null);
}

function sign(secret: string, body: string): string {
  return createHmac('sha256', `${secret}:cursor`).update(body).digest('base64url').slice(0, 22);
}

function bindingOf(list: string, filters: Record<string, unknown>): string {
  return createHmac('sha256', 'cursor-binding').update(`${list}|${stableJson(filters)}`).digest('base64url').slice(0, 16);
}

export function encodeCursor(secret: string, list: string, filters: Record<string, unknown>, key: Key): string {
  const body = Buffer.from(JSON.stringify({ b: bindingOf(list, filters), k: key })).toString('base64url');
  return `${body}.${sign(secret, body)}`;
}

export function decodeCursor(secret: string, cursor: string, list: string, filters: Record<string, unknown>): Key {
  const bad = () => invalidArgument('cursor', 'is not a cursor returned by this list; start again without it');
  const [body, mac, extra] = cursor.split('.');
  if (!body || !mac || extra !== undefined || cursor.length > 2048) throw bad();
  const expected = Buffer.from(sign(secret, body));
  const given = Buffer.from(mac);
  if (expected.length !== given.length || !timingSafeEqual(expected, given)) throw bad();
  let payload: { b?: unknown; k?: unknown };
  try {
    payload = JSON.parse(Buffer.from(body, 'base64url').toString('utf8'));
  } catch {
    throw bad();
  }
  if (payload.b !== bindingOf(list, filters)) {
    throw invalidArgument('cursor', 'was made with other filters; send the same filters with a cursor', { reason: 'filter_mismatch' });
  }
  if (!Array.isArray(payload.k)) throw bad();
  return payload.k as Key;
}

export interface Page<T> {
  items: T[];
  pagination: { limit: number; has_more: boolean; next_cursor: string | null };
}

/**
 * Builds a page from rows fetched with limit + 1. `keyOf` gives the sort key of a row.
 * With `alwaysCursor` (email polling) the last page still returns a cursor.
 */
export function toPage<T>(
  rows: T[],
  limit: number,
  keyOf: (row: T) => Key,
  cursor: { secret: string; list: string; filters: Record<string, unknown>; alwaysCursor?: boolean; previous?: Key | null },
): Page<T> {
  const has_more = rows.length > limit;
  const items = has_more ? rows.slice(0, limit) : rows;
  const last = items.at(-1);
  let next_cursor: string | null = null;
  if (has_more && last) next_cursor = encodeCursor(cursor.secret, cursor.list, cursor.filters, keyOf(last));
  else if (cursor.alwaysCursor) {
    const key = last ? keyOf(last) : (cursor.previous ?? []);
    next_cursor = encodeCursor(cursor.secret, cursor.list, cursor.filters, key);
  }
  return { items, pagination: { limit, has_more, next_cursor } };
}
