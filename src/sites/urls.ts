import type { Config } from '../config.ts';
import type { PublicationKind } from './sites.schema.ts';

// Sites live on their own origin, never the dashboard's: `<label>.<sites host>`, where the label is
// the slug (main site) or `preview-<slug>`. Default host: `localhost` on the sites port (browsers
// and curl send *.localhost to loopback); CUBBY_SITES_HOST names the production domain (for
// example `sites.example.com`, served behind the same TLS proxy as CUBBY_PUBLIC_URL).

export function hostLabel(kind: PublicationKind, slug: string): string {
  return kind === 'preview' ? `preview-${slug}` : slug;
}

/** The origin of a site, e.g. `http://docs.localhost:8081` or `https://docs.sites.example.com`. */
export function siteOrigin(config: Config, label: string, boundPort: number | null): string {
  if (config.sitesHost) {
    const scheme = config.publicUrl?.startsWith('https:') ? 'https' : 'http';
    return `${scheme}://${label}.${config.sitesHost}`;
  }
  return `http://${label}.localhost:${boundPort ?? config.sitesPort}`;
}

/** The host label a request is for, from its Host header, or null when it is not one of ours. */
export function labelFromHost(config: Config, hostHeader: string | undefined): string | null {
  if (!hostHeader) return null;
  const host = hostHeader.toLowerCase().replace(/\.$/, '');
  const suffix = config.sitesHost ? `.${config.sitesHost.toLowerCase()}` : '.localhost';
  // With CUBBY_SITES_HOST the port (if any) is part of the configured host; by default any port.
  const name = config.sitesHost ? host : host.replace(/:\d+$/, '');
  if (!name.endsWith(suffix)) return null;
  const label = name.slice(0, -suffix.length);
  return /^[a-z0-9-]{1,63}$/.test(label) ? label : null;
}

/**
 * True when sites would share cookies with the dashboard: the dashboard's host is the sites host
 * or one of its labels (a slug could claim it), or the sites host sits under the dashboard's host
 * (a site could set cookies the dashboard reads). Ports do not separate cookies, so they are ignored.
 */
export function sitesHostOverlapsDashboard(sitesHost: string, publicUrl: string): boolean {
  let dashboard: string;
  try {
    dashboard = new URL(publicUrl).hostname.toLowerCase();
  } catch {
    return false;
  }
  const sites = sitesHost.toLowerCase().replace(/:\d+$/, '');
  return dashboard === sites || dashboard.endsWith(`.${sites}`) || sites.endsWith(`.${dashboard}`);
}

/**
 * The origin of a site on a custom domain: https when certificates come from ACME (or the sites
 * host is served over https behind a proxy), without a port in production; with the sites port by
 * default (development and tests, where nothing listens on 80 or 443).
 */
export function customDomainOrigin(config: Config, hostname: string, boundPort: number | null): string {
  if (config.siteDomains.acme) return `https://${hostname}${config.siteDomains.tlsPort === 443 ? '' : `:${config.siteDomains.tlsPort}`}`;
  if (config.sitesHost) return `${config.publicUrl?.startsWith('https:') ? 'https' : 'http'}://${hostname}`;
  return `http://${hostname}:${boundPort ?? config.sitesPort}`;
}

/**
 * What a request is for, from its Host header: a host label of ours (`docs`, `preview-docs`; no
 * dots), else a custom hostname (lower case, no port or trailing dot; always holds a dot), else null.
 * The two never collide, so one cache serves both.
 */
export function siteKeyFromHost(config: Config, hostHeader: string | undefined): string | null {
  const label = labelFromHost(config, hostHeader);
  if (label || !hostHeader) return label;
  const name = hostHeader.toLowerCase().replace(/:\d{1,5}$/, '').replace(/\.$/, '');
  return name.length <= 253 && /^[a-z0-9-]{1,63}(\.[a-z0-9-]{1,63})+$/.test(name) ? name : null;
}
