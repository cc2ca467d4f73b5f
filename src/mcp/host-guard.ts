// DNS-rebinding protection for /mcp. A page on evil.example.com whose name is re-pointed at this
// server's address can make the browser send requests here with `Host: evil.example.com`; the
// bearer token still guards every call, but a server reachable on loopback must not answer a
// host it does not serve (the MCP transport rules). So the Host header must name this server:
// the public URL's host, a host from CUBBY_MCP_ALLOWED_HOSTS, or a loopback name on the port the
// request arrived on. An Origin header, when present, must name an allowed host too; loopback
// origins on any port are accepted so local tools (an MCP inspector, a desktop client) work.

const LOOPBACK = new Set(['localhost', '127.0.0.1', '[::1]']);

export interface HostRule {
  host: string;
  /** null: any port. */
  port: string | null;
}

/** Parses `host`, `host:port` or `[v6]:port` (lowercased); null when malformed. */
export function parseHostPort(value: string): HostRule | null {
  const m = value
    .trim()
    .toLowerCase()
    .match(/^(\[[0-9a-f:.]+\]|[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*)(?::(\d{1,5}))?$/);
  if (!m) return null;
  return { host: m[1]!, port: m[5] ?? null };
}

function defaultPort(protocol: string): string {
  return protocol === 'https:' ? '443' : '80';
}

/** The rules a request is checked against: the public URL's host:port and the configured hosts. */
export function allowedHostRules(publicUrl: string, configured: readonly string[]): HostRule[] {
  const u = new URL(publicUrl);
  const rules: HostRule[] = [{ host: u.hostname.toLowerCase(), port: u.port || defaultPort(u.protocol) }];
  for (const c of configured) {
    const r = parseHostPort(c);
    if (r) rules.push(r);
  }
  return rules;
}

/** `port` null: a Host without a port, which names the default port of whatever scheme the client
 * used; behind a TLS-terminating proxy that may differ from this hop's, so only the name counts. */
function matches(rules: HostRule[], host: string, port: string | null): boolean {
  return rules.some((r) => r.host === host && (r.port === null || port === null || r.port === port));
}

export type HostVerdict = { ok: true } | { ok: false; header: 'host' | 'origin' };

/**
 * Decides whether a request may reach /mcp. `localPort` is the socket's local port, so loopback
 * names are accepted only for the port this server actually listens on.
 */
export function checkMcpHost(rules: HostRule[], headers: { host?: string; origin?: string }, localPort: number | undefined, protocol: 'http' | 'https'): HostVerdict {
  const h = headers.host ? parseHostPort(headers.host) : null;
  if (!h) return { ok: false, header: 'host' };
  const loopbackOk = LOOPBACK.has(h.host) && localPort !== undefined && (h.port ?? defaultPort(`${protocol}:`)) === String(localPort);
  if (!loopbackOk && !matches(rules, h.host, h.port)) return { ok: false, header: 'host' };

  if (headers.origin === undefined) return { ok: true };
  let o: URL;
  try {
    o = new URL(headers.origin);
  } catch {
    return { ok: false, header: 'origin' };
  }
  if (o.protocol !== 'http:' && o.protocol !== 'https:') return { ok: false, header: 'origin' };
  const oh = o.hostname.toLowerCase();
  if (LOOPBACK.has(oh)) return { ok: true };
  return matches(rules, oh, o.port || defaultPort(o.protocol)) ? { ok: true } : { ok: false, header: 'origin' };
}
