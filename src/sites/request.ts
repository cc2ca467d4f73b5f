import { invalidArgument } from '../errors.ts';
import { PASSWORD_MAX, PASSWORD_MIN } from './secrets.ts';
import type { AccessMode, PublicationsTable, SiteMode } from './sites.schema.ts';

// A publish or preview request as clients send it, turned into the settings to build with.

export interface PublishBody {
  site_mode?: string | null;
  site_type?: string | null;
  access_mode?: string | null;
  password?: string | null;
  regenerate_password?: boolean | null;
  publication_root_directory?: string | null;
  /** Client metadata: `publication_root_directory` is read from it; other keys are ignored. */
  metadata?: Record<string, unknown> | null;
  slug_suggestions?: string[] | string | null;
}

export interface Settings {
  siteMode: SiteMode;
  accessMode: AccessMode;
  rootDirectory: string;
  /** A password the owner chose, or null to keep or generate one. */
  password: string | null;
  regeneratePassword: boolean;
  slugSuggestions: string[];
}

const SITE_MODES = new Set(['static', 'spa']);
const ACCESS_MODES = new Set(['public', 'password', 'require_email']);
const RETIRED = new Set(['app', 'database', 'server', 'node', 'function', 'functions']);

export function cleanRootDirectory(raw: unknown, field: string): string {
  if (typeof raw !== 'string') throw invalidArgument(field, 'must be a string (empty publishes the whole bucket)');
  const dir = raw.normalize('NFC').trim().replace(/^\/+|\/+$/g, '');
  if (dir === '' || dir === '.') return '';
  if (dir.length > 1024 || /[\u0000-\u001f\u007f\\]/.test(dir) || dir.split('/').some((s) => s === '' || s === '.' || s === '..')) {
    throw invalidArgument(field, 'must be a bucket-relative folder such as "dist" or "site/public"');
  }
  return dir;
}

/** Settings for this request: what it says, else what the publication had, else the defaults. */
export function resolveSettings(body: PublishBody, existing: PublicationsTable | undefined, metadata: Record<string, unknown>, kind: 'main' | 'preview'): Settings {
  let siteMode: SiteMode = existing?.site_mode ?? 'static';
  if (body.site_type != null) {
    const t = body.site_type.toLowerCase();
    if (RETIRED.has(t)) throw invalidArgument('site_type', `"${body.site_type}" sites are retired; only static files are published (site_mode static or spa)`);
    if (t === 'spa') siteMode = 'spa';
    else if (t === 'website' || t === 'static') siteMode = 'static';
    else throw invalidArgument('site_type', 'must be website (site_mode is the canonical field)');
  }
  if (body.site_mode != null) {
    if (RETIRED.has(body.site_mode)) throw invalidArgument('site_mode', `"${body.site_mode}" mode is retired; use static or spa`);
    if (!SITE_MODES.has(body.site_mode)) throw invalidArgument('site_mode', 'must be static or spa');
    siteMode = body.site_mode as SiteMode;
  }

  let accessMode: AccessMode = kind === 'preview' ? 'public' : (existing?.access_mode ?? 'public');
  if (body.access_mode != null) {
    if (!ACCESS_MODES.has(body.access_mode)) throw invalidArgument('access_mode', 'must be public, password or require_email');
    if (kind === 'preview' && body.access_mode !== 'public') throw invalidArgument('access_mode', 'previews are always public; publish the main site for password or require_email access');
    accessMode = body.access_mode as AccessMode;
  }

  let password: string | null = null;
  if (body.password != null) {
    if (accessMode !== 'password') throw invalidArgument('password', 'is only used with access_mode password (omit it for require_email)');
    if (body.regenerate_password) throw invalidArgument('password', 'send either password or regenerate_password, not both');
    const p = body.password;
    if (p.length < PASSWORD_MIN || p.length > PASSWORD_MAX) throw invalidArgument('password', `must be ${PASSWORD_MIN} to ${PASSWORD_MAX} characters`);
    if (/[\u0000-\u001f\u007f]/.test(p) || p.trim() !== p) throw invalidArgument('password', 'must not contain control characters or start or end with spaces');
    if (new Set(p).size < 4) throw invalidArgument('password', 'is too easy to guess');
    password = p;
  }
  const regeneratePassword = body.regenerate_password === true;
  if (regeneratePassword && accessMode !== 'password') throw invalidArgument('regenerate_password', 'needs access_mode password');

  // The root folder: the field itself, else the request's metadata key of the same name (what
  // bucket-era clients send), else the bucket's metadata key, else what the publication had.
  const fromRequest = body.metadata?.publication_root_directory;
  const fromBucket = metadata.publication_root_directory;
  const rootDirectory =
    body.publication_root_directory != null
      ? cleanRootDirectory(body.publication_root_directory, 'publication_root_directory')
      : fromRequest !== undefined && fromRequest !== null
        ? cleanRootDirectory(fromRequest, 'metadata.publication_root_directory')
        : fromBucket !== undefined && fromBucket !== null
          ? cleanRootDirectory(fromBucket, 'metadata.publication_root_directory')
          : (existing?.root_directory ?? '');

  const raw = body.slug_suggestions ?? [];
  const list = typeof raw === 'string' ? raw.split(',') : raw;
  if (list.length > 20) throw invalidArgument('slug_suggestions', 'at most 20 suggestions');
  const slugSuggestions = list.map((s) => String(s).trim()).filter(Boolean);
  return { siteMode, accessMode, rootDirectory, password, regeneratePassword, slugSuggestions };
}
