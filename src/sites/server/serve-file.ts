import type { IncomingMessage, ServerResponse } from 'node:http';
import { parseRange } from '../../http/range.ts';
import type { AppDeps } from '../../context.ts';
import { MEMORY_BLOB_MAX, type FileEntry, type Site, type SiteCache, type Variant } from './site-cache.ts';

// One file of a bundle as an HTTP response: conditional GET (ETag), byte ranges, the gzip or
// brotli variant made at build time, and caching that matches the site's access mode.

const YEAR = 31_536_000;

/**
 * The header object a sites-server response was written with, kept on the response for site
 * analytics (src/sites/analytics/recorder.ts): its body length, type and gate are then read from
 * the object instead of being searched for in the serialized head (a string search per response).
 */
export const SENT_HEADERS = Symbol('cubby.sentHeaders');

export function writeHead(res: ServerResponse, status: number, headers: Record<string, string | string[]>): void {
  res.writeHead(status, headers);
  (res as unknown as Record<symbol, unknown>)[SENT_HEADERS] = headers;
}

export function baseHeaders(site: Site | null): Record<string, string> {
  const h: Record<string, string> = { 'x-content-type-options': 'nosniff', 'referrer-policy': 'strict-origin-when-cross-origin' };
  if (!site || site.noindex) h['x-robots-tag'] = 'noindex';
  return h;
}

function cacheControl(site: Site, entry: FileEntry, viewer: boolean): string {
  const scope = site.accessMode === 'public' ? 'public' : 'private';
  if (entry.hashed && !viewer) return `${scope}, max-age=${YEAR}, immutable`;
  // Everything else is revalidated (cheap: a 304 by ETag) so that a new bundle shows at once.
  return site.accessMode === 'public' ? 'public, max-age=0, must-revalidate' : 'private, no-cache';
}

/** Preferred encoding the client accepts (q > 0), among those the entry has. */
function pickEncoding(header: string | undefined, entry: FileEntry): 'br' | 'gzip' | null {
  if (!header || (!entry.br && !entry.gzip)) return null;
  let br = false;
  let gz = false;
  for (const part of header.split(',')) {
    const [name, ...params] = part.trim().toLowerCase().split(';');
    const q = params.map((p) => p.trim()).find((p) => p.startsWith('q='));
    if (q && Number(q.slice(2)) <= 0) continue;
    if (name === 'br') br = true;
    else if (name === 'gzip' || name === 'x-gzip') gz = true;
    else if (name === '*') br = gz = true;
  }
  if (br && entry.br) return 'br';
  if (gz && entry.gzip) return 'gzip';
  return null;
}

function etagMatches(header: string, etag: string): boolean {
  if (header.trim() === '*') return true;
  const bare = etag.slice(1, -1);
  for (const raw of header.split(',')) {
    const t = raw.trim().replace(/^W\//, '');
    if (t === etag || t === bare) return true;
  }
  return false;
}

export async function serveEntry(deps: AppDeps, cache: SiteCache, site: Site, entry: FileEntry, req: IncomingMessage, res: ServerResponse, opts: { status?: number; viewer?: boolean } = {}): Promise<void> {
  const viewer = opts.viewer === true && entry.viewer !== null;
  const status = opts.status ?? 200;
  const headers = baseHeaders(site);
  headers['cache-control'] = cacheControl(site, entry, viewer);
  let variant: Variant;
  if (viewer) {
    variant = entry.viewer!;
    headers['content-type'] = 'text/html; charset=utf-8';
  } else {
    headers['content-type'] = entry.type;
    if (entry.gzip || entry.br) headers.vary = 'Accept-Encoding';
    const range = status === 200 ? req.headers.range : undefined;
    const encoding = range ? null : pickEncoding(req.headers['accept-encoding'] as string | undefined, entry);
    variant = encoding === 'br' ? entry.br! : encoding === 'gzip' ? entry.gzip! : entry.identity;
    if (encoding) headers['content-encoding'] = encoding;
    if (status === 200) headers['accept-ranges'] = 'bytes';
  }
  headers.etag = variant.etag;

  const inm = req.headers['if-none-match'];
  if (status === 200 && inm && (etagMatches(inm, variant.etag) || etagMatches(inm, entry.identity.etag))) {
    delete headers['content-type'];
    writeHead(res, 304, headers);
    return void res.end();
  }

  let range: { start: number; end: number } | null = null;
  if (status === 200 && !viewer && !headers['content-encoding'] && req.headers.range) {
    const ifRange = req.headers['if-range'];
    if (!ifRange || ifRange === variant.etag) {
      const r = parseRange(req.headers.range, variant.size);
      if (r === 'unsatisfiable') {
        headers['content-range'] = `bytes */${variant.size}`;
        writeHead(res, 416, headers);
        return void res.end();
      }
      range = r;
    }
  }
  const length = range ? range.end - range.start + 1 : variant.size;
  headers['content-length'] = String(length);
  if (range) headers['content-range'] = `bytes ${range.start}-${range.end}/${variant.size}`;
  const code = range ? 206 : status;
  if (req.method === 'HEAD' || variant.size === 0) {
    writeHead(res, code, headers);
    return void res.end();
  }
  if (variant.size <= MEMORY_BLOB_MAX) {
    const bytes = cache.memoryBlob(variant) ?? (await cache.loadBlob(variant));
    writeHead(res, code, headers);
    return void res.end(range ? bytes.subarray(range.start, range.end + 1) : bytes);
  }
  const stream = await deps.blobs.read(variant.sha256, range ?? undefined);
  writeHead(res, code, headers);
  stream.on('error', () => res.destroy());
  stream.pipe(res);
}
