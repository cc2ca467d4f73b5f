// Content types for published files, chosen by extension (the stored upload type is only a
// fallback: clients often send application/octet-stream), and what is worth compressing.

const TYPES: Record<string, string> = {
  html: 'text/html; charset=utf-8', htm: 'text/html; charset=utf-8', css: 'text/css; charset=utf-8', js: 'text/javascript; charset=utf-8',
  mjs: 'text/javascript; charset=utf-8', cjs: 'text/javascript; charset=utf-8', json: 'application/json; charset=utf-8', map: 'application/json; charset=utf-8',
  webmanifest: 'application/manifest+json; charset=utf-8', txt: 'text/plain; charset=utf-8', md: 'text/markdown; charset=utf-8', markdown: 'text/markdown; charset=utf-8',
  csv: 'text/csv; charset=utf-8', tsv: 'text/tab-separated-values; charset=utf-8', xml: 'application/xml; charset=utf-8', rss: 'application/rss+xml; charset=utf-8',
  atom: 'application/atom+xml; charset=utf-8', svg: 'image/svg+xml; charset=utf-8', yaml: 'text/yaml; charset=utf-8', yml: 'text/yaml; charset=utf-8',
  ics: 'text/calendar; charset=utf-8', vtt: 'text/vtt; charset=utf-8', log: 'text/plain; charset=utf-8',
  png: 'image/png', jpg: 'image/jpeg', jpeg: 'image/jpeg', gif: 'image/gif', webp: 'image/webp', avif: 'image/avif', ico: 'image/x-icon', bmp: 'image/bmp',
  tif: 'image/tiff', tiff: 'image/tiff', pdf: 'application/pdf', wasm: 'application/wasm', zip: 'application/zip', gz: 'application/gzip',
  tar: 'application/x-tar', woff: 'font/woff', woff2: 'font/woff2', ttf: 'font/ttf', otf: 'font/otf', eot: 'application/vnd.ms-fontobject',
  mp3: 'audio/mpeg', wav: 'audio/wav', ogg: 'audio/ogg', oga: 'audio/ogg', m4a: 'audio/mp4', flac: 'audio/flac', mp4: 'video/mp4', m4v: 'video/mp4',
  webm: 'video/webm', ogv: 'video/ogg', mov: 'video/quicktime', eml: 'message/rfc822', epub: 'application/epub+zip',
};

const COMPRESSIBLE_EXT = new Set([
  'html', 'htm', 'css', 'js', 'mjs', 'cjs', 'json', 'map', 'webmanifest', 'txt', 'md', 'markdown', 'csv', 'tsv', 'xml', 'rss', 'atom', 'svg', 'yaml',
  'yml', 'ics', 'vtt', 'log', 'wasm', 'ico', 'bmp', 'ttf', 'otf', 'eot', 'eml',
]);

export function extensionOf(path: string): string {
  const base = path.slice(path.lastIndexOf('/') + 1).toLowerCase();
  const dot = base.lastIndexOf('.');
  return dot > 0 ? base.slice(dot + 1) : '';
}

export function contentTypeFor(path: string, stored: string | null): string {
  const byExt = TYPES[extensionOf(path)];
  if (byExt) return byExt;
  const s = (stored ?? '').trim().toLowerCase();
  // A stored type is used only when it is a plain, harmless one; HTML never comes from the upload.
  if (/^[a-z]+\/[a-z0-9.+-]+$/.test(s) && !s.includes('html') && !s.includes('xml')) return s.startsWith('text/') ? `${s}; charset=utf-8` : s;
  return 'application/octet-stream';
}

/** Compressing below this size gains nothing after headers; above the cap it costs too much build time. */
export const MIN_COMPRESS_BYTES = 256;
export const MAX_COMPRESS_BYTES = 16 * 1024 * 1024;

export function isCompressible(path: string, size: number): boolean {
  return size >= MIN_COMPRESS_BYTES && size <= MAX_COMPRESS_BYTES && COMPRESSIBLE_EXT.has(extensionOf(path));
}

export function isHtmlPath(path: string): boolean {
  const ext = extensionOf(path);
  return ext === 'html' || ext === 'htm';
}

// `app.3f2a1b9c.js`, `index-BxK3a9Zq.js`, `chunk.5d41402abc4b2a76.css`: a fingerprint of 8 or more
// characters next to the extension marks a file whose name changes when its content does, so
// browsers may keep it for a year.
const HASHED = /[.-]([0-9a-f]{8,}|(?=[A-Za-z0-9_]*[0-9])(?=[A-Za-z0-9_]*[A-Za-z])[A-Za-z0-9_]{8,12})\.[a-z0-9]+$/;
export function isHashedAsset(path: string): boolean {
  return !isHtmlPath(path) && HASHED.test(path.slice(path.lastIndexOf('/') + 1));
}

export type ViewerKind = 'image' | 'pdf' | 'text' | 'markdown';
const IMAGE = new Set(['png', 'jpg', 'jpeg', 'gif', 'webp', 'avif', 'svg', 'bmp', 'ico']);
const TEXT = new Set(['txt', 'csv', 'tsv', 'json', 'xml', 'yaml', 'yml', 'log', 'css', 'js', 'mjs', 'cjs', 'ts', 'py', 'rb', 'go', 'rs', 'java', 'c', 'h', 'cpp', 'sql', 'toml', 'ini', 'cfg', 'conf', 'vtt', 'ics']);

/** Which viewer page a non-HTML file gets on an auto-index site, if any. */
export function viewerKind(path: string): ViewerKind | null {
  const ext = extensionOf(path);
  if (IMAGE.has(ext)) return 'image';
  if (ext === 'pdf') return 'pdf';
  if (ext === 'md' || ext === 'markdown') return 'markdown';
  if (TEXT.has(ext)) return 'text';
  return null;
}
