import type { IncomingMessage, ServerResponse } from 'node:http';

// What one finished sites-server response contributes to analytics, read from the request and
// the response alone (so the sites server needs one call, when the response has finished).

export interface Hit {
  publicationId: string;
  /** The request's own host, to tell a link from the site itself from an outside referrer. */
  host: string;
  method: string;
  status: number;
  bytes: number;
  /** The raw (percent-encoded) path, without the query: a query may carry a visitor's token. */
  path: string;
  /** A page view: a GET of an HTML page answered 2xx or 304, not a bot, not an access gate. */
  view: boolean;
  referrer: string | null;
  ip: string;
  userAgent: string;
}

const MAX_PATH = 300;
// Obvious robots and tools; they still count as requests (bytes, status codes), not as views.
const BOT = /bot\b|bot\/|crawl|spider|slurp|facebookexternalhit|preview|monitor|headless|lighthouse|curl\/|wget\/|python-requests|go-http-client|node-fetch|undici/i;

/**
 * A header of the finished response. The sites server passes its headers to writeHead(), which
 * Node then keeps only in the serialized head (`_header`, what morgan and on-headers read too),
 * not for getHeader(); so read it there, once the response is finished.
 */
function sentHeader(res: ServerResponse, name: string): string | undefined {
  const set = res.getHeader(name);
  if (set !== undefined) return String(set);
  const head = (res as unknown as { _header?: string | null })._header;
  if (!head) return undefined;
  // The sites server writes header names in lower case (src/sites/server), so an exact search is
  // enough; lower-casing the whole head for an absent header (x-cubby-access, on almost every
  // response) cost a string copy per response, visible in bench:sites.
  const at = head.indexOf(`\r\n${name}:`);
  if (at < 0) return undefined;
  const end = head.indexOf('\r\n', at + 2);
  return head.slice(at + name.length + 3, end < 0 ? undefined : end).trim();
}

function looksLikePage(path: string): boolean {
  const last = path.slice(path.lastIndexOf('/') + 1);
  return last === '' || !last.includes('.') || /\.html?$/i.test(last);
}

/** The referring host, only when it is a web URL of another host (own-site navigation is not a referrer). */
export function referrerHost(header: string | undefined, ownHost: string): string | null {
  if (!header) return null;
  try {
    const u = new URL(header);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') return null;
    const host = u.hostname.toLowerCase();
    if (!host || u.host.toLowerCase() === ownHost.toLowerCase()) return null;
    return host.length > 253 ? null : host;
  } catch {
    return null;
  }
}

/** `ipOf` is called only for page views (the address serves visitors and countries, nothing else). */
export function hitOf(req: IncomingMessage, res: ServerResponse, publicationId: string, ipOf: () => string): Hit {
  const method = req.method ?? 'GET';
  const status = res.statusCode;
  const url = req.url ?? '/';
  const q = url.indexOf('?');
  const path = (q < 0 ? url : url.slice(0, q)).slice(0, MAX_PATH) || '/';
  const type = sentHeader(res, 'content-type') ?? '';
  const length = Number(sentHeader(res, 'content-length'));
  const userAgent = typeof req.headers['user-agent'] === 'string' ? req.headers['user-agent'] : '';
  const gated = sentHeader(res, 'x-cubby-access') !== undefined;
  const ok = (status >= 200 && status < 300) || status === 304;
  const view = method === 'GET' && ok && !gated && !path.startsWith('/.cubby/') && (type.startsWith('text/html') || (status === 304 && looksLikePage(path))) && !BOT.test(userAgent);
  const host = String(req.headers.host ?? '');
  return {
    publicationId,
    host,
    method,
    status,
    bytes: method === 'HEAD' || !Number.isFinite(length) ? 0 : length,
    path,
    view,
    referrer: view ? referrerHost(typeof req.headers.referer === 'string' ? req.headers.referer : undefined, host) : null,
    ip: view ? ipOf() : '',
    userAgent,
  };
}
