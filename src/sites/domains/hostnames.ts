import { domainToASCII } from 'node:url';
import type { Config } from '../../config.ts';
import { AppError, invalidArgument } from '../../errors.ts';
import { OWNERSHIP_VALUE_PREFIX, ownershipName, relativeName } from '../../domains/hostnames.ts';

// Hostname rules of custom site domains and the DNS records their owners publish. Ownership is
// the same TXT record as for custom email domains (one name, one value per claim); routing is a
// CNAME to the sites host, or A/AAAA records naming the sites server's addresses.

const LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

const refuse = (given: string, reason: string, message: string) => invalidArgument('hostname', message, { reason, hostname: given.slice(0, 300) });

/**
 * Normalises a hostname as a person types it: trimmed, lower case, one trailing dot dropped,
 * international names turned into their A-label (punycode) form. Refuses URLs, ports, IP
 * addresses, wildcards, single labels and local names with `INVALID_ARGUMENT` (`details.reason`),
 * and the service's own hosts with `SITE_DOMAIN_NOT_ALLOWED`.
 */
export function normalizeSiteHostname(given: string, config: Config): string {
  let h = given.trim();
  if (!h) throw refuse(given, 'empty', 'is required');
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(h) || /[/?#@\s]/.test(h)) throw refuse(given, 'not_a_hostname', 'must be a host name only, such as www.example.org (no scheme, path, user or spaces)');
  if (h.startsWith('[') || /^[0-9a-f:]+$/i.test(h) && h.includes('::')) throw refuse(given, 'ip_address', 'is an IP address; use a host name that points at the sites server');
  if (/:\d*$/.test(h)) throw refuse(given, 'port_not_allowed', 'must not carry a port: sites answer on the standard ports (80 and 443)');
  if (h.includes(':')) throw refuse(given, 'invalid_characters', 'may not contain ":"');
  if (h.endsWith('.')) h = h.slice(0, -1);
  if (h.includes('*')) throw refuse(given, 'wildcard', 'must be an exact host name (wildcards are not supported)');
  // domainToASCII lower-cases and applies IDNA (Bücher.example → xn--bcher-kva.example); it answers
  // '' for what no DNS name can be.
  const ascii = /^[\x00-\x7f]*$/.test(h) ? h.toLowerCase() : domainToASCII(h);
  if (!ascii) throw refuse(given, 'invalid_characters', 'is not a valid international domain name');
  if (ascii.length > 253) throw refuse(given, 'too_long', 'must be at most 253 characters');
  const labels = ascii.split('.');
  if (labels.length < 2) throw refuse(given, 'single_label', 'must have at least two labels, such as www.example.org');
  if (!labels.every((l) => LABEL.test(l))) throw refuse(given, 'invalid_characters', 'may hold letters a-z, digits and inner hyphens in labels of 1 to 63 characters');
  if (/^\d+$/.test(labels.at(-1)!)) throw refuse(given, 'ip_address', 'is an IP address; use a host name that points at the sites server');
  if (ascii === 'localhost' || ascii.endsWith('.localhost') || ascii.endsWith('.local')) throw refuse(given, 'not_public', 'is not a public host name');
  const own = serviceHosts(config).find((s) => ascii === s || ascii.endsWith(`.${s}`));
  if (own) throw new AppError('SITE_DOMAIN_NOT_ALLOWED', `${ascii} is ${ascii === own ? '' : 'under '}${own}, a host of this service; use a domain of your own.`, { field: 'hostname', reason: 'service_host', hostname: ascii });
  return ascii;
}

/** The service's own names: the sites host (every slug lives under it), the dashboard's, the mail domain and MX host. */
function serviceHosts(config: Config): string[] {
  const hosts = [config.mailDomain, config.mxHost];
  if (config.sitesHost) hosts.push(config.sitesHost.replace(/:\d+$/, ''));
  if (config.publicUrl) {
    try {
      hosts.push(new URL(config.publicUrl).hostname.toLowerCase());
    } catch {
      /* config validated it already */
    }
  }
  return [...new Set(hosts.filter((h) => h.includes('.')))];
}

/** What a CNAME names: the sites host (without its port), or `localhost` when none is configured. */
export function cnameTarget(config: Config): string {
  return config.sitesHost ? config.sitesHost.replace(/:\d+$/, '') : 'localhost';
}

export type RecordPurpose = 'ownership' | 'routing';

export interface SiteDnsRecord {
  type: 'TXT' | 'CNAME' | 'A' | 'AAAA' | 'ALIAS';
  name: string;
  value: string;
  purpose: RecordPurpose;
  zone: string;
  relative_name: string;
  status: 'found' | 'missing' | 'unchecked';
}

export function ownershipValue(token: string): string {
  return `${OWNERSHIP_VALUE_PREFIX}${token}`;
}

/**
 * The records to publish. A subdomain points at the sites host with a CNAME; a root domain
 * (which cannot hold a CNAME) names the sites server's addresses with A/AAAA records, or, when
 * none are configured, an ALIAS/ANAME (CNAME flattening) at the provider.
 */
export function requiredSiteRecords(
  d: { hostname: string; zone: string; ownership_token: string; ownership_found: number | null; routing_found: number | null },
  config: Config,
): SiteDnsRecord[] {
  const status = (found: number | null) => (found === null ? 'unchecked' : found ? 'found' : 'missing');
  const rec = (type: SiteDnsRecord['type'], name: string, value: string, purpose: RecordPurpose): SiteDnsRecord => ({
    type,
    name,
    value,
    purpose,
    zone: d.zone,
    relative_name: relativeName(name, d.zone),
    status: status(purpose === 'ownership' ? d.ownership_found : d.routing_found),
  });
  const records = [rec('TXT', ownershipName(d.hostname), ownershipValue(d.ownership_token), 'ownership')];
  const apex = d.hostname === d.zone;
  const addresses = config.siteDomains.addresses;
  if (!apex) records.push(rec('CNAME', d.hostname, cnameTarget(config), 'routing'));
  else if (addresses.length) for (const a of addresses) records.push(rec(a.includes(':') ? 'AAAA' : 'A', d.hostname, a, 'routing'));
  else records.push(rec('ALIAS', d.hostname, cnameTarget(config), 'routing'));
  return records;
}
