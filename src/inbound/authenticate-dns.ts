import { Resolver } from 'node:dns/promises';

/**
 * DNS lookups as mailauth wants them: resolve(name, rrtype) → like dns.promises.resolve
 * (TXT → string[][], MX → {exchange, priority}[], A/AAAA → string[]); errors with code
 * ENOTFOUND/ENODATA mean "no record".
 */
export type DnsResolver = (name: string, rrtype: string) => Promise<unknown>;

export const DEFAULT_QUERY_TIMEOUT_MS = 5_000;

/** An Error with a dns-style `code`, the only thing mailauth looks at to tell "no record" from a failure. */
export function dnsError(code: string, message: string): Error & { code: string } {
  return Object.assign(new Error(message), { code });
}

const isVoid = (err: unknown) => {
  const code = (err as { code?: unknown } | null)?.code;
  return code === 'ENOTFOUND' || code === 'ENODATA';
};

/**
 * The real DNS, through node:dns/promises with a timeout per query. c-ares' own `timeout` applies
 * per server and try; the race below makes `timeoutMs` the hard cap whatever resolv.conf says.
 * `servers` (optional, "ip" or "ip:port") replaces the system's name servers.
 */
export function systemResolver(timeoutMs: number = DEFAULT_QUERY_TIMEOUT_MS, servers?: string[]): DnsResolver {
  const ms = Number.isFinite(timeoutMs) && timeoutMs > 0 ? Math.min(timeoutMs, 60_000) : DEFAULT_QUERY_TIMEOUT_MS;
  const resolver = new Resolver({ timeout: ms, tries: 1 });
  if (servers?.length) resolver.setServers(servers);
  return (name, rrtype) => {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(dnsError('ETIMEOUT', `DNS query for ${name} ${rrtype} timed out`)), ms);
    });
    return Promise.race([resolver.resolve(name, rrtype), timeout]).finally(() => clearTimeout(timer));
  };
}

export interface GuardedResolver {
  resolve: DnsResolver;
  /** Lower-cased names whose lookup failed for a reason other than "no record" (timeout, limit, server error). */
  failedNames: Set<string>;
  /** From now on every pending and new lookup fails with ETIMEOUT, so mailauth finishes quickly with temperror. */
  expire(): void;
}

/**
 * Wraps the injected resolver so one message can cost at most `maxLookups` queries and no query
 * outlives the deadline. mailauth bounds SPF itself (10 lookups, 2 void) but not the number of
 * DKIM signatures or ARC sets, and it waits forever on a query that never settles.
 */
export function guardResolver(base: DnsResolver, maxLookups: number): GuardedResolver {
  const failedNames = new Set<string>();
  let count = 0;
  let expired = false;
  let rejectAll: (err: Error) => void = () => {};
  const expiry = new Promise<never>((_, reject) => { rejectAll = reject; });
  expiry.catch(() => {}); // only ever observed through the races below

  const fail = (name: string, err: Error): never => {
    failedNames.add(name);
    throw err;
  };

  const resolve: DnsResolver = async (rawName, rrtype) => {
    const name = String(rawName).toLowerCase().replace(/\.$/, '');
    if (expired) return fail(name, dnsError('ETIMEOUT', 'authentication time limit reached'));
    if (++count > maxLookups) return fail(name, dnsError('ELIMIT', 'DNS lookup limit reached for this message'));
    let answer: unknown;
    try {
      // Promise.resolve().then(): a resolver that throws synchronously becomes a rejection.
      answer = await Promise.race([Promise.resolve().then(() => base(rawName, rrtype)), expiry]);
    } catch (err) {
      if (isVoid(err)) throw err;
      const code = typeof (err as { code?: unknown } | null)?.code === 'string' ? (err as { code: string }).code : 'ESERVFAIL';
      return fail(name, dnsError(code, `DNS failure for ${name} ${rrtype}`));
    }
    // mailauth indexes answers as arrays; anything else from an injected resolver counts as no data.
    if (!Array.isArray(answer)) throw dnsError('ENODATA', `no ${rrtype} data for ${name}`);
    return rrtype === 'TXT' ? answer.map((row) => (Array.isArray(row) ? row.map(String) : [String(row)])) : answer;
  };

  return {
    resolve,
    failedNames,
    expire() {
      expired = true;
      rejectAll(dnsError('ETIMEOUT', 'authentication time limit reached'));
    },
  };
}
