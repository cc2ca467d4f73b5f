import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import formbody from '@fastify/formbody';
import type { AppDeps } from '../context.ts';
import { AppError } from '../errors.ts';
import { assertUnderLimit, clientKey, LIMITS, recordAttempt } from '../agent-auth/throttle.ts';
import { allowCors, checkResource, flag, normaliseScope, OAuthError, param, PROTECTED_RESOURCE_PATH, sendJson, sendOAuthError } from './oauth.http.ts';
import { authorizationServerMetadata, protectedResourceMetadata } from './metadata.ts';
import { assertGrantAllowed, authenticateClient, DEVICE_GRANT, registerClient } from './clients.service.ts';
import { pollDevice, startDeviceAuthorization } from './device.service.ts';
import { redeemCode } from './authorize.service.ts';
import { issueTokens, refreshTokens, revokeToken } from './token.service.ts';

// The OAuth 2.0 authorization server's machine endpoints: metadata (RFC 8414, RFC 9728),
// registration (RFC 7591), device authorization (RFC 8628), token, revocation (RFC 7009).
// Bodies may be form-encoded (the RFCs) or JSON (what Cubby's CLI sends). The person-facing
// pages (/oauth/authorize, /oauth/device) live with the dashboard for its sessions and CSRF.

const ROUTE = { schema: { hide: true }, config: { auth: false } } as const;

async function throttled(deps: AppDeps, limit: (typeof LIMITS)[keyof typeof LIMITS], req: FastifyRequest): Promise<void> {
  const ip = clientKey(req.ip);
  try {
    await assertUnderLimit(deps.db, limit, ip, deps.now());
  } catch (err) {
    if (err instanceof AppError && err.code === 'RATE_LIMITED') {
      throw new OAuthError('temporarily_unavailable', err.message, 429, Number(err.details.retry_after));
    }
    throw err;
  }
  await recordAttempt(deps.db, limit, ip, deps.now());
}

export async function registerOAuthRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  await app.register(async (o) => {
    await o.register(formbody, { bodyLimit: 64 * 1024 });
    o.addHook('onRequest', async (_req, reply) => allowCors(reply));
    o.setErrorHandler((err: FastifyError, req: FastifyRequest, reply: FastifyReply) => {
      if (err instanceof OAuthError) return sendOAuthError(reply, err);
      if (err instanceof AppError && err.status < 500) return sendOAuthError(reply, new OAuthError('invalid_request', err.message, err.status === 429 ? 429 : 400));
      if (err.statusCode && err.statusCode < 500) return sendOAuthError(reply, new OAuthError('invalid_request', 'The request body could not be read; send JSON or a form.'));
      req.log.error({ err }, 'oauth endpoint failed');
      return sendOAuthError(reply, new OAuthError('server_error', `Internal error; quote request id ${req.id}.`, 500));
    });

    const preflight = async (_req: FastifyRequest, reply: FastifyReply) => reply.code(204).send();
    for (const path of ['/oauth/register', '/oauth/device_authorization', '/oauth/token', '/oauth/revoke', '/.well-known/oauth-authorization-server', '/.well-known/oauth-protected-resource', PROTECTED_RESOURCE_PATH]) {
      o.options(path, ROUTE, preflight);
    }

    o.get('/.well-known/oauth-authorization-server', ROUTE, async (_req, reply) => reply.header('cache-control', 'public, max-age=300').send(authorizationServerMetadata(deps)));
    // The MCP endpoint's document, at the RFC 9728 path for /mcp and at the bare path.
    for (const path of [PROTECTED_RESOURCE_PATH, '/.well-known/oauth-protected-resource']) {
      o.get(path, ROUTE, async (_req, reply) => reply.header('cache-control', 'public, max-age=300').send(protectedResourceMetadata(deps)));
    }

    o.post('/oauth/register', ROUTE, async (req, reply) => {
      await throttled(deps, LIMITS.registrationPerIp, req);
      return sendJson(reply, 201, await registerClient(deps.db, req.body, clientKey(req.ip), deps.now()));
    });

    o.post('/oauth/device_authorization', ROUTE, async (req, reply) => {
      const body = req.body;
      const client = await authenticateClient(deps.db, req, body);
      assertGrantAllowed(client, DEVICE_GRANT);
      const scope = normaliseScope(param(body, 'scope'), deps.config.compatBrands);
      const resource = checkResource(deps, param(body, 'resource'));
      await throttled(deps, LIMITS.deviceAuthorizationPerIp, req);
      // Device logins are how local tooling connects, and it works through the REST API: the
      // key comes by default unless the client says api_key=false.
      const wantApiKey = flag(body, 'api_key') ?? true;
      return sendJson(reply, 200, await startDeviceAuthorization(deps, client, { scope, resource, wantApiKey }));
    });

    o.post('/oauth/token', ROUTE, async (req, reply) => {
      const body = req.body;
      const grantType = param(body, 'grant_type', 200);
      if (!grantType) throw new OAuthError('invalid_request', 'grant_type is required.');
      const client = await authenticateClient(deps.db, req, body);
      if (grantType === DEVICE_GRANT) {
        assertGrantAllowed(client, DEVICE_GRANT);
        const grant = await pollDevice(deps, client, param(body, 'device_code', 200), param(body, 'resource'));
        return sendJson(reply, 200, await issueTokens(deps, client, grant));
      }
      if (grantType === 'authorization_code') {
        assertGrantAllowed(client, 'authorization_code');
        const grant = await redeemCode(deps, client, { code: param(body, 'code', 200), redirectUri: param(body, 'redirect_uri'), verifier: param(body, 'code_verifier', 200), resource: param(body, 'resource') });
        return sendJson(reply, 200, await issueTokens(deps, client, grant));
      }
      if (grantType === 'refresh_token') {
        return sendJson(reply, 200, await refreshTokens(deps, client, { refreshToken: param(body, 'refresh_token', 200), scope: param(body, 'scope'), resource: param(body, 'resource') }));
      }
      throw new OAuthError('unsupported_grant_type', `grant_type ${grantType} is not supported.`);
    });

    o.post('/oauth/revoke', ROUTE, async (req, reply) => {
      const client = await authenticateClient(deps.db, req, req.body);
      await revokeToken(deps, client, param(req.body, 'token', 300));
      return sendJson(reply, 200, {});
    });
  });
}
