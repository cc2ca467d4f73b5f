import { messagePage, sendPage } from '../web/html.ts';
import Fastify, { LogController, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import swagger from '@fastify/swagger';
import { createJsonSchemaTransformObject, jsonSchemaTransform, validatorCompiler, type ZodTypeProvider } from 'fastify-type-provider-zod';
import type { AppDeps, RequestCtx } from '../context.ts';
import { AppError } from '../errors.ts';
import { newId } from '../ids.ts';
import { authenticateApiKey, readAgentHeaders } from '../auth/credential.ts';
import { clientVersionHeaders, sendError, surfaceOf } from './render-error.ts';
import { KeyRateLimiter } from './rate-limit.ts';
import { PLANS } from '../accounts/plans.ts';
import { OPENAPI_INFO, surfaceDocument } from './openapi.ts';
import { registerApiDocs } from './api-docs.ts';
import type { ViolationSink } from './contract-check.ts';
import { registerAccountRoutesA, registerAccountRoutesR } from '../accounts/accounts.routes.ts';
import { registerActivityRoutesR } from '../activity/activity.routes.ts';
import { registerWeb } from '../web/web.routes.ts';
import { registerMailboxRoutesR } from '../mailboxes/mailboxes.routes.ts';
import { registerBucketRoutesA } from '../mailboxes/buckets.routes.ts';
import { registerPublicationRoutesA } from '../sites/publications.routes.ts';
import { registerSiteDomainRoutesA } from '../sites/domains/site-domains.routes.ts';
import { registerFileRoutesR } from '../files/files.routes.ts';
import { registerEmailRoutesR } from '../emails/emails.routes.ts';
import { registerSendRoutesR } from '../outbound/send.routes.ts';
import { registerBucketFileRoutesA } from '../files/buckets-files.routes.ts';
import { registerSearchRoutesA, registerSearchRoutesR } from '../search/search.routes.ts';
import { registerBlobRoutes } from '../files/blob.routes.ts';
import { registerUploadSessionRoutesA, registerUploadSessionRoutesR } from '../uploads/upload-sessions.routes.ts';
import { registerAddressRoutesA, registerAddressRoutesR } from '../addresses/addresses.routes.ts';
import { registerDomainRoutesA, registerDomainRoutesR } from '../domains/domains.routes.ts';
import { registerWebhookRoutesR } from '../webhooks/webhooks.routes.ts';
import { registerCable, registerLiveRoutesR } from '../live/live.routes.ts';
import { registerAgentAccess, registerAgentAuthRoutesA, registerAgentAuthRoutesR } from '../agent-auth/agent-access.ts';
import { registerOpsRoutes } from '../ops/ops.routes.ts';
import { registerGitHooks, registerGitSyncRoutesA } from '../gitsync/gitsync.routes.ts';
import { registerErrorDocs } from '../ops/error-docs.routes.ts';
import { logRequest } from './request-log.ts';

export type ZApp = FastifyInstance & { withTypeProvider: () => any } & ReturnType<FastifyInstance['withTypeProvider']>;

declare module 'fastify' {
  interface FastifyRequest {
    ctx: RequestCtx;
  }
  interface FastifyRequest {
    /** The catalogue code of the error this request was answered with (for its log line). */
    errorCode: string | null;
  }
  interface FastifyContextConfig {
    /** false: the route needs no API key. */
    auth?: boolean;
  }
}

export const JSON_BODY_LIMIT = 1024 * 1024;

export interface HttpOptions {
  /** Tests: check every API reply against the OpenAPI document and report mismatches here. */
  checkResponses?: ViolationSink;
}

export async function buildHttpServer(deps: AppDeps, logger: any, options: HttpOptions = {}): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: logger,
    genReqId: () => newId('req'),
    requestIdHeader: false,
    bodyLimit: JSON_BODY_LIMIT,
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 500 },
    logController: new LogController({ disableRequestLogging: true }),
    // Client addresses (sign-in throttling) come from X-Forwarded-For only behind a configured proxy.
    trustProxy: (_address: string, hop: number) => hop < deps.config.trustProxyHops,
    // Idle keep-alive connections (browsers) must not hold up a stop; requests in progress may
    // finish within the shutdown grace (src/app.ts cuts what is left after it).
    forceCloseConnections: 'idle',
    // Errors Fastify raises before routing (broken percent-encoding) get our envelope too.
    // They skip the hooks, so their log line is written here.
    frameworkErrors: (err, req, reply) => {
      reply.raw.once('finish', () => logRequest(deps, req, reply));
      return sendError(req, reply, err, deps.publicUrl(), deps.config.compatBrands);
    },
  }).withTypeProvider<ZodTypeProvider>();
  app.setValidatorCompiler(validatorCompiler);
  // Response schemas document the contract (and the test suite checks every reply against
  // them); they never reshape a reply: no field is stripped and a drift is not turned into a 500.
  app.setSerializerCompiler(() => (data) => JSON.stringify(data));
  app.decorateRequest('ctx', null as unknown as RequestCtx);
  app.decorateRequest('errorCode', null);
  app.addHook('onResponse', async (req, reply) => logRequest(deps, req, reply));

  // Our own JSON parser: an empty body is "no body" (GET/DELETE with `{}` or nothing);
  // anything unparseable is MALFORMED_JSON in the surface's envelope.
  app.removeContentTypeParser('application/json');
  // Fastify's text parser would let text/plain bodies reach validation: only JSON is accepted.
  app.removeContentTypeParser('text/plain');
  app.addContentTypeParser(/^application\/([\w.+-]+\+)?json\s*(;.*)?$/i, { parseAs: 'string' }, (_req, body, done) => {
    const text = String(body);
    if (text.trim() === '') return done(null, undefined);
    try {
      done(null, JSON.parse(text));
    } catch {
      done(new AppError('MALFORMED_JSON'), undefined);
    }
  });

  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: OPENAPI_INFO,
      // Filled in per document with absolute URLs (src/http/openapi.ts).
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer' }, oauth: { type: 'oauth2', flows: {} } } },
      security: [{ bearer: [] }, { oauth: [] }],
    },
    transform: jsonSchemaTransform,
    transformObject: createJsonSchemaTransformObject({}),
  });

  if (options.checkResponses) {
    const { createContractCheck } = await import('./contract-check.ts');
    const check = createContractCheck(() => app.swagger(), options.checkResponses);
    app.addHook('onSend', async (req, reply, payload) => {
      const violation = check(req, reply, payload);
      // The harness's request() throws on this header, so the failing test names the violation.
      if (violation) reply.header('x-cubby-contract-violation', encodeURIComponent(violation.slice(0, 4000)));
      return payload;
    });
  }

  app.addHook('onRequest', async (req, reply) => {
    reply.header('x-request-id', req.id);
    if (surfaceOf(req.url) === 'A') clientVersionHeaders(reply, deps.config.compatBrands);
  });

  const docsBase = () => deps.publicUrl();
  app.setErrorHandler((err, req, reply) => sendError(req, reply, err, docsBase(), deps.config.compatBrands));
  app.setNotFoundHandler((req, reply) => {
    if (surfaceOf(req.url) === 'web') {
      return sendPage(reply, 404, messagePage('Page not found', 'There is nothing at this address. It may have moved, or the link may be mistyped.', { href: '/', text: 'Back to your mailboxes' }, { status: 404 }));
    }
    return sendError(req, reply, new AppError('NOT_FOUND', `No route ${req.method} ${req.url.split('?')[0]}.`), docsBase(), deps.config.compatBrands);
  });

  const limiter = new KeyRateLimiter(deps.now);
  const authenticate = async (req: FastifyRequest, _reply: FastifyReply) => {
    if (req.routeOptions.config?.auth === false) return;
    const header = req.headers.authorization;
    const token = header?.match(/^Bearer\s+(\S+)\s*$/i)?.[1];
    const agent = readAgentHeaders(req.headers, deps.config.compatBrands);
    const credential = await authenticateApiKey(deps.db, token, agent, deps.now());
    limiter.hit(credential.keyId, PLANS[credential.plan].api_rate_limit_requests_per_minute);
    req.ctx = { ...deps, credential, actor: { userId: credential.user.id, apiKeyId: credential.keyId, agent, requestId: req.id } };
  };

  await app.register(
    async (r) => {
      r.addHook('onRequest', authenticate);
      registerAccountRoutesR(r as any, deps);
      registerActivityRoutesR(r as any);
      registerAgentAuthRoutesR(r as any, deps);
      registerMailboxRoutesR(r as any);
      registerFileRoutesR(r as any);
      registerEmailRoutesR(r as any);
      registerSendRoutesR(r as any);
      registerUploadSessionRoutesR(r as any);
      registerAddressRoutesR(r as any);
      registerDomainRoutesR(r as any);
      registerWebhookRoutesR(r as any);
      registerLiveRoutesR(r as any);
      registerSearchRoutesR(r as any);
    },
    { prefix: '/v1' },
  );
  await app.register(
    async (a) => {
      a.addHook('onRequest', authenticate);
      registerAccountRoutesA(a as any, deps);
      registerAgentAuthRoutesA(a as any, deps);
      registerBucketRoutesA(a as any);
      registerPublicationRoutesA(a as any);
      registerGitSyncRoutesA(a as any);
      registerSiteDomainRoutesA(a as any);
      registerBucketFileRoutesA(a as any);
      registerUploadSessionRoutesA(a as any);
      registerAddressRoutesA(a as any);
      registerDomainRoutesA(a as any);
      registerSearchRoutesA(a as any);
    },
    { prefix: '/api/v1' },
  );

  const openapiFor = (prefix: '/v1' | '/api/v1') => () => surfaceDocument(app.swagger(), prefix, deps.publicUrl());
  app.get('/v1/openapi.json', { schema: { hide: true }, config: { auth: false } }, openapiFor('/v1'));
  app.get('/api/v1/openapi.json', { schema: { hide: true }, config: { auth: false } }, openapiFor('/api/v1'));

  registerOpsRoutes(app as any, deps);
  await registerGitHooks(app as any, deps);
  registerErrorDocs(app as any);
  registerApiDocs(app as any);
  await registerBlobRoutes(app as any, deps);
  await registerCable(app as any, deps);
  await registerAgentAccess(app as any, deps);
  await registerWeb(app as any, deps);
  return app;
}
