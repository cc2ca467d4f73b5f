import https from 'node:https';
import net from 'node:net';
import tls from 'node:tls';
import type { IncomingHttpHeaders } from 'node:http';
import { classifyAddress } from './ip-policy.ts';
import { systemHostResolver, type HostResolver } from './resolve.ts';

// Outbound HTTPS to a URL a customer gave us, without letting that URL reach inside our network
// (SSRF). The host is resolved once, every address is checked, and the connection goes to the
// checked address (TLS still verifies the certificate for the host name, which is also sent as SNI
// and Host): nothing resolves the name again between check and connect, so DNS rebinding cannot
// swap in a private address. Redirects are never followed, the response is capped and the whole
// exchange has one deadline.

export const SAFE_FETCH_DEFAULTS = { timeoutMs: 15_000, maxResponseBytes: 64 * 1024, maxUrlLength: 2048 } as const;

export type SafeFetchErrorKind =
  | 'invalid_url'
  | 'blocked_address'
  | 'dns_failed'
  | 'timeout'
  | 'connect_failed'
  | 'tls_failed'
  | 'response_too_large'
  | 'network';

/** Kinds where trying later may help (the destination itself was acceptable). */
const RETRYABLE: ReadonlySet<SafeFetchErrorKind> = new Set(['dns_failed', 'timeout', 'connect_failed', 'tls_failed', 'network']);

export class SafeFetchError extends Error {
  override readonly name = 'SafeFetchError';
  readonly retryable: boolean;
  constructor(
    readonly kind: SafeFetchErrorKind,
    message: string,
  ) {
    super(message);
    this.retryable = RETRYABLE.has(kind);
  }
}

export interface SafeFetchOptions {
  method?: 'GET' | 'POST' | 'PUT';
  headers?: Record<string, string>;
  body?: string | Buffer;
  timeoutMs?: number;
  maxResponseBytes?: number;
  resolver?: HostResolver;
  /** Tests and local development only: private destinations allowed. */
  allowPrivate?: boolean;
  /** Extra trusted CA certificates (PEM), added to Node's roots; verification stays on. */
  extraCa?: string[];
}

export interface SafeResponse {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
  /** The address connected to. */
  address: string;
}

/** Checks a URL's shape: https, no credentials or fragment, at most 2048 bytes. Returns the parsed URL. */
export function parseTargetUrl(raw: string): URL {
  if (Buffer.byteLength(raw) > SAFE_FETCH_DEFAULTS.maxUrlLength) throw new SafeFetchError('invalid_url', `the URL is longer than ${SAFE_FETCH_DEFAULTS.maxUrlLength} bytes`);
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new SafeFetchError('invalid_url', 'not an absolute URL');
  }
  if (url.protocol !== 'https:') throw new SafeFetchError('invalid_url', 'the URL must use https');
  if (url.username || url.password) throw new SafeFetchError('invalid_url', 'the URL must not contain a user name or password');
  if (raw.includes('#')) throw new SafeFetchError('invalid_url', 'the URL must not contain a fragment');
  if (!url.hostname) throw new SafeFetchError('invalid_url', 'the URL has no host');
  return url;
}

/** The literal IP of a URL host (brackets removed), or null for a name. */
function literalIp(url: URL): string | null {
  const h = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  return net.isIP(h) ? h : null;
}

/**
 * Resolves the URL's host and checks every address; one non-public address refuses the whole
 * destination (a name that also points inside is not trusted for its public addresses either).
 */
export async function resolveTarget(url: URL, opts: { resolver?: HostResolver; allowPrivate?: boolean } = {}): Promise<{ address: string; family: 4 | 6 }[]> {
  const ip = literalIp(url);
  let addresses: { address: string; family: 4 | 6 }[];
  if (ip) addresses = [{ address: ip, family: net.isIPv6(ip) ? 6 : 4 }];
  else {
    try {
      addresses = await (opts.resolver ?? systemHostResolver)(url.hostname);
    } catch (err) {
      throw new SafeFetchError('dns_failed', `could not resolve ${url.hostname} (${(err as NodeJS.ErrnoException)?.code ?? 'error'})`);
    }
    if (!addresses.length) throw new SafeFetchError('dns_failed', `${url.hostname} has no addresses`);
  }
  if (!opts.allowPrivate) {
    for (const a of addresses) {
      const v = classifyAddress(a.address);
      if (!v.public) {
        // A name's private answer is not echoed: the message reaches the mailbox admin, who must
        // not be able to map our internal DNS (which names point where) through it.
        throw new SafeFetchError('blocked_address', ip ? `${ip} is a non-public address (${v.reason})` : `${url.hostname} resolves to a non-public address (${v.reason})`);
      }
    }
  }
  return addresses;
}

/** One HTTPS request to a checked destination; no redirects followed (a 3xx is returned as is). */
export async function safeFetch(rawUrl: string, opts: SafeFetchOptions = {}): Promise<SafeResponse> {
  const url = parseTargetUrl(rawUrl);
  const timeoutMs = opts.timeoutMs ?? SAFE_FETCH_DEFAULTS.timeoutMs;
  const deadline = Date.now() + timeoutMs;
  const [target] = await withDeadline(resolveTarget(url, opts), timeoutMs);
  try {
    return await exchange(url, target!, opts, deadline, true);
  } catch (err) {
    // A kept-alive connection the receiver had closed meanwhile: once more on a new connection.
    if (err instanceof StaleSocket) return exchange(url, target!, opts, deadline, false);
    throw err;
  }
}

class StaleSocket extends Error {}

// Connections are kept alive per checked address (and host name, port and trusted CAs): a pooled
// socket is always one that was opened to an address we checked. Idle sockets close after a few
// seconds, before common servers' own keep-alive timeouts.
const IDLE_MS = 4000;
const MAX_AGENTS = 256;
const agents = new Map<string, https.Agent>();
const contexts = new Map<string, { id: number; context: tls.SecureContext }>();

/** One TLS context per set of extra CAs (building one parses every root certificate). */
function contextFor(extraCa: string[] | undefined): { id: number; context: tls.SecureContext | undefined } {
  if (!extraCa?.length) return { id: 0, context: undefined };
  const key = extraCa.join('\n');
  let hit = contexts.get(key);
  if (!hit) contexts.set(key, (hit = { id: contexts.size + 1, context: tls.createSecureContext({ ca: [...tls.rootCertificates, ...extraCa] }) }));
  return hit;
}

function agentFor(key: string): https.Agent {
  let agent = agents.get(key);
  if (agent) {
    agents.delete(key);
    agents.set(key, agent); // most recently used last
    return agent;
  }
  if (agents.size >= MAX_AGENTS) {
    const [oldKey, oldAgent] = agents.entries().next().value!;
    agents.delete(oldKey);
    oldAgent.destroy();
  }
  agent = new https.Agent({ keepAlive: true, maxSockets: 8, maxFreeSockets: 2, timeout: IDLE_MS, scheduling: 'lifo' });
  agents.set(key, agent);
  return agent;
}

function exchange(url: URL, target: { address: string; family: 4 | 6 }, opts: SafeFetchOptions, deadline: number, reuse: boolean): Promise<SafeResponse> {
  const { address, family } = target;
  const isLiteral = literalIp(url) !== null;
  const port = Number(url.port || 443);
  const maxBytes = opts.maxResponseBytes ?? SAFE_FETCH_DEFAULTS.maxResponseBytes;
  const timeoutMs = opts.timeoutMs ?? SAFE_FETCH_DEFAULTS.timeoutMs;
  const ca = contextFor(opts.extraCa);
  return new Promise<SafeResponse>((resolve, reject) => {
    let settled = false;
    let responded = false;
    const fail = (err: Error) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      req.destroy();
      reject(err);
    };
    const req = https.request({
      method: opts.method ?? 'POST',
      // The name stays the host (certificate check, SNI); `lookup` pins the address we checked.
      host: isLiteral ? address : url.hostname,
      port,
      path: `${url.pathname}${url.search}`,
      headers: { host: url.host, ...opts.headers, ...(opts.body !== undefined ? { 'content-length': String(Buffer.byteLength(opts.body)) } : {}) },
      agent: reuse ? agentFor(`${address}|${url.hostname}|${port}|${ca.id}`) : false,
      lookup: ((_host: string, o: { all?: boolean }, cb: (...args: unknown[]) => void) => (o?.all ? cb(null, [{ address, family }]) : cb(null, address, family))) as never,
      ...(ca.context ? { secureContext: ca.context } : {}),
    });
    const timer = setTimeout(() => fail(new SafeFetchError('timeout', `no complete response within ${Math.round(timeoutMs / 1000)} s`)), Math.max(0, deadline - Date.now()));
    req.on('error', (err: NodeJS.ErrnoException) => {
      const stale = req.reusedSocket && !responded && ['ECONNRESET', 'EPIPE'].includes(err.code ?? '');
      fail(stale ? new StaleSocket() : networkError(err));
    });
    req.on('response', (res) => {
      responded = true;
      const parts: Buffer[] = [];
      let size = 0;
      res.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > maxBytes) return fail(new SafeFetchError('response_too_large', `the response is larger than ${maxBytes} bytes`));
        parts.push(chunk);
      });
      res.on('error', (err: NodeJS.ErrnoException) => fail(networkError(err)));
      res.on('end', () => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(parts), address });
      });
    });
    req.end(opts.body);
  });
}

function networkError(err: NodeJS.ErrnoException): SafeFetchError {
  const code = err.code ?? '';
  if (['ECONNREFUSED', 'ECONNRESET', 'EHOSTUNREACH', 'ENETUNREACH', 'EADDRNOTAVAIL', 'EPIPE'].includes(code)) return new SafeFetchError('connect_failed', `connection failed (${code})`);
  if (code.startsWith('ERR_TLS') || code.startsWith('ERR_SSL') || /CERT|SELF_SIGNED|UNABLE_TO|HOSTNAME|ALTNAME/.test(code)) return new SafeFetchError('tls_failed', `TLS failed (${code})`);
  return new SafeFetchError('network', `network error${code ? ` (${code})` : ''}`);
}

async function withDeadline<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([p, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new SafeFetchError('timeout', 'name resolution took too long')), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}
