import type { AppDeps } from '../context.ts';
import { AppError } from '../errors.ts';
import { systemResolver, type DnsResolver } from '../inbound/authenticate.ts';
import './domains.schema.ts';

// DNS questions about a custom domain, asked through the configured resolver (no cache: a
// check must see what is published now). "No such record" is an answer; anything else
// (timeout, SERVFAIL, refused) is a temporary failure the caller reports as retryable.

export const DNS_QUERY_TIMEOUT_MS = 5_000;

export class DnsUnavailable extends Error {
  constructor(
    readonly name_: string,
    readonly code: string,
  ) {
    super(`DNS query for ${name_} failed (${code})`);
  }
}

/** The resolver for domain checks: the app's (tests inject one), else CUBBY_DNS_SERVERS or the system's. */
export function domainResolver(deps: AppDeps): DnsResolver {
  return deps.domainDns ?? systemResolver(DNS_QUERY_TIMEOUT_MS, deps.config.dnsServers ? [...deps.config.dnsServers] : undefined);
}

function isNoRecord(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === 'ENOTFOUND' || code === 'ENODATA';
}

async function ask<T>(resolve: DnsResolver, name: string, rrtype: string): Promise<T | null> {
  try {
    return (await resolve(name, rrtype)) as T;
  } catch (err) {
    if (isNoRecord(err)) return null;
    throw new DnsUnavailable(name, String((err as { code?: unknown })?.code ?? 'ERROR'));
  }
}

/** TXT strings at `name` (each record's chunks joined), or [] when there are none. */
export async function txtValues(resolve: DnsResolver, name: string): Promise<string[]> {
  const rows = await ask<(string[] | string)[]>(resolve, name, 'TXT');
  return (rows ?? []).map((r) => (Array.isArray(r) ? r.join('') : String(r)));
}

/** MX exchanges at `name`, lower-cased without the trailing dot, or [] when there are none. */
export async function mxExchanges(resolve: DnsResolver, name: string): Promise<string[]> {
  const rows = await ask<{ exchange: string }[]>(resolve, name, 'MX');
  return (rows ?? []).map((r) => String(r.exchange).toLowerCase().replace(/\.$/, '')).filter(Boolean);
}

/**
 * The zone a hostname's records live in: the nearest name at or above it that has an SOA
 * record, stopping before the top-level label. Without any answer (a name not delegated yet)
 * the last two labels are assumed.
 */
export async function zoneOf(resolve: DnsResolver, hostname: string): Promise<string> {
  const labels = hostname.split('.');
  for (let i = 0; i < labels.length - 1; i++) {
    const name = labels.slice(i).join('.');
    if (await ask(resolve, name, 'SOA')) return name;
  }
  return labels.slice(-2).join('.');
}

/** The API's 503 for a DNS outage during a request. */
export function dnsUnavailableError(err: DnsUnavailable): AppError {
  return new AppError('EMAIL_DOMAIN_DNS_UNAVAILABLE', undefined, { retryable: true, retry_after: 30, name: err.name_, dns_error: err.code });
}

/** CNAME targets, or A/AAAA addresses, at `name` (lower-cased, no trailing dot), or [] when there are none. */
export async function hostValues(resolve: DnsResolver, name: string, rrtype: 'CNAME' | 'A' | 'AAAA'): Promise<string[]> {
  const rows = await ask<string[]>(resolve, name, rrtype);
  return (rows ?? []).map((r) => String(r).toLowerCase().replace(/\.$/, '')).filter(Boolean);
}
