import { invalidArgument } from '../errors.ts';

// Field rules shared by both surfaces' create and update.
export const MAX_TITLE = 200;
export const MAX_DESCRIPTION = 2000;
export const MAX_METADATA_BYTES = 16 * 1024;
export const MAX_TAG_PATHS = 50;
export const MAX_TAG_PATH = 200;

/** Trims a title; empty means "none". Control characters are refused. */
export function cleanTitle(value: string | null | undefined, field: string): string | null {
  if (value === null || value === undefined) return null;
  const t = value.normalize('NFC').trim();
  if (t.length > MAX_TITLE) throw invalidArgument(field, `must be at most ${MAX_TITLE} characters`);
  if (/[\u0000-\u001f\u007f\u202a-\u202e\u2066-\u2069]/.test(t)) throw invalidArgument(field, 'must not contain control or bidirectional-override characters');
  return t || null;
}

export function cleanDescription(value: string | null | undefined, field: string): string | null {
  if (value === null || value === undefined) return null;
  const t = value.normalize('NFC');
  if (t.length > MAX_DESCRIPTION) throw invalidArgument(field, `must be at most ${MAX_DESCRIPTION} characters`);
  return t.trim() ? t : null;
}

export function cleanMetadata(value: unknown, field: string): Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw invalidArgument(field, 'must be a JSON object');
  const size = Buffer.byteLength(JSON.stringify(value));
  if (size > MAX_METADATA_BYTES) throw invalidArgument(field, `must be at most ${MAX_METADATA_BYTES} bytes as JSON`, { max_bytes: MAX_METADATA_BYTES, bytes: size });
  return value as Record<string, unknown>;
}

export function cleanTagPaths(value: string[] | undefined, field: string): string[] {
  if (!value) return [];
  if (value.length > MAX_TAG_PATHS) throw invalidArgument(field, `must hold at most ${MAX_TAG_PATHS} labels`);
  const out = new Set<string>();
  for (const [i, raw] of value.entries()) {
    const t = raw.normalize('NFC').trim();
    if (!t || t.length > MAX_TAG_PATH || /[\u0000-\u001f\u007f]/.test(t)) throw invalidArgument(`${field}.${i}`, `must be 1 to ${MAX_TAG_PATH} printable characters`);
    out.add(t);
  }
  return [...out];
}

export function titleKey(title: string | null): string | null {
  return title === null ? null : title.toLowerCase();
}
