import { isIP } from 'node:net';
import type { DnsResolver } from '../inbound/authenticate.ts';
import { classifyAddress } from '../net/ip-policy.ts';
import type { DkimKey } from './dkim.ts';
import { oneLine, type Outcome } from './outcome.ts';

export interface RemoteOptions {
  /** smtp://user:pass@host:port (smtps:// for implicit TLS), or null for direct MX delivery. */
  relayUrl: string | null;
  /** DNS for MX and address lookups (tests serve their own zone). */
  resolver: DnsResolver;
  /** Port of recipients' MX hosts: 25, except in tests. */
  mxPort: number;
  /**
   * Whether MX hosts may be loopback, private, link-local and other non-public addresses
   * (CUBBY_SMTP_ALLOW_PRIVATE_MX: tests and closed networks). Off, such hosts are ignored.
   */
  allowPrivate: boolean;
  /** Our name in EHLO. */
  hostname: string;
  /** Whole-attempt cap, kept below the job lease so that no other worker starts the same delivery. */
  deadlineMs: number;
}

export interface RemoteMessage {
  raw: Buffer;
  address: string;
  envelopeFrom: string;
  dkim: DkimKey | null;
}

interface Hop {
  host: string;
  servername?: string;
  port: number;
  secure: boolean;
  auth?: { user: string; pass: string };
  /** Opportunistic TLS towards MX hosts (certificates there are often self-signed); verified for a relay. */
  verifyTls: boolean;
  route: string;
}

/** Delivers to the relay, or to the recipient domain's MX hosts in preference order. */
export async function deliverRemote(opts: RemoteOptions, m: RemoteMessage): Promise<Outcome> {
  if (opts.relayUrl) return attempt(opts, m, relayHop(opts.relayUrl));
  const domain = m.address.slice(m.address.lastIndexOf('@') + 1);
  const hops = await mxHops(opts, domain);
  if ('outcome' in hops) return hops.outcome;
  let last: Outcome | null = null;
  for (const hop of hops.list) {
    const outcome = await attempt(opts, m, hop);
    // A host that answered decided; one we could not talk to passes the message to the next.
    if (!outcome.reply.startsWith('connection:')) return outcome;
    last = outcome;
  }
  return last ?? { status: 'deferred', reply: 'connection: no reachable mail server', route: 'mx' };
}

function relayHop(url: string): Hop {
  const u = new URL(url);
  const secure = u.protocol === 'smtps:';
  return {
    host: u.hostname.replace(/^\[(.*)\]$/, '$1'),
    port: u.port ? Number(u.port) : secure ? 465 : 587,
    secure,
    auth: u.username ? { user: decodeURIComponent(u.username), pass: decodeURIComponent(u.password) } : undefined,
    verifyTls: true,
    route: 'relay',
  };
}

const isVoid = (err: unknown) => ['ENOTFOUND', 'ENODATA'].includes(String((err as { code?: unknown })?.code));

/**
 * MX hosts by preference, each resolved to an address; no MX means the domain itself (RFC 5321 §5.1).
 * A recipient domain is chosen by whoever controls its DNS (an account can make itself a
 * "correspondent" by mailing its mailbox from a domain it owns), so MX hosts on loopback, private,
 * link-local (cloud metadata) and other non-public addresses are ignored, as Exim's
 * `ignore_target_hosts` does for loopback: otherwise sending would let tenants reach SMTP services
 * inside our network and probe them through delivery statuses. Only public addresses are dialled.
 */
async function mxHops(opts: RemoteOptions, domain: string): Promise<{ list: Hop[] } | { outcome: Outcome }> {
  let mx: { exchange: string; priority: number }[];
  try {
    mx = ((await opts.resolver(domain, 'MX')) as { exchange: string; priority: number }[]) ?? [];
  } catch (err) {
    if (!isVoid(err)) return { outcome: { status: 'deferred', reply: oneLine(`dns: MX lookup for ${domain} failed (${(err as { code?: string })?.code ?? 'error'})`), route: 'mx' } };
    mx = [];
  }
  if (mx.some((r) => r.exchange === '' || r.exchange === '.')) return { outcome: { status: 'failed', reply: `dns: ${domain} accepts no mail (null MX)`, route: 'mx' } };
  const names = mx.length ? [...mx].sort((a, b) => a.priority - b.priority).map((r) => r.exchange.replace(/\.$/, '')) : [domain];
  const list: Hop[] = [];
  let dnsTrouble = false;
  let ignored: string | null = null;
  const usable = (ip: string) => {
    if (opts.allowPrivate) return true;
    const verdict = classifyAddress(ip);
    if (!verdict.public) ignored ??= `${ip} (${verdict.reason})`;
    return verdict.public;
  };
  for (const name of names.slice(0, 10)) {
    const ips = isIP(name) ? [name] : await addressesOf(opts.resolver, name).catch(() => ((dnsTrouble = true), [] as string[]));
    const ip = ips.find(usable);
    if (ip) list.push({ host: ip, servername: isIP(name) ? undefined : name, port: opts.mxPort, secure: false, verifyTls: false, route: `mx:${name}` });
  }
  if (!list.length) {
    if (dnsTrouble) return { outcome: { status: 'deferred', reply: `dns: addresses of ${domain}'s mail servers could not be looked up`, route: 'mx' } };
    if (ignored) return { outcome: { status: 'failed', reply: oneLine(`dns: ${domain}'s mail servers have only non-public addresses, which are not used: ${ignored}`), route: 'mx' } };
    return { outcome: { status: 'failed', reply: `dns: ${domain} has no mail server`, route: 'mx' } };
  }
  return { list };
}

/** The IPv4 then IPv6 addresses of a host, in answer order; throws only when a lookup failed and none were found. */
async function addressesOf(resolver: DnsResolver, name: string): Promise<string[]> {
  const out: string[] = [];
  let failure: unknown = null;
  for (const rrtype of ['A', 'AAAA']) {
    try {
      const answer = (await resolver(name, rrtype)) as unknown[];
      if (Array.isArray(answer)) out.push(...answer.map(String).filter((a) => isIP(a)));
    } catch (err) {
      if (!isVoid(err)) failure ??= err;
    }
  }
  if (!out.length && failure) throw failure;
  return out;
}

/** One SMTP transaction with one hop. The reply is kept whatever it says. */
async function attempt(opts: RemoteOptions, m: RemoteMessage, hop: Hop): Promise<Outcome> {
  // nodemailer is loaded on first use (about 3 MB of heap): many servers never send.
  const { default: nodemailer } = await import('nodemailer');
  const transport = nodemailer.createTransport({
    host: hop.host,
    port: hop.port,
    secure: hop.secure,
    name: opts.hostname,
    auth: hop.auth,
    tls: { servername: hop.servername, rejectUnauthorized: hop.verifyTls },
    connectionTimeout: 15_000,
    greetingTimeout: 15_000,
    socketTimeout: Math.max(1000, opts.deadlineMs - 30_000),
    logger: false,
    debug: false,
  });
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(Object.assign(new Error('delivery attempt took too long'), { code: 'ETIMEDOUT' })), opts.deadlineMs);
  });
  try {
    const info = await Promise.race([transport.sendMail({ envelope: { from: m.envelopeFrom, to: [m.address] }, raw: m.raw, dkim: m.dkim ?? undefined }), deadline]);
    return { status: 'sent', reply: oneLine(info.response), route: hop.route };
  } catch (err) {
    const e = err as { responseCode?: number; response?: string; code?: string; message?: string };
    if (typeof e.responseCode === 'number') {
      const reply = oneLine(e.response ?? `${e.responseCode} ${e.message ?? ''}`);
      // A relay refusing our credentials is our configuration, not the recipient: retry while it is fixed.
      const permanent = e.responseCode >= 500 && !(hop.route === 'relay' && e.code === 'EAUTH');
      return { status: permanent ? 'bounced' : 'deferred', reply, route: hop.route };
    }
    return { status: 'deferred', reply: oneLine(`connection: ${e.code ?? 'error'} ${e.message ?? ''}`), route: hop.route };
  } finally {
    clearTimeout(timer);
    transport.close();
  }
}
