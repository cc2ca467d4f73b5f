import type { IncomingMessage } from 'node:http';

// What one finished sites-server response contributes to analytics, read from the request and the
// response alone. Split in two so that a response costs as little as possible when it finishes:
// - for every response, without allocating: status, body bytes, and whether it may be a page view,
//   read from the header object the sites server wrote (its writeHead helper keeps it on the
//   response as SENT_HEADERS: Node keeps writeHead's headers only in the serialized head);
// - everything else (robot test, path, referrer host, client address, visitor hash) runs only for
//   page views, in a batch after the responses of an event-loop turn (SiteAnalytics.drainViews).

const MAX_PATH = 300;
// Obvious robots and tools; they still count as requests (bytes, status codes), not as views.
export const BOT = /bot\b|bot\/|crawl|spider|slurp|facebookexternalhit|preview|monitor|headless|lighthouse|curl\/|wget\/|python-requests|go-http-client|node-fetch|undici/i;

/** The raw (percent-encoded) path of a request URL, without the query (which may carry a token). */
export function pathOf(url: string): string {
  const q = url.indexOf('?');
  return (q < 0 ? url : url.slice(0, q)).slice(0, MAX_PATH) || '/';
}

/** For a 304 (no content type sent): a path that names a page (no extension, `.html`, or a folder). */
export function looksLikePage(url: string): boolean {
  const q = url.indexOf('?');
  const path = q < 0 ? url : url.slice(0, q);
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

/**
 * A page-view candidate: a GET answered 2xx (with an HTML body) or 304 (of a page-like path), not
 * an access gate, not under `/.cubby/`. Only the robot test remains (done in the batch).
 */
export function maybeView(req: IncomingMessage, status: number, html: boolean, gate: boolean): boolean {
  if (req.method !== 'GET') return false;
  if (status === 304) {
    if (!looksLikePage(req.url ?? '/')) return false;
  } else if (status < 200 || status >= 300 || !html) return false;
  return !gate && !(req.url ?? '/').startsWith('/.cubby/');
}
