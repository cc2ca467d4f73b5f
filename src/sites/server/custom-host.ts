import type { IncomingMessage } from 'node:http';
import type { AppDeps } from '../../context.ts';

// What the sites server does for custom domains besides serving them: the ACME HTTP-01 answer
// (`/.well-known/acme-challenge/<token>`, read from the database so any node can answer the
// ACME server, whichever one asked for the certificate), and the redirect to the primary domain.

export const ACME_PREFIX = '/.well-known/acme-challenge/';

/** The key authorization for `token` if it belongs to a domain named `host`, else null. */
export async function acmeChallengeAnswer(deps: AppDeps, host: string, token: string): Promise<string | null> {
  if (!/^[A-Za-z0-9_-]{1,200}$/.test(token)) return null;
  const row = await deps.db.selectFrom('site_domains').select(['hostname', 'acme_key_authorization']).where('acme_token', '=', token).executeTakeFirst();
  return row && row.hostname === host ? row.acme_key_authorization : null;
}

/**
 * Where a request on another host of a site with a verified primary domain goes (301), or null;
 * `sameHost`: the https address of this very host (plain HTTP on a domain with a certificate).
 */
export function canonicalLocation(deps: AppDeps, key: string, canonicalHost: string | null, req: IncomingMessage, sameHost = false): string | null {
  if (!canonicalHost || (key === canonicalHost && !sameHost)) return null;
  const url = req.url ?? '/';
  return `${deps.siteDomainUrl(canonicalHost)}${url.startsWith('/') ? url : '/'}`;
}

/** Caddy's on-demand TLS "ask" endpoint on the sites server (docs/sites.md): 200 only for verified domains. */
export const TLS_ASK_PATH = '/.well-known/cubby/tls-allowed';

/** The hostname an "ask" request names, normalised; null when missing or not a hostname. */
export function askedDomain(url: string): string | null {
  const domain = new URLSearchParams(url.slice(url.indexOf('?') + 1)).get('domain')?.toLowerCase().replace(/\.$/, '');
  if (!domain || domain.length > 253 || !domain.includes('.')) return null;
  return domain;
}
