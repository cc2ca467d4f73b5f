import { AppError, invalidArgument } from '../errors.ts';

export const MAX_PATH_LENGTH = 1024;
export const MAX_SEGMENT_BYTES = 255;
export const EMAIL_PREFIX = '_email/';

// Executables and installers, and files that hold secrets or keys: refused by extension.
const FORBIDDEN_EXTENSIONS = new Set([
  'exe', 'dll', 'com', 'bat', 'cmd', 'scr', 'msi', 'msp', 'mst', 'ps1', 'psm1', 'vbs', 'vbe', 'jse', 'wsf', 'wsh', 'hta', 'cpl', 'pif', 'lnk', 'reg', 'inf',
  'pem', 'key', 'p12', 'pfx', 'jks', 'keystore', 'ppk', 'kdbx', 'gpg', 'asc',
]);
const FORBIDDEN_BASENAMES = new Set(['id_rsa', 'id_dsa', 'id_ecdsa', 'id_ed25519', '.netrc', '.pgpass', '.htpasswd', 'credentials']);
// Control characters, and the bidirectional and zero-width characters that make one name look like another.
const UNSAFE = /[\u0000-\u001f\u007f\u0080-\u009f\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff\\]/;

export interface CleanPath {
  path: string;
  folder: string;
  basename: string;
}

/** Is this path inside the read-only email area? (Case-insensitive: `_EMAIL/` is the same place.) */
export function isEmailPath(path: string): boolean {
  return path.normalize('NFC').replace(/^\/+/, '').toLowerCase().startsWith(EMAIL_PREFIX);
}

/**
 * Validates and normalises a file path written by a client: NFC, no leading slash, no
 * empty, `.` or `..` segments, no control or look-alike characters, bounded lengths,
 * nothing under `_email/`, no forbidden file types.
 */
export function cleanPath(raw: string, field = 'path', opts: { allowEmail?: boolean } = {}): CleanPath {
  if (typeof raw !== 'string') throw invalidArgument(field, 'must be a string');
  const path = raw.normalize('NFC').replace(/^\/+/, '');
  if (!path) throw invalidArgument(field, 'must not be empty');
  if (path.length > MAX_PATH_LENGTH) throw invalidArgument(field, `must be at most ${MAX_PATH_LENGTH} characters`);
  if (UNSAFE.test(path)) throw invalidArgument(field, 'must not contain control, zero-width or bidirectional characters, or backslashes');
  const segments = path.split('/');
  for (const s of segments) {
    if (s === '') throw invalidArgument(field, 'must not contain empty segments (// or a trailing /)');
    if (s === '.' || s === '..') throw invalidArgument(field, 'must not contain . or .. segments');
    if (s.trim() !== s) throw invalidArgument(field, 'segments must not start or end with spaces');
    if (Buffer.byteLength(s) > MAX_SEGMENT_BYTES) throw invalidArgument(field, `each segment must be at most ${MAX_SEGMENT_BYTES} bytes`);
  }
  if (!opts.allowEmail && isEmailPath(path)) {
    throw new AppError('EMAIL_PATH_READ_ONLY', `${field}: files under _email/ are written only by received and sent email.`, { field, path });
  }
  const basename = segments.at(-1)!;
  if (isForbiddenFileName(basename)) {
    const lower = basename.toLowerCase();
    throw new AppError('FILE_TYPE_FORBIDDEN', `${field}: executables and secret or key files are not stored.`, { field, path, extension: lower.includes('.') ? lower.split('.').pop()! : null });
  }
  return { path, folder: segments.slice(0, -1).join('/'), basename };
}

/** Executables, installers and files that hold secrets or keys, by name: never stored. */
export function isForbiddenFileName(basename: string): boolean {
  const lower = basename.toLowerCase();
  const ext = lower.includes('.') ? lower.split('.').pop()! : '';
  return FORBIDDEN_EXTENSIONS.has(ext) || FORBIDDEN_BASENAMES.has(lower) || lower === '.env' || lower.startsWith('.env.');
}

/** A folder filter: "" is the root; otherwise a clean path without trailing slash. */
export function cleanFolder(raw: string | undefined): string | undefined {
  if (raw === undefined) return undefined;
  const f = raw.normalize('NFC').replace(/^\/+|\/+$/g, '');
  if (f === '') return '';
  if (UNSAFE.test(f) || f.split('/').some((s) => s === '' || s === '.' || s === '..')) throw invalidArgument('folder', 'is not a valid folder');
  return f;
}

const MIME_BY_EXT: Record<string, string> = {
  txt: 'text/plain', md: 'text/markdown', csv: 'text/csv', html: 'text/html', htm: 'text/html', css: 'text/css', js: 'text/javascript', mjs: 'text/javascript',
  json: 'application/json', xml: 'application/xml', pdf: 'application/pdf', png: 'image/png', jpg: 'image/jpeg', jpeg: 'image/jpeg', gif: 'image/gif',
  webp: 'image/webp', svg: 'image/svg+xml', ico: 'image/x-icon', zip: 'application/zip', eml: 'message/rfc822', ics: 'text/calendar', wasm: 'application/wasm',
  mp3: 'audio/mpeg', mp4: 'video/mp4', woff: 'font/woff', woff2: 'font/woff2', yaml: 'application/yaml', yml: 'application/yaml',
};

export function mimeFromName(name: string): string {
  const ext = name.toLowerCase().split('.').pop() ?? '';
  return MIME_BY_EXT[ext] ?? 'application/octet-stream';
}

export function isPdf(name: string, contentType: string): boolean {
  return contentType.toLowerCase().startsWith('application/pdf') || name.toLowerCase().endsWith('.pdf');
}
