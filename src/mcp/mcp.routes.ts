import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { AppDeps, RequestCtx } from '../context.ts';
import { AppError } from '../errors.ts';
import { authenticateApiKey, readAgentHeaders } from '../auth/credential.ts';
import { KeyRateLimiter } from '../http/rate-limit.ts';
import { PLANS } from '../accounts/plans.ts';
import { allowCors, mcpResource, PROTECTED_RESOURCE_PATH } from '../oauth/oauth.http.ts';
import { allowedHostRules, checkMcpHost } from './host-guard.ts';
import type { McpNodeHandler } from './mcp-handler.ts';

// The hosted tool endpoint: MCP over stateless streamable HTTP at /mcp. Every request is
// authenticated like an API call (an API key or an OAuth access token for this resource),
// gets a fresh server whose tools close over that request's context, and is forgotten.
// No cookies are read here, so cross-origin callers gain nothing: CORS is open and the bearer
// token is the only credential. Host and Origin are still checked first (host-guard.ts) so a
// re-pointed name never reaches the endpoint (DNS rebinding). The MCP server itself
// (mcp-handler.ts) is loaded by the first authenticated request.

function challenge(deps: AppDeps, reply: FastifyReply, err: AppError, tokenSent: boolean) {
  const metadata = `${deps.publicUrl()}${PROTECTED_RESOURCE_PATH}`;
  const parts = [`resource_metadata="${metadata}"`, 'scope="cubby:mcp"'];
  if (tokenSent) parts.push('error="invalid_token"', `error_description="${err.message.replace(/["\\]/g, '')}"`);
  allowCors(reply);
  return reply
    .code(401)
    .header('www-authenticate', `Bearer ${parts.join(', ')}`)
    .header('cache-control', 'no-store')
    .send({ error: tokenSent ? 'invalid_token' : 'unauthorized', error_description: err.message, code: err.code });
}

/** Answers 403 and returns true when Host or Origin names a host this server does not serve. */
function refuseForeignHost(deps: AppDeps, req: FastifyRequest, reply: FastifyReply): boolean {
  const rules = allowedHostRules(deps.publicUrl(), deps.config.mcpAllowedHosts);
  const verdict = checkMcpHost(rules, { host: req.headers.host, origin: req.headers.origin }, req.socket.localPort, req.protocol);
  if (verdict.ok) return false;
  const err = new AppError(verdict.header === 'host' ? 'MCP_HOST_NOT_ALLOWED' : 'MCP_ORIGIN_NOT_ALLOWED');
  void reply.code(403).header('cache-control', 'no-store').send({ error: 'forbidden', error_description: err.message, code: err.code });
  return true;
}

export async function registerMcp(app: FastifyInstance, deps: AppDeps): Promise<void> {
  let loaded: Promise<McpNodeHandler> | null = null;
  // A load or start that failed is not kept: the request answers 500 and the next one tries again.
  const handler = () =>
    (loaded ??= import('./mcp-handler.ts')
      .then((m) => m.createMcpNodeHandler(app.log))
      .catch((err) => {
        loaded = null;
        throw err;
      }));
  const limiter = new KeyRateLimiter(deps.now);
  app.addHook('onClose', async () => {
    const mcp = loaded && (await loaded.catch(() => null));
    if (mcp) await mcp.close();
  });

  app.options('/mcp', { schema: { hide: true }, config: { auth: false } }, async (req, reply) => {
    if (refuseForeignHost(deps, req, reply)) return reply;
    allowCors(reply);
    return reply.code(204).send();
  });

  app.route({
    method: ['GET', 'POST', 'DELETE'],
    url: '/mcp',
    schema: { hide: true },
    config: { auth: false },
    handler: async (req: FastifyRequest, reply: FastifyReply) => {
      if (refuseForeignHost(deps, req, reply)) return reply;
      const token = req.headers.authorization?.match(/^Bearer\s+(\S+)\s*$/i)?.[1];
      const agent = readAgentHeaders(req.headers, deps.config.compatBrands);
      let credential;
      try {
        credential = await authenticateApiKey(deps.db, token, agent, deps.now());
        // RFC 8707: an OAuth token serves the resource it was issued for.
        if (credential.authMethod === 'oauth' && credential.resource !== mcpResource(deps)) throw new AppError('UNAUTHENTICATED', 'This access token was issued for another resource.');
        limiter.hit(credential.keyId, PLANS[credential.plan].api_rate_limit_requests_per_minute);
      } catch (err) {
        if (err instanceof AppError && err.status === 401) return challenge(deps, reply, err, token !== undefined);
        if (err instanceof AppError && err.code === 'RATE_LIMITED') {
          return reply.code(429).header('retry-after', String(err.details.retry_after)).send({ error: 'rate_limited', error_description: err.message });
        }
        throw err;
      }
      const mcp = await handler();
      const ctx: RequestCtx = { ...deps, credential: { ...credential, transport: 'mcp' }, actor: { userId: credential.user.id, apiKeyId: credential.keyId, agent, requestId: req.id } };
      reply.hijack();
      const raw = reply.raw;
      raw.setHeader('x-request-id', req.id);
      raw.setHeader('access-control-allow-origin', '*');
      raw.setHeader('access-control-expose-headers', 'www-authenticate, mcp-session-id, mcp-protocol-version');
      (req.raw as unknown as { auth: unknown }).auth = { token: token!, clientId: credential.connection?.id ?? credential.keyId, scopes: ['cubby:mcp'], extra: { ctx } };
      await mcp.handle(req.raw, raw, req.body);
    },
  });
}
