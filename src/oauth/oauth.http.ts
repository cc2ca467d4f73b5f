import type { FastifyReply, FastifyRequest } from 'fastify';
import type { AppDeps } from '../context.ts';

// The OAuth endpoints speak RFC 6749 rather than Cubby's envelopes: errors are
// `{error, error_description}` with the status the RFCs give, replies are never cached.

export type OAuthErrorCode =
  | 'invalid_request'
  | 'invalid_client'
  | 'invalid_grant'
  | 'unauthorized_client'
  | 'unsupported_grant_type'
  | 'invalid_scope'
  | 'invalid_target'
  | 'access_denied'
  | 'authorization_pending'
  | 'slow_down'
  | 'expired_token'
  | 'invalid_redirect_uri'
  | 'invalid_client_metadata'
  | 'unsupported_token_type'
  | 'temporarily_unavailable'
  | 'server_error';

export class OAuthError extends Error {
  constructor(
    readonly error: OAuthErrorCode,
    readonly description: string,
    readonly status = 400,
    readonly retryAfter?: number,
  ) {
    super(description);
  }
}

export function sendOAuthError(reply: FastifyReply, err: OAuthError): FastifyReply {
  if (err.error === 'invalid_client' && err.status === 401) reply.header('www-authenticate', 'Basic realm="cubby"');
  if (err.retryAfter) reply.header('retry-after', String(err.retryAfter));
  return reply.code(err.status).header('cache-control', 'no-store').header('pragma', 'no-cache').send({ error: err.error, error_description: err.description });
}

export function sendJson(reply: FastifyReply, status: number, body: unknown): FastifyReply {
  return reply.code(status).header('cache-control', 'no-store').header('pragma', 'no-cache').type('application/json; charset=utf-8').send(body);
}

/** One string parameter of a JSON or form body; repeated parameters are invalid (RFC 6749 §3.1). */
export function param(body: unknown, name: string, max = 2000): string | undefined {
  const v = (body as Record<string, unknown> | undefined | null)?.[name];
  if (v === undefined || v === null || v === '') return undefined;
  if (Array.isArray(v)) throw new OAuthError('invalid_request', `${name} must not be repeated.`);
  if (typeof v === 'boolean' || typeof v === 'number') return String(v);
  if (typeof v !== 'string') throw new OAuthError('invalid_request', `${name} must be a string.`);
  if (v.length > max) throw new OAuthError('invalid_request', `${name} is too long.`);
  return v;
}

export function flag(body: unknown, name: string): boolean | undefined {
  const v = param(body, name, 10);
  if (v === undefined) return undefined;
  if (v === 'true' || v === '1') return true;
  if (v === 'false' || v === '0') return false;
  throw new OAuthError('invalid_request', `${name} must be true or false.`);
}

/** Client credentials from HTTP Basic (RFC 6749 §2.3.1), if sent. */
export function basicCredentials(req: FastifyRequest): { clientId: string; secret: string } | null {
  const m = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(req.headers.authorization ?? '');
  if (!m) return null;
  const decoded = Buffer.from(m[1]!, 'base64').toString('utf8');
  const at = decoded.indexOf(':');
  if (at < 0) return null;
  try {
    return { clientId: decodeURIComponent(decoded.slice(0, at)), secret: decodeURIComponent(decoded.slice(at + 1)) };
  } catch {
    return null;
  }
}

/** Browser-based MCP clients call these endpoints cross-origin; no cookies are involved. */
export function allowCors(reply: FastifyReply): void {
  reply.header('access-control-allow-origin', '*');
  reply.header('access-control-allow-headers', 'authorization, content-type, mcp-protocol-version, mcp-session-id, last-event-id');
  reply.header('access-control-expose-headers', 'www-authenticate, mcp-session-id, mcp-protocol-version');
  reply.header('access-control-allow-methods', 'GET, POST, DELETE, OPTIONS');
}

/** The MCP endpoint URL: the resource every OAuth token is bound to (RFC 8707). */
export function mcpResource(deps: AppDeps): string {
  return `${deps.publicUrl()}/mcp`;
}

/** The issuer identifier (RFC 8414): the public base URL. */
export function issuer(deps: AppDeps): string {
  return deps.publicUrl();
}

export const PROTECTED_RESOURCE_PATH = '/.well-known/oauth-protected-resource/mcp';

export const MCP_SCOPE = 'cubby:mcp';
export const OFFLINE_SCOPE = 'offline_access';
/** Optional hints for the default permission on the approval page. */
export const PERMISSION_SCOPES = ['mailbox_read', 'mailbox_write', 'mailbox_admin'] as const;

/**
 * Validates a requested scope string and returns it normalised: `cubby:mcp` is always
 * included (it is what every token is for); `offline_access` asks for a refresh token.
 * `<brand>:mcp` for each CUBBY_COMPAT_BRANDS word is a synonym of `cubby:mcp`, kept beside it
 * in the granted scope so that a client checking for its own scope finds it (docs/compat.md).
 */
export function normaliseScope(raw: string | undefined, brands: readonly string[] = []): string {
  const asked = (raw ?? MCP_SCOPE).split(/\s+/).filter(Boolean);
  const known = new Set<string>([MCP_SCOPE, OFFLINE_SCOPE, ...PERMISSION_SCOPES, ...brands.map((b) => `${b}:mcp`)]);
  const unknown = asked.find((s) => !known.has(s));
  if (unknown) throw new OAuthError('invalid_scope', `Unknown scope ${unknown}; use ${MCP_SCOPE} and optionally ${OFFLINE_SCOPE}.`);
  const out = new Set([MCP_SCOPE, ...asked]);
  return [...out].join(' ');
}

export function scopeHas(scope: string, s: string): boolean {
  return scope.split(' ').includes(s);
}

/** The permission scope a client hinted at, if any. */
export function permissionHint(scope: string): (typeof PERMISSION_SCOPES)[number] | null {
  return PERMISSION_SCOPES.find((p) => scopeHas(scope, p)) ?? null;
}

/** RFC 8707: the only resource tokens are issued for is the MCP endpoint. Absent means that one. */
export function checkResource(deps: AppDeps, raw: string | undefined): string {
  const mcp = mcpResource(deps);
  if (raw === undefined) return mcp;
  const trimmed = raw.replace(/\/+$/, '');
  if (trimmed !== mcp) throw new OAuthError('invalid_target', `resource must be ${mcp}.`);
  return mcp;
}
