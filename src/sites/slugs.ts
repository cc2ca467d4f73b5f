import type { Kysely } from 'kysely';
import type { DB } from '../db/schema.ts';
import { AppError, invalidArgument } from '../errors.ts';
import { randomToken } from '../ids.ts';

// Site slugs: the first DNS label of a site's host (`<slug>.<sites host>`). At least 3 characters,
// lower-case letters, digits and inner hyphens, at most 63 (one DNS label). A slug belongs to one
// bucket for good: the main site uses it, the preview uses `preview-<slug>`.

export const SLUG_MIN = 3;
export const SLUG_MAX = 50;
const SHAPE = /^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$/;

// Names of our own services and infrastructure, exact matches.
const RESERVED = new Set([
  'www', 'api', 'app', 'apps', 'admin', 'administrator', 'root', 'system', 'mail', 'email', 'smtp', 'imap', 'pop', 'pop3', 'mx', 'ns', 'ns1', 'ns2',
  'dns', 'ftp', 'sftp', 'ssh', 'vpn', 'dashboard', 'console', 'status', 'docs', 'doc', 'help', 'support', 'billing', 'account', 'accounts', 'login',
  'logout', 'signin', 'signup', 'sign-in', 'sign-up', 'register', 'auth', 'oauth', 'sso', 'mcp', 'cable', 'ws', 'static', 'assets', 'cdn', 'media',
  'files', 'uploads', 'blob', 'blobs', 'sites', 'site', 'preview', 'previews', 'cubby', 'security', 'abuse', 'postmaster', 'hostmaster', 'webmaster',
  'noreply', 'no-reply', 'localhost', 'internal', 'test', 'staging', 'dev', 'api-docs', 'openapi', 'settings', 'public', 'private', 'undefined', 'null',
]);
// Words refused anywhere in a slug: impersonation of well-known sign-in pages (phishing) and abuse.
const PROHIBITED = [
  'paypal', 'appleid', 'apple-id', 'icloud', 'microsoft', 'office365', 'outlook', 'hotmail', 'gmail', 'google', 'facebook', 'instagram', 'whatsapp',
  'netflix', 'amazon', 'wellsfargo', 'bankofamerica', 'chase-bank', 'coinbase', 'binance', 'metamask', 'ledger-live', 'walletconnect', 'docusign',
  'phish', 'malware', 'ransom', 'porn', 'nazi',
];

export type SlugProblem = 'too_short' | 'too_long' | 'invalid_characters' | 'reserved' | 'prohibited';

/** Lower-cases and folds free text (a title, a suggestion) into slug shape; may return ''. */
export function slugify(text: string): string {
  return text
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, SLUG_MAX)
    .replace(/-+$/g, '');
}

export function slugProblem(slug: string): SlugProblem | null {
  if (slug.length < SLUG_MIN) return 'too_short';
  if (slug.length > SLUG_MAX) return 'too_long';
  if (!SHAPE.test(slug) || slug.includes('--')) return 'invalid_characters';
  // `preview-…` hosts are the previews of other slugs.
  if (RESERVED.has(slug) || slug.startsWith('preview-')) return 'reserved';
  if (PROHIBITED.some((w) => slug.includes(w))) return 'prohibited';
  return null;
}

const MESSAGES: Record<SlugProblem, string> = {
  too_short: `must be at least ${SLUG_MIN} characters`,
  too_long: `must be at most ${SLUG_MAX} characters`,
  invalid_characters: 'may contain only lower-case letters, digits and single inner hyphens',
  reserved: 'is reserved',
  prohibited: 'contains a prohibited word',
};

/** An explicit slug (rename): refused with the reason, never changed behind the caller's back. */
export function checkExplicitSlug(raw: string, field: string): string {
  const slug = raw.trim().toLowerCase();
  const problem = slugProblem(slug);
  if (problem) throw invalidArgument(field, MESSAGES[problem], { reason: problem, slug });
  return slug;
}

async function slugTaken(db: Kysely<DB>, slug: string, mailboxId: string): Promise<boolean> {
  const row = await db.selectFrom('site_slugs').select('mailbox_id').where('slug', '=', slug).executeTakeFirst();
  return row !== undefined && row.mailbox_id !== mailboxId;
}

/**
 * The bucket's slug: the one it already has, else the first usable suggestion, else one made from
 * the title, else a random one. Suggestions are suggestions: an unusable one is skipped.
 */
export async function chooseSlug(db: Kysely<DB>, mailboxId: string, suggestions: string[], title: string | null): Promise<{ slug: string; existing: boolean }> {
  const own = await db.selectFrom('site_slugs').select('slug').where('mailbox_id', '=', mailboxId).executeTakeFirst();
  if (own) return { slug: own.slug, existing: true };
  const candidates = [...suggestions.map(slugify), slugify(title ?? '')].filter((s) => s && slugProblem(s) === null);
  for (const c of candidates) if (!(await slugTaken(db, c, mailboxId))) return { slug: c, existing: false };
  // Taken: the first candidate with a short random tail; nothing usable: a random slug.
  const stem = (candidates[0] ?? 'site').slice(0, SLUG_MAX - 5);
  for (let i = 0; i < 10; i++) {
    const slug = `${stem}-${randomToken(4, 'abcdefghijkmnpqrstuvwxyz23456789')}`;
    if (slugProblem(slug) === null && !(await slugTaken(db, slug, mailboxId))) return { slug, existing: false };
  }
  throw new AppError('SERVICE_UNAVAILABLE', 'No free site slug was found; retry.', { retry_after: 1 });
}
