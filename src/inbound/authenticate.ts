import { isIP } from 'node:net';
import type { AuthenticateOptions, AuthenticateResult, DNSResolver } from 'mailauth';
import { guardResolver, type DnsResolver, type GuardedResolver } from './authenticate-dns.ts';
import { feed, screenMessage } from './authenticate-input.ts';
import { patchMailauthHeaderScan, patchMailauthLineBreaks } from './mailauth-patches.ts';

export { systemResolver, type DnsResolver } from './authenticate-dns.ts';

export type AuthVerdict = 'pass' | 'fail' | 'softfail' | 'neutral' | 'none' | 'temperror' | 'permerror' | 'policy';

export interface AuthSummary {
  /** `identity`: which SPF identity was checked: the MAIL FROM domain, or the HELO name for the null sender. */
  spf: { result: AuthVerdict; domain: string | null; identity?: 'mailfrom' | 'helo' };
  dkim: { result: AuthVerdict; domain: string | null; selector: string | null; aligned: boolean }[];
  dmarc: { result: AuthVerdict; policy: string | null; domain: string | null };
  arc: { result: AuthVerdict };
  /** The Authentication-Results header value (authserv-id = the `mta` hostname). */
  header: string;
}

/**
 * What the helpers below read: an AuthSummary, or one read back from `emails.auth_results` JSON
 * (typed loosely, as stored data is: every field may be missing).
 */
export interface StoredAuthResults {
  spf?: { result?: string | null; identity?: string | null } | null;
  dkim?: readonly { result?: string | null }[] | null;
  dmarc?: { result?: string | null; policy?: string | null } | null;
  arc?: { result?: string | null } | null;
}

export interface AuthLimits {
  /** DNS queries for one message, all checks together. */
  maxLookups: number;
  /** SPF's own limits (RFC 7208 §4.6.4): DNS-querying mechanisms, and lookups that find nothing. */
  spfMaxLookups: number;
  spfMaxVoidLookups: number;
  /** DKIM-Signature fields verified (the topmost ones). */
  maxSignatures: number;
  /** Header sections longer than this are not verified for DKIM or ARC. */
  maxHeaderBytes: number;
}

export interface AuthInput {
  raw: Buffer;            // the whole message as received
  clientIp: string;       // remote address of the SMTP client (IPv4, IPv6, or IPv4-mapped IPv6 — normalise)
  helo: string | null;
  mailFrom: string | null; // envelope sender; '' or null for the null sender <>
  mta: string;            // our hostname for the header
  resolver: DnsResolver;
  timeoutMs?: number;     // overall cap; on timeout the unfinished checks are temperror
  limits?: Partial<AuthLimits>;
}

export const DEFAULT_AUTH_TIMEOUT_MS = 15_000;
export const DEFAULT_AUTH_LIMITS: Readonly<AuthLimits> = Object.freeze({
  maxLookups: 100, spfMaxLookups: 10, spfMaxVoidLookups: 2, maxSignatures: 10, maxHeaderBytes: 512 * 1024,
});

const VERDICTS = new Set<string>(['pass', 'fail', 'softfail', 'neutral', 'none', 'temperror', 'permerror', 'policy']);
const verdict = (v: unknown): AuthVerdict => (typeof v === 'string' && VERDICTS.has(v) ? (v as AuthVerdict) : 'temperror');
const oneLine = (s: unknown) => String(s ?? '').replace(/[\r\n]+/g, ' ').trim();
const hostOrNull = (s: unknown) => (typeof s === 'string' && /^[a-z0-9_-]+(\.[a-z0-9_-]+)*\.?$/i.test(s) ? s.toLowerCase().replace(/\.$/, '') : null);

/** `::ffff:1.2.3.4` (and its hex form), `[…]`, `IPv6:` and zone ids: the plain address SPF compares. */
export function normalizeClientIp(ip: string): string {
  let s = String(ip ?? '').trim().replace(/^\[(.*)\]$/, '$1').replace(/^ipv6:/i, '').replace(/%.*$/, '');
  const dotted = /^(?:0{0,4}:){0,5}:?ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(s);
  if (dotted && isIP(dotted[1]) === 4) return dotted[1];
  const hex = /^(?:0{0,4}:){0,5}:?ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/i.exec(s);
  if (hex && isIP(s) === 6) {
    const [hi, lo] = [parseInt(hex[1], 16), parseInt(hex[2], 16)];
    s = [hi >> 8, hi & 255, lo >> 8, lo & 255].join('.');
  }
  return s.toLowerCase();
}

/** The envelope sender without brackets; undefined for the null sender. */
function cleanSender(mailFrom: string | null): string | undefined {
  const s = oneLine(mailFrom).replace(/^<(.*)>$/, '$1').trim();
  return s ? s.slice(0, 512) : undefined;
}

function limitsOf(given: Partial<AuthLimits> | undefined): AuthLimits {
  const limits = { ...DEFAULT_AUTH_LIMITS };
  for (const key of Object.keys(limits) as (keyof AuthLimits)[]) {
    const v = given?.[key];
    if (typeof v === 'number' && Number.isSafeInteger(v) && v > 0) limits[key] = v;
  }
  return limits;
}

/** Replaces the result in a mailauth Authentication-Results row (`dkim=neutral (…) …` → `dkim=fail (…) …`). */
const withResult = (info: string, method: string, result: AuthVerdict) => info.replace(new RegExp(`^${method}=[a-z]+`, 'i'), `${method}=${result}`);

function unfinished(mta: string, spfDomain: string | null, identity: 'mailfrom' | 'helo', why: string): AuthSummary {
  const rows = ['dkim', 'spf', 'arc', 'dmarc'].map((m) => `${m}=temperror (${why})`);
  return {
    spf: { result: 'temperror', domain: spfDomain, identity },
    dkim: [{ result: 'temperror', domain: null, selector: null, aligned: false }],
    dmarc: { result: 'temperror', policy: null, domain: null },
    arc: { result: 'temperror' },
    header: `${mta};\r\n ${rows.join(';\r\n ')}`,
  };
}

/**
 * SPF, DKIM, DMARC and ARC for one received message through mailauth's authenticate(). Never throws:
 * a check that fails to finish is temperror. Time is capped by `timeoutMs`: DNS is cut off a little
 * before it (pending lookups fail, so mailauth still returns what it finished), and at `timeoutMs`
 * whatever is still running is abandoned and reported as temperror.
 */
export async function authenticateMessage(input: AuthInput): Promise<AuthSummary> {
  const mta = hostOrNull(input?.mta) ?? 'localhost';
  const sender = cleanSender(input?.mailFrom ?? null);
  const identity = sender ? 'mailfrom' : 'helo';
  const helo = oneLine(input?.helo).slice(0, 255) || undefined;
  const spfDomain = hostOrNull(sender ? sender.slice(sender.lastIndexOf('@') + 1) : helo);
  const given = input?.timeoutMs;
  const timeoutMs = typeof given === 'number' && Number.isFinite(given) && given > 0 ? given : DEFAULT_AUTH_TIMEOUT_MS;
  let stopped = false;
  const timers: NodeJS.Timeout[] = [];
  try {
    // Loaded on first use, before the clock starts (and inside the try: a failed load is a
    // temperror like any other, not a thrown error). mailauth, with undici, joi and tldts, is about
    // 11 MB of heap; it runs on the analysis thread, and the event loop, which imports this module
    // for its helpers, needs it only when it analyzes a message itself.
    const { authenticate } = await import('mailauth');
    patchMailauthLineBreaks();
    await patchMailauthHeaderScan();
    const limits = limitsOf(input.limits);
    const raw = Buffer.isBuffer(input.raw) ? input.raw : Buffer.from(input.raw ?? '');
    const dns = guardResolver(input.resolver, limits.maxLookups);
    // DNS ends first, leaving mailauth a moment to turn the failed lookups into temperror results.
    timers.push(setTimeout(() => dns.expire(), Math.max(timeoutMs - Math.min(1_000, timeoutMs / 5), 0)));
    const hardStop = new Promise<'timeout'>((resolve) => timers.push(setTimeout(() => resolve('timeout'), timeoutMs)));
    const screened = screenMessage(raw, limits);
    const opts: AuthenticateOptions & { maxResolveCount: number; maxVoidCount: number } = {
      ip: normalizeClientIp(input.clientIp),
      helo,
      sender,
      mta,
      resolver: dns.resolve as DNSResolver,
      trustReceived: false, // the envelope is ours; Received headers are the sender's claims
      disableBimi: true,
      maxResolveCount: limits.spfMaxLookups,
      maxVoidCount: limits.spfMaxVoidLookups,
    };
    const run = authenticate(feed(screened.pieces, () => stopped), opts);
    run.catch(() => {}); // after a timeout nobody awaits it; its rejection is expected then
    const outcome = await Promise.race([run, hardStop]);
    if (outcome === 'timeout') return unfinished(mta, spfDomain, identity, 'timed out');
    return summarize(outcome, dns, mta, identity);
  } catch {
    return unfinished(mta, spfDomain, identity, 'internal error');
  } finally {
    stopped = true;
    for (const t of timers) clearTimeout(t);
  }
}

function summarize(r: AuthenticateResult, dns: GuardedResolver, mta: string, identity: 'mailfrom' | 'helo'): AuthSummary {
  const rows: string[] = [];

  const dkim: AuthSummary['dkim'] = [];
  const signed = (r.dkim?.results ?? []).filter((row) => row.signingDomain);
  for (const row of signed) {
    let result = verdict(row.status?.result);
    // RFC 6376 §6.1.3: a body hash mismatch is a PERMFAIL, i.e. dkim=fail (mailauth says neutral).
    if (result === 'neutral' && row.status?.comment === 'body hash did not verify') result = 'fail';
    dkim.push({ result, domain: hostOrNull(row.signingDomain), selector: oneLine(row.selector).slice(0, 255) || null, aligned: !!row.status?.aligned });
    rows.push(withResult(oneLine(row.info), 'dkim', result));
  }
  if (!signed.length) rows.push('dkim=none (message not signed)');

  const spfRes = r.spf || null;
  const spf: AuthSummary['spf'] = { result: verdict(spfRes?.status?.result), domain: hostOrNull(spfRes?.domain), identity };
  rows.push(spfRes?.info ? oneLine(spfRes.info) : `spf=${spf.result}`);

  const arcRes = r.arc || null;
  let arcResult = verdict(arcRes?.status?.result ?? 'none');
  // mailauth calls every ARC problem a fail, DNS failures included; a key lookup that failed is temperror.
  if (arcResult === 'fail' && arcKeyNames(arcRes).some((n) => dns.failedNames.has(n))) arcResult = 'temperror';
  if (arcRes?.info) rows.push(withResult(oneLine(arcRes.info), 'arc', arcResult));

  const fromDomains = (r.dkim?.headerFrom ?? []).map((a) => hostOrNull(String(a).slice(String(a).lastIndexOf('@') + 1)));
  const dmarcRes = r.dmarc || null;
  let dmarc: AuthSummary['dmarc'];
  if (dmarcRes) {
    const policy = oneLine(dmarcRes.policy).toLowerCase().slice(0, 32) || null;
    dmarc = { result: verdict(dmarcRes.status?.result), policy, domain: fromDomains[0] ?? hostOrNull(dmarcRes.domain) };
    if (dmarcRes.info) rows.push(oneLine(dmarcRes.info));
  } else if (fromDomains.length > 1) {
    // mailauth skips DMARC when From holds several addresses (RFC 7489 §6.6.1 leaves it to us).
    dmarc = { result: 'permerror', policy: null, domain: null };
    rows.push('dmarc=permerror (multiple from addresses)');
  } else {
    dmarc = { result: 'none', policy: null, domain: fromDomains[0] ?? null };
    rows.push('dmarc=none (no from address)');
  }

  return { spf, dkim, dmarc, arc: { result: arcResult }, header: `${mta};\r\n ${rows.join(';\r\n ')}` };
}

/** `selector._domainkey.domain` of every ARC seal and message signature in the chain. */
function arcKeyNames(arcRes: AuthenticateResult['arc'] | null): string[] {
  const chain = (arcRes as { chain?: unknown } | null)?.chain;
  if (!Array.isArray(chain)) return [];
  const names: string[] = [];
  for (const set of chain as Record<string, { parsed?: { s?: { value?: string }; d?: { value?: string } } }>[]) {
    for (const key of ['arc-seal', 'arc-message-signature']) {
      const p = set?.[key]?.parsed;
      if (p?.s?.value && p?.d?.value) names.push(`${p.s.value}._domainkey.${p.d.value}`.toLowerCase());
    }
  }
  return names;
}

const resultOf = (x: unknown) => (x && typeof x === 'object' ? (x as { result?: unknown }).result : undefined);

/** True when the sender passed SPF (for the envelope domain) or DMARC: what reply rules will use later. */
export function senderAuthenticated(summary: StoredAuthResults | null | undefined): boolean {
  if (!summary || typeof summary !== 'object') return false;
  if (resultOf(summary.dmarc) === 'pass') return true;
  return resultOf(summary.spf) === 'pass' && summary.spf?.identity === 'mailfrom';
}

/** Short list of failure signals for the labeler, e.g. ['spf_fail', 'dmarc_fail', 'dkim_fail']. */
export function authFailureSignals(summary: StoredAuthResults | null | undefined): string[] {
  if (!summary || typeof summary !== 'object') return [];
  const signals: string[] = [];
  const spf = resultOf(summary.spf);
  if (spf === 'fail') signals.push('spf_fail');
  if (spf === 'softfail') signals.push('spf_softfail');
  const dkim = Array.isArray(summary.dkim) ? summary.dkim.map(resultOf) : [];
  if (dkim.includes('fail') && !dkim.includes('pass')) signals.push('dkim_fail');
  const dmarc = resultOf(summary.dmarc);
  if (dmarc === 'fail') {
    signals.push('dmarc_fail');
    const policy = summary.dmarc?.policy;
    if (policy === 'reject' || policy === 'quarantine') signals.push(`dmarc_${policy}`);
  }
  if (dmarc === 'permerror') signals.push('dmarc_permerror');
  if (resultOf(summary.arc) === 'fail') signals.push('arc_fail');
  return signals;
}
