import { z } from 'zod';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import type { AppDeps } from '../context.ts';
import { accountIdField, reasonField } from '../http/schemas.ts';
import { checkReason } from '../activity/activity.service.ts';
import { readAgentHeaders } from '../auth/credential.ts';
import { requestCode, verifyCode } from './codes.service.ts';
import { exchangeGrant } from './grants.service.ts';
import { createLoginLink } from './login-links.ts';
import { presentIssued } from './issued.present.ts';
import { assertUnderLimit, clientKey, LIMITS, recordAttempt } from './throttle.ts';
import { AppError } from '../errors.ts';
import { selectAccount } from '../auth/access.ts';
import { okA, okR, responsesA, responsesR, type ResponseOptions, type Success } from '../http/contract.ts';
import type { ErrorCode } from '../errors.ts';
import { Capabilities, CodeRequested, IssuedKey, LoginLink } from './agent-auth.responses.ts';

// Authentication operations on both surfaces: the email code, one-time grants, browser login
// links and the capabilities document. Only browser_login_link needs a key.

type App = FastifyInstance<any, any, any, any, ZodTypeProvider>;
const tags = ['agent access'];
const NO_KEY = { auth: false } as const;

const scope = z.enum(['mailbox_read', 'mailbox_write', 'mailbox_admin']);
const access = z.enum(['all', 'selected']);
const perms = z.record(z.string().max(100), z.enum(['read', 'write']));
const requestBody = z.object({ email: z.string().max(320).describe('The person\'s sign-in address'), account_id: accountIdField, reason: reasonField }).strict();
const verifyFields = {
  email: z.string().max(320),
  code: z.string().max(40).describe('Six digits; spaces are ignored'),
  label: z.string().max(100).nullable().optional().describe('What this connection is for'),
  permission_scope: scope.optional().describe('mailbox_write unless given'),
  mailbox_access: access.optional().describe('all (default) or selected'),
  mailbox_ids: z.array(z.string().max(100)).max(1000).optional().describe('Required when mailbox_access is selected'),
  mailbox_permissions: perms.optional().describe('Mailbox id to read or write; without an entry write, or read when the scope is mailbox_read'),
  account_id: accountIdField,
  reason: reasonField,
};
const verifyBodyR = z.object(verifyFields).strict();
const verifyBodyA = z.object({ ...verifyFields, bucket_access: access.optional().describe('Surface A name of mailbox_access'), bucket_ids: z.array(z.string().max(100)).max(1000).optional(), bucket_permissions: perms.optional() }).strict();
const grantBody = z.object({ grant_token: z.string().max(200), label: z.string().max(100).nullable().optional(), account_id: accountIdField, reason: reasonField }).strict();
const linkBody = z.object({ redirect_path: z.string().max(500).optional(), account_id: accountIdField, reason: reasonField }).strict().nullish();

function agentOf(req: FastifyRequest, deps: AppDeps) {
  return { agent: readAgentHeaders(req.headers, deps.config.compatBrands), requestId: req.id };
}

function capabilities(deps: AppDeps) {
  const base = deps.publicUrl();
  return {
    flows: [
      { id: 'api_key', available: true, description: 'Create an API key in the dashboard and send it as Authorization: Bearer.', url: `${base}/settings/api_keys` },
      { id: 'oauth_device', available: true, preferred: true, description: 'OAuth 2.0 device authorization (RFC 8628) for local tools; the token reply carries cubby_api_key.', device_authorization_endpoint: `${base}/oauth/device_authorization`, registration_endpoint: `${base}/oauth/register`, scope: 'cubby:mcp', resource: `${base}/mcp` },
      { id: 'oauth_authorization_code', available: true, description: 'OAuth 2.0 authorization code with PKCE (S256) for remote MCP clients.', metadata_url: `${base}/.well-known/oauth-authorization-server`, resource: `${base}/mcp` },
      { id: 'exchange_grant', available: true, description: 'Trade a one-time connection code made in the dashboard for an API key.', endpoint: `${base}/v1/agent_auth/exchange_grant`, dashboard_url: `${base}/settings/connections` },
      { id: 'email_code', available: true, description: 'Email a six-digit code to an owner or administrator (not with two-factor sign-in), then verify it.', request_endpoint: `${base}/v1/agent_auth/request_code`, verify_endpoint: `${base}/v1/agent_auth/verify_code` },
    ],
    mcp_url: `${base}/mcp`,
    creates_accounts: false,
    sign_up_url: `${base}/users/sign_up`,
    key_prefix: 'cubby_',
    scopes: ['mailbox_read', 'mailbox_write', 'mailbox_admin'],
  };
}

async function grantThrottle(deps: AppDeps, req: FastifyRequest, run: () => Promise<unknown>) {
  const ip = clientKey(req.ip);
  await assertUnderLimit(deps.db, LIMITS.grantFailurePerIp, ip, deps.now());
  try {
    return await run();
  } catch (err) {
    if (err instanceof AppError && err.code === 'GRANT_INVALID') await recordAttempt(deps.db, LIMITS.grantFailurePerIp, ip, deps.now());
    throw err;
  }
}

function register(app: App, deps: AppDeps, wrap: (data: unknown) => unknown, surface: 'R' | 'A') {
  const ok = surface === 'R' ? okR : okA;
  const responses = (success: Record<number, Success>, codes: ErrorCode[], opts: ResponseOptions) => (surface === 'R' ? responsesR : responsesA)(success, codes, opts);
  const pub = { public: true, body: true };
  const ISSUE_CODES: ErrorCode[] = ['RATE_LIMITED', 'ACCOUNT_ADMIN_REQUIRED', 'ACCOUNT_ACCESS_DENIED', 'ACCOUNT_SUSPENDED', 'ACCOUNT_CAPACITY_REACHED', 'MAILBOX_NOT_FOUND'];
  app.get('/agent_auth/capabilities', { config: NO_KEY, schema: { operationId: 'getAgentAuthCapabilities', response: responses({ 200: ok(Capabilities) }, [], { public: true }), tags, summary: 'Supported authentication flows (no key; never creates an account)', security: [] } }, async () => wrap(capabilities(deps)));

  app.post('/agent_auth/request_code', { config: NO_KEY, schema: { operationId: 'requestAgentAuthCode', response: responses({ 200: ok(CodeRequested) }, ['RATE_LIMITED'], pub), tags, summary: 'Email a six-digit sign-in code (the same reply for every address)', security: [], body: requestBody } }, async (req) => {
    checkReason(req.body.reason);
    return wrap(await requestCode(deps, { email: req.body.email, accountId: req.body.account_id, ip: req.ip }));
  });

  app.post(
    '/agent_auth/verify_code',
    { config: NO_KEY, schema: { operationId: 'verifyAgentAuthCode', response: responses({ 201: ok(IssuedKey) }, [...ISSUE_CODES, 'SIGN_IN_CODE_INVALID', 'TWO_FACTOR_REQUIRED'], pub), tags, summary: 'Trade the code for an API key (owners and administrators; not with two-factor sign-in)', security: [], body: surface === 'A' ? verifyBodyA : verifyBodyR } },
    async (req, reply) => {
      const b = req.body as z.infer<typeof verifyBodyA>;
      checkReason(b.reason);
      const made = await verifyCode(
        deps,
        {
          email: b.email,
          code: b.code,
          label: b.label,
          scope: b.permission_scope,
          mailboxAccess: b.mailbox_access ?? b.bucket_access,
          mailboxIds: b.mailbox_ids ?? b.bucket_ids,
          mailboxPermissions: b.mailbox_permissions ?? b.bucket_permissions,
          accountId: b.account_id,
          ip: req.ip,
        },
        agentOf(req, deps),
      );
      return reply.code(201).send(wrap(await presentIssued(deps, made)));
    },
  );

  app.post('/agent_auth/exchange_grant', { config: NO_KEY, schema: { operationId: 'exchangeAgentAuthGrant', response: responses({ 201: ok(IssuedKey) }, [...ISSUE_CODES, 'GRANT_INVALID'], pub), tags, summary: 'Trade a one-time connection code from the dashboard for an API key', security: [], body: grantBody } }, async (req, reply) => {
    checkReason(req.body.reason);
    const made = (await grantThrottle(deps, req, () => exchangeGrant(deps, { grantToken: req.body.grant_token, label: req.body.label, accountId: req.body.account_id }, agentOf(req, deps)))) as Awaited<ReturnType<typeof exchangeGrant>>;
    return reply.code(201).send(wrap(await presentIssued(deps, made)));
  });

  app.post('/agent_auth/browser_login_link', { schema: { operationId: 'createBrowserLoginLink', response: responses({ 201: ok(LoginLink) }, [], { body: true }), tags, summary: 'A single-use dashboard link; grants no access (the person signs in)', body: linkBody } }, async (req, reply) => {
    checkReason(req.body?.reason);
    if (req.body?.account_id !== undefined) await selectAccount(req.ctx.db, req.ctx.credential, req.body.account_id);
    return reply.code(201).send(wrap(await createLoginLink(req.ctx, req.body?.redirect_path)));
  });
}

export function registerAgentAuthRoutesR(app: App, deps: AppDeps) {
  register(app, deps, (data) => ({ success: true, data }), 'R');
}

export function registerAgentAuthRoutesA(app: App, deps: AppDeps) {
  register(app, deps, (data) => ({ data }), 'A');
}
