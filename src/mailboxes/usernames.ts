import { AppError } from '../errors.ts';
import { randomToken } from '../ids.ts';

export const MAX_USERNAME = 40;
export const SUFFIX_LENGTH = 4;
const SUFFIX_ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789';
const USERNAME_SHAPE = /^[a-z0-9](?:[a-z0-9._-]*[a-z0-9])?$/;

// Names that must never look like a mailbox of ours: RFC 2142 role accounts and
// names people trust by habit.
const RESERVED = new Set([
  'postmaster', 'abuse', 'hostmaster', 'webmaster', 'admin', 'administrator', 'root', 'security',
  'mailer-daemon', 'noreply', 'no-reply', 'support', 'billing', 'info', 'www', 'ftp', 'uucp', 'usenet',
  'news', 'marketing', 'sales', 'help', 'system', 'cubby', 'dmarc', 'bounce', 'bounces',
]);

/**
 * Normalises a username as given (trimmed, NFKC, lower-case) and refuses what cannot be
 * an address local part. The field name is reported in errors.
 */
export function normalizeUsername(given: string, field = 'mailbox.email.username'): string {
  const value = given.normalize('NFKC').trim().toLowerCase();
  if (value.length === 0 || value.length > MAX_USERNAME) {
    throw new AppError('EMAIL_USERNAME_INVALID', `${field} must be 1 to ${MAX_USERNAME} characters.`, { field, max_length: MAX_USERNAME });
  }
  if (!USERNAME_SHAPE.test(value) || /[._-]{2}/.test(value)) {
    throw new AppError(
      'EMAIL_USERNAME_INVALID',
      `${field} may hold letters a-z, digits, and single dots, hyphens or underscores between them.`,
      { field },
    );
  }
  if (RESERVED.has(value) || RESERVED.has(value.replace(/[._-]/g, ''))) {
    throw new AppError('EMAIL_USERNAME_RESERVED', undefined, { field, username: value });
  }
  return value;
}

/** A username derived from free text (a title), or null when nothing usable is left. */
export function usernameFromText(text: string): string | null {
  const slug = text
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, MAX_USERNAME)
    .replace(/-+$/g, '');
  if (!slug || RESERVED.has(slug) || RESERVED.has(slug.replace(/-/g, ''))) return null;
  return slug;
}

const ADJECTIVES = ['amber', 'brisk', 'calm', 'clever', 'coral', 'dusty', 'eager', 'fern', 'gentle', 'golden', 'hazel', 'ivory', 'jolly', 'keen', 'lunar', 'mellow', 'misty', 'nimble', 'olive', 'plum', 'quiet', 'rustic', 'sage', 'sunny', 'tidy', 'velvet', 'warm', 'zesty'];
const NOUNS = ['otter', 'finch', 'maple', 'harbor', 'meadow', 'pebble', 'lantern', 'willow', 'badger', 'comet', 'falcon', 'garden', 'island', 'juniper', 'kettle', 'lark', 'orchard', 'parcel', 'quill', 'river', 'satchel', 'thistle', 'walnut', 'yarrow'];

export function generatedUsername(): string {
  const pick = (list: string[]) => list[Math.floor(Math.random() * list.length)]!;
  return `${pick(ADJECTIVES)}-${pick(NOUNS)}`;
}

/** The permanent random suffix of platform-domain addresses. */
export function randomSuffix(): string {
  return randomToken(SUFFIX_LENGTH, SUFFIX_ALPHABET);
}
