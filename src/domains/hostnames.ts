import { invalidArgument } from '../errors.ts';

// Hostname rules and the DNS records a custom receiving domain publishes.

/** Label prefixes of the two TXT records: service-specific, so they never clash with others. */
export const OWNERSHIP_LABEL = '_cubby-verification';
export const PROVIDER_LABEL = '_cubby-provider';
export const OWNERSHIP_VALUE_PREFIX = 'cubby-verification=';
export const PROVIDER_VALUE_PREFIX = 'cubby-provider=';
export const MX_PRIORITY = 10;

const LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

/**
 * Normalises a hostname as given (trimmed, lower-case, no trailing dot) and refuses what cannot
 * receive mail here: IP addresses, single labels, bad labels, numeric top-level labels, and the
 * platform mail domain or names under it. Internationalised names must be sent in A-label
 * (punycode) form, as DNS stores them.
 */
export function normalizeHostname(given: string, mailDomain: string, field = 'hostname'): string {
  const h = given.trim().toLowerCase().replace(/\.$/, '');
  const bad = (why: string) => invalidArgument(field, why, { hostname: given.slice(0, 300) });
  if (!h || h.length > 253) throw bad('must be a host name of at most 253 characters');
  const labels = h.split('.');
  if (labels.length < 2) throw bad('must have at least two labels, such as inbox.example.com');
  if (!labels.every((l) => LABEL.test(l))) throw bad('may hold letters a-z, digits and inner hyphens in labels of 1 to 63 characters (use the punycode form of international names)');
  if (/^\d+$/.test(labels.at(-1)!)) throw bad('is not a host name (numeric top-level label)');
  if (h === mailDomain || h.endsWith(`.${mailDomain}`)) throw bad('is the platform mail domain or under it; it needs no claim');
  if (h === 'localhost' || h.endsWith('.localhost')) throw bad('is not a public host name');
  return h;
}

export interface DnsRecord {
  type: 'TXT' | 'MX';
  name: string;
  value: string;
  purpose: 'ownership' | 'ses_verification' | 'receiving';
  zone: string;
  relative_name: string;
}

/** `name` relative to `zone` (`@` for the apex), as most DNS providers' forms want it. */
export function relativeName(name: string, zone: string): string {
  if (name === zone) return '@';
  return name.endsWith(`.${zone}`) ? name.slice(0, -(zone.length + 1)) : name;
}

export function ownershipName(hostname: string): string {
  return `${OWNERSHIP_LABEL}.${hostname}`;
}

export function providerName(hostname: string): string {
  return `${PROVIDER_LABEL}.${hostname}`;
}

/** The three records to publish, in the order to publish them. */
export function requiredRecords(d: { hostname: string; zone: string; ownership_token: string; provider_token: string }, mxHost: string): DnsRecord[] {
  const rec = (type: DnsRecord['type'], name: string, value: string, purpose: DnsRecord['purpose']): DnsRecord => ({
    type,
    name,
    value,
    purpose,
    zone: d.zone,
    relative_name: relativeName(name, d.zone),
  });
  return [
    rec('TXT', ownershipName(d.hostname), `${OWNERSHIP_VALUE_PREFIX}${d.ownership_token}`, 'ownership'),
    // The spec names this purpose after the original's mail provider; here it proves the same
    // thing for Cubby's receiving side (the hostname is meant to receive through this service).
    rec('TXT', providerName(d.hostname), `${PROVIDER_VALUE_PREFIX}${d.provider_token}`, 'ses_verification'),
    rec('MX', d.hostname, `${MX_PRIORITY} ${mxHost}`, 'receiving'),
  ];
}

/** A subdomain to suggest instead of a root domain (whose MX would take all of its mail). */
export function suggestedSubdomain(hostname: string): string {
  return `inbox.${hostname}`;
}

export function rootGuidance(hostname: string): string {
  return (
    `${hostname} is a root domain: its MX record decides where all mail for @${hostname} goes, so pointing it here ` +
    `would move every address of the domain to this service. Claim a subdomain such as ${suggestedSubdomain(hostname)} ` +
    `unless that is what you want.`
  );
}
