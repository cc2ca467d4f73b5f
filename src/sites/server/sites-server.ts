import { isIP } from 'node:net';
import { performance } from 'node:perf_hooks';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { AppDeps } from '../../context.ts';
import { labelFromHost, siteKeyFromHost } from '../urls.ts';
import { SiteCache, type FileEntry, type Site } from './site-cache.ts';
import { baseHeaders, serveEntry, writeHead } from './serve-file.ts';
import { hasAccess, postCode, postEmail, postPassword, safeNext, type Send } from './access.ts';
import { emailPage, noSitePage, notFoundPage, passwordPage, unknownHostPage } from './pages.ts';
import { renamedSlugOrigin } from './slug-redirect.ts';
import { startSiteAnalytics, type SiteAnalytics } from '../analytics/recorder.ts';
import { ACME_PREFIX, TLS_ASK_PATH, acmeChallengeAnswer, askedDomain, canonicalLocation } from './custom-host.ts';
import { createTlsSitesServer } from './tls.ts';

// The sites server: published websites on their own origin (never the dashboard's, so a site's
// scripts can never read the dashboard's cookies), routed by the Host header. Plain node:http: each
// request is a Map lookup and a write from memory on the hot path.

const FORM_LIMIT = 8 * 1024;
const ROBOTS_NOINDEX = 'User-agent: *\nDisallow: /\n';

export interface SitesServer {
  port: number;
  /** Writes the analytics counted so far (they are also written on a timer and at close). */
  flushAnalytics(): Promise<void>;
  /** The TLS listener's port (ACME on), else null. */
  tlsPort: number | null;
  close(): Promise<void>;
}

function sendText(res: ServerResponse, site: Site | null, status: number, body: string, type: string, extra: Record<string, string | string[]> = {}) {
  const bytes = Buffer.from(body);
  writeHead(res, status, { ...baseHeaders(site), 'content-type': type, 'content-length': String(bytes.length), 'cache-control': 'no-store', ...extra });
  res.end(bytes);
}

async function readForm(req: IncomingMessage): Promise<URLSearchParams | null> {
  if (!/^application\/x-www-form-urlencoded\b/i.test(String(req.headers['content-type'] ?? ''))) return null;
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > FORM_LIMIT) return null;
    chunks.push(chunk as Buffer);
  }
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
}

/** No Origin (or an opaque one) passes; a foreign or malformed one (which URL would throw on) does not. */
function sameOrigin(origin: string | undefined, host: string | undefined): boolean {
  if (!origin || origin === 'null') return true;
  try {
    return new URL(origin).host === host;
  } catch {
    return false;
  }
}

/** A path without a file extension looks like a route of a single-page app. */
function looksLikeRoute(path: string): boolean {
  const last = path.slice(path.lastIndexOf('/') + 1);
  return !last.includes('.') || /\.html?$/i.test(last);
}

function lookup(site: Site, path: string): FileEntry | { redirect: true } | null {
  const files = site.bundle.files;
  if (path === '') return files.get(site.bundle.entryPath) ?? null;
  const hit = files.get(path);
  if (hit) return hit;
  if (path.endsWith('/')) return files.get(`${path}index.html`) ?? files.get(`${path}index.htm`) ?? null;
  if (files.has(`${path}/index.html`) || files.has(`${path}/index.htm`)) return { redirect: true };
  return files.get(`${path}.html`) ?? null;
}

class Served {
  site: Site | null = null;
}

export function createSitesHandler(deps: AppDeps, cache: SiteCache, log: { error: (o: unknown, m: string) => void }, analytics: SiteAnalytics | null = null) {
  const secure = deps.config.sitesHost !== undefined && deps.config.publicUrl?.startsWith('https:') === true;
  const scheme = secure ? 'https' : 'http';
  // `served.site`: the site a response is served from, for analytics: set only once the host (a
  // label of ours or a verified custom domain) resolved to a live site and no redirect to its
  // canonical host was due, so unknown, foreign or expired hosts and redirects are never counted.
  const handle = async (req: IncomingMessage, res: ServerResponse, served: Served | null): Promise<void> => {
    // A host label of ours (`docs`, `preview-docs`) or a custom hostname (src/sites/urls.ts).
    const key = siteKeyFromHost(deps.config, req.headers.host);
    const customHost = key !== null && key.includes('.');
    const method = req.method ?? 'GET';
    if (customHost && req.url?.startsWith(ACME_PREFIX)) {
      const answer = await acmeChallengeAnswer(deps, key, req.url.slice(ACME_PREFIX.length));
      return answer ? sendText(res, null, 200, answer, 'text/plain') : sendText(res, null, 404, 'Not found', 'text/plain; charset=utf-8');
    }
    // Asked on the sites server's own address only (not on a site's host), and answered as the site
    // lookup would: a verified domain of a live site (not suspended, archived or unpublished).
    if (req.url?.startsWith(`${TLS_ASK_PATH}?`) && (key === null || isIP(key) !== 0 || key === deps.config.sitesHost?.replace(/:\d+$/, ''))) {
      const domain = askedDomain(req.url);
      const ok = domain !== null && (await cache.resolve(domain)) !== null;
      return sendText(res, null, ok ? 200 : 404, ok ? 'ok' : 'not a verified domain', 'text/plain; charset=utf-8');
    }
    let site = key ? cache.peek(key) : null;
    if (site === undefined) site = await cache.resolve(key!);
    if (site && site.expiresAt !== null && site.expiresAt <= deps.now().getTime()) site = null;
    if (!site) {
      if (customHost) return sendText(res, null, 404, method === 'HEAD' ? '' : unknownHostPage(key), 'text/html; charset=utf-8');
      // A renamed slug: 301 to the same path on the current address (the raw, still-encoded URL).
      const moved = key ? await renamedSlugOrigin(deps, key) : null;
      if (moved) return sendText(res, null, 301, '', 'text/plain; charset=utf-8', { location: `${moved}${(req.url ?? '/').startsWith('/') ? req.url : '/'}` });
      return sendText(res, null, 404, method === 'HEAD' ? '' : noSitePage(), 'text/html; charset=utf-8');
    }
    // A site with a verified primary domain answers only there: its slug host and other domains redirect.
    const canonical = canonicalLocation(deps, key!, site.canonicalHost, req) ?? (site.httpsOnly && !(req.socket as { encrypted?: boolean }).encrypted ? canonicalLocation(deps, key!, key, req, true) : null);
    if (canonical) return sendText(res, null, 301, '', 'text/plain; charset=utf-8', { location: canonical });
    if (served) served.site = site;

    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const rawPath = q < 0 ? url : url.slice(0, q);
    const query = q < 0 ? '' : url.slice(q + 1);
    let path: string;
    try {
      path = decodeURIComponent(rawPath).slice(1);
    } catch {
      return sendText(res, site, 400, 'Bad request', 'text/plain; charset=utf-8');
    }
    if (!rawPath.startsWith('/') || path.includes('\0') || path.split('/').some((s) => s === '..' || s === '.')) return sendText(res, site, 400, 'Bad request', 'text/plain; charset=utf-8');

    if (method === 'POST' && path.startsWith('.cubby/')) {
      // Forms post only from the site's own pages.
      if (!sameOrigin(req.headers.origin, req.headers.host)) return sendText(res, site, 403, 'Forbidden', 'text/plain; charset=utf-8');
      const form = await readForm(req);
      if (!form) return sendText(res, site, 400, 'Bad request', 'text/plain; charset=utf-8');
      const send: Send = (status, body, headers = {}) => sendText(res, site, status, body, 'text/html; charset=utf-8', headers);
      // Served over our own TLS (ACME certificates on custom domains): the cookie is Secure too.
      const overTls = secure || (req.socket as { encrypted?: boolean }).encrypted === true;
      if (path === '.cubby/password' && site.accessMode === 'password') return postPassword(deps, site, req, form, send, overTls);
      if (path === '.cubby/email' && site.accessMode === 'require_email') return postEmail(deps, site, req, form, send, `${overTls ? 'https' : scheme}://${req.headers.host}`);
      if (path === '.cubby/code' && site.accessMode === 'require_email') return postCode(deps, site, req, form, send, overTls);
      return sendText(res, site, 404, notFoundPage(true), 'text/html; charset=utf-8');
    }
    if (method !== 'GET' && method !== 'HEAD') return sendText(res, site, 405, 'Method not allowed', 'text/plain; charset=utf-8', { allow: 'GET, HEAD' });
    if (path === 'robots.txt' && site.noindex) return sendText(res, site, 200, ROBOTS_NOINDEX, 'text/plain; charset=utf-8');

    if (site.accessMode !== 'public' && !hasAccess(deps, site, req)) {
      // The gate is a normal page (200), as on the original service: clients that check "the
      // published URL responds" succeed, and the content stays locked. Failed attempts answer 401.
      // X-Cubby-Access tells a client which gate this is without reading the page.
      const next = safeNext(url);
      const gate = site.accessMode === 'password' ? 'password_required' : 'email_required';
      return sendText(res, site, 200, site.accessMode === 'password' ? passwordPage(next, null) : emailPage(next, null), 'text/html; charset=utf-8', { 'x-cubby-access': gate });
    }

    let found = lookup(site, path);
    // The Location is the request's own (still percent-encoded) path: the decoded one may hold
    // characters a header cannot carry.
    if (found && 'redirect' in found) return sendText(res, site, 301, '', 'text/plain; charset=utf-8', { location: `${rawPath}/${query ? `?${query}` : ''}` });
    if (!found && site.siteMode === 'spa' && looksLikeRoute(path)) found = site.bundle.files.get(site.bundle.entryPath) ?? null;
    if (found) return serveEntry(deps, cache, site, found, req, res, { viewer: query === 'view' || query.startsWith('view&') || query.startsWith('view=') });
    const custom = site.bundle.files.get('404.html');
    if (custom) return serveEntry(deps, cache, site, custom, req, res, { status: 404 });
    return sendText(res, site, 404, method === 'HEAD' ? '' : notFoundPage(site.noindex), 'text/html; charset=utf-8');
  };

  return (req: IncomingMessage, res: ServerResponse) => {
    // One line and one metrics sample per request, as on the API listener: the site's label, never
    // the path or query (a visitor's link may carry a token).
    const t0 = performance.now();
    // One small object per request, and only when counting (a WeakMap entry per response cost more).
    const served = analytics ? new Served() : null;
    res.once('finish', () => {
      const ms = performance.now() - t0;
      const method = req.method ?? 'GET';
      const labels = { method, route: 'site', status: String(res.statusCode) };
      deps.metrics.httpRequests.inc(labels);
      deps.metrics.httpDuration.observe(labels, ms / 1000);
      const label = labelFromHost(deps.config, req.headers.host);
      deps.log.info({ http: { method, route: 'site', site: label, status: res.statusCode, ms: Math.round(ms * 10) / 10 } }, 'request');
      if (served?.site) analytics!.countResponse(req, res, served.site);
    });
    handle(req, res, served).catch((err) => {
      log.error({ err }, 'sites server request failed');
      if (!res.headersSent) sendText(res, null, 500, 'Internal error', 'text/plain; charset=utf-8');
      else res.destroy();
    });
  };
}

export async function startSitesServer(deps: AppDeps, host: string, port: number, log: { error: (o: unknown, m: string) => void }): Promise<SitesServer> {
  const cache = new SiteCache(deps);
  const analytics = await startSiteAnalytics(deps);
  const handler = createSitesHandler(deps, cache, log, analytics);
  const server = http.createServer({ requestTimeout: 30_000, headersTimeout: 20_000, maxHeaderSize: 16 * 1024 }, handler);
  server.keepAliveTimeout = 5000;
  const listen = (s: http.Server, p: number) =>
    new Promise<void>((resolve, reject) => {
      s.once('error', reject);
      s.listen(p, host, () => resolve());
    });
  await listen(server, port);
  // With ACME, custom domains are also served over TLS here, each with its own certificate (SNI).
  const tls = deps.config.siteDomains.acme ? createTlsSitesServer(deps, handler) : null;
  if (tls) await listen(tls, deps.config.siteDomains.tlsPort);
  return {
    port: (server.address() as AddressInfo).port,
    flushAnalytics: async () => analytics?.flush(),
    tlsPort: tls ? (tls.address() as AddressInfo).port : null,
    async close() {
      cache.close();
      for (const s of [server, tls]) s?.closeAllConnections();
      await Promise.all([server, tls].map((s) => s && new Promise<void>((resolve) => s.close(() => resolve()))));
      // After the listeners: every response that finished is counted, and written before the database closes.
      await analytics?.stop();
    },
  };
}
