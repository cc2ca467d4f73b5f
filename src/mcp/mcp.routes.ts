import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { createMcpHandler, McpServer, type McpRequestContext } from '@modelcontextprotocol/server';
import { toNodeHandler } from '@modelcontextprotocol/node';
import type { AppDeps, RequestCtx } from '../context.ts';
import { AppError } from '../errors.ts';
import { authenticateApiKey, readAgentHeaders } from '../auth/credential.ts';
import { KeyRateLimiter } from '../http/rate-limit.ts';
import { PLANS } from '../accounts/plans.ts';
import { SERVER_VERSION } from '../version.ts';
import { allowCors, mcpResource, PROTECTED_RESOURCE_PATH } from '../oauth/oauth.http.ts';
import { UNTRUSTED } from './tool.ts';
import { allowedHostRules, checkMcpHost } from './host-guard.ts';
import { mailboxTools } from './tools.mailboxes.ts';
import { fileTools } from './tools.files.ts';
import { emailTools } from './tools.emails.ts';
import { siteTools } from './tools.sites.ts';
import { searchTools } from './tools.search.ts';
import { registerResources } from './resources.ts';
import { registerPrompts } from './prompts.ts';

// The hosted tool endpoint: MCP over stateless streamable HTTP at /mcp. Every request is
// authenticated like an API call (an API key or an OAuth access token for this resource),
// gets a fresh server whose tools close over that request's context, and is forgotten.
// No cookies are read here, so cross-origin callers gain nothing: CORS is open and the bearer
// token is the only credential. Host and Origin are still checked first (host-guard.ts) so a
// re-pointed name never reaches the endpoint (DNS rebinding).

const INSTRUCTIONS = `Cubby: private file mailboxes, each with its own email address. Call status first. ${UNTRUSTED} Never ask the person to paste secrets, codes or passwords into the chat.`;

function buildServer(ctx: RequestCtx): McpServer {
  const server = new McpServer({ name: 'cubby', title: 'Cubby', version: SERVER_VERSION }, { instructions: INSTRUCTIONS });
  mailboxTools(server, ctx);
  fileTools(server, ctx);
  emailTools(server, ctx);
  siteTools(server, ctx);
  searchTools(server, ctx);
  registerResources(server, ctx);
  registerPrompts(server);
  return server;
}

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
  const handler = createMcpHandler((c: McpRequestContext) => buildServer(c.authInfo!.extra!.ctx as RequestCtx), {
    legacy: 'stateless',
    onerror: (err) => app.log.warn({ err }, 'mcp request failed'),
  });
  const node = toNodeHandler(handler, { onerror: (err) => app.log.error({ err }, 'mcp adapter failed') });
  const limiter = new KeyRateLimiter(deps.now);
  app.addHook('onClose', async () => handler.close());

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
      const ctx: RequestCtx = { ...deps, credential: { ...credential, transport: 'mcp' }, actor: { userId: credential.user.id, apiKeyId: credential.keyId, agent, requestId: req.id } };
      reply.hijack();
      const raw = reply.raw;
      raw.setHeader('x-request-id', req.id);
      raw.setHeader('access-control-allow-origin', '*');
      raw.setHeader('access-control-expose-headers', 'www-authenticate, mcp-session-id, mcp-protocol-version');
      (req.raw as unknown as { auth: unknown }).auth = { token: token!, clientId: credential.connection?.id ?? credential.keyId, scopes: ['cubby:mcp'], extra: { ctx } };
      await node(req.raw, raw, req.body);
    },
  });
}
