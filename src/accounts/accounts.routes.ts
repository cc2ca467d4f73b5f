import { z } from 'zod';
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import type { AppDeps } from '../context.ts';
import { accountIdField, pageQuery, reasonField, writeBody } from '../http/schemas.ts';
import { offsetFields, offsetOf, offsetQuery } from '../http/offset.ts';
import { checkReason } from '../activity/activity.service.ts';
import { reachableAccounts, selectAccount, toAccess } from '../auth/access.ts';
import { createClientAccount, MAX_ACCOUNT_NAME, MAX_CLIENT_NAME } from './accounts.service.ts';
import { presentAccountIdentity } from './accounts.present.ts';
import { loadStatus } from './status.service.ts';
import { limitsFor, mailboxCreationUsage } from './limits.service.ts';
import { decodeCursor, toPage } from '../http/cursor.ts';
import { okA, okR, responsesA, responsesR } from '../http/contract.ts';
import { AccountLimits, AccountList, AccountOne, StatusA, StatusR } from './accounts.responses.ts';

type App = FastifyInstance<any, any, any, any, ZodTypeProvider>;

const CREATE_CODES = ['AGENCY_OWNER_REQUIRED', 'ACCOUNT_CAPACITY_REACHED'] as const satisfies readonly import('../errors.ts').ErrorCode[];

const statusQuery = z.object({ account_id: accountIdField, reason: reasonField });
const createAccountBody = writeBody({
  name: z.string().min(1).max(MAX_ACCOUNT_NAME),
  client_name: z.string().max(MAX_CLIENT_NAME).nullable().optional(),
});

function createClient(req: any, body: z.infer<typeof createAccountBody>) {
  const ctx = req.ctx;
  return (async () => {
    const reason = checkReason(body.reason);
    const agency = await selectAccount(ctx.db, ctx.credential, body.account_id);
    const account = await createClientAccount(
      ctx.db,
      ctx.credential,
      agency,
      { name: body.name, clientName: body.client_name ?? null, reason },
      ctx.actor,
      ctx.now(),
    );
    const reachable = await reachableAccounts(ctx.db, ctx.credential);
    return presentAccountIdentity(account, toAccess(ctx.credential, account, 'owner'), ctx.credential, reachable);
  })();
}

export function registerAccountRoutesR(app: App, _deps: AppDeps) {
  app.get('/status', { schema: { operationId: 'getStatus', tags: ['accounts'], summary: 'Connection, account and server status', querystring: statusQuery, response: responsesR({ 200: okR(StatusR) }) } }, async (req) => {
    checkReason(req.query.reason);
    const s = await loadStatus(req.ctx, req.query.account_id);
    return {
      success: true,
      data: {
        connected: true,
        account: s.account,
        default_account_id: s.default_account_id,
        accounts: s.accounts,
        server_version: s.server_version,
        client_version: s.client_version,
        features: { email_domains: s.access.account.plan === 'pilot' || s.access.account.plan === 'agency' },
        connection: s.connection,
        user: s.user,
        dashboard_url: s.dashboard_url,
      },
    };
  });

  app.get(
    '/accounts',
    {
      schema: {
        operationId: 'listAccounts',
        tags: ['accounts'],
        summary: "List the credential's account and granted client accounts",
        querystring: z.object({ ...pageQuery, ...offsetQuery, account_id: accountIdField, reason: reasonField }),
        response: responsesR({ 200: okR(AccountList) }),
      },
    },
    async (req) => {
      const ctx = req.ctx;
      checkReason(req.query.reason);
      // The list is the same for every selection, but a selector the credential cannot use
      // still fails rather than being ignored.
      if (req.query.account_id !== undefined) await selectAccount(ctx.db, ctx.credential, req.query.account_id);
      const reachable = await reachableAccounts(ctx.db, ctx.credential);
      const filters = { key: ctx.credential.keyId };
      const start = offsetOf(req.query);
      const after = req.query.cursor ? String(decodeCursor(ctx.secret, req.query.cursor, 'accounts', filters)[0]) : null;
      const all = [...reachable.values()].sort((a, b) => (a.account.id < b.account.id ? -1 : 1));
      const rest = all.filter((r) => after === null || r.account.id > after);
      const position = all.length - rest.length + start;
      const rows = rest.slice(start, start + req.query.limit + 1);
      const page = toPage(rows, req.query.limit, (r) => [r.account.id], { secret: ctx.secret, list: 'accounts', filters });
      return {
        success: true,
        data: {
          accounts: page.items.map((r) => presentAccountIdentity(r.account, toAccess(ctx.credential, r.account, r.role), ctx.credential, reachable)),
          default_account_id: ctx.credential.defaultAccountId,
          // Offset fields beside the cursor ones, for offset-paging clients (docs/compat.md).
          pagination: { ...page.pagination, ...offsetFields(position, page.items.length, all.length) },
        },
      };
    },
  );

  app.post('/accounts', { schema: { operationId: 'createAccount', tags: ['accounts'], summary: 'Create a client account (agency owner)', body: createAccountBody, response: responsesR({ 201: okR(AccountOne) }, CREATE_CODES, { write: true }) } }, async (req, reply) => {
    const account = await createClient(req, req.body);
    return reply.code(201).send({ success: true, data: { account } });
  });

  app.get(
    '/accounts/:account_id',
    {
      schema: {
        operationId: 'getAccount',
        tags: ['accounts'],
        summary: 'Read one account',
        params: z.object({ account_id: z.string().max(100) }),
        querystring: z.object({ reason: reasonField }),
        response: responsesR({ 200: okR(AccountOne) }),
      },
    },
    async (req) => {
      const ctx = req.ctx;
      checkReason(req.query.reason);
      const access = await selectAccount(ctx.db, ctx.credential, req.params.account_id);
      const reachable = await reachableAccounts(ctx.db, ctx.credential);
      return { success: true, data: { account: presentAccountIdentity(access.account, access, ctx.credential, reachable) } };
    },
  );

  app.get('/account/limits', { schema: { operationId: 'getAccountLimits', tags: ['accounts'], summary: 'Plan limits and mailbox-creation usage', querystring: statusQuery, response: responsesR({ 200: okR(AccountLimits) }) } }, async (req) => {
    const ctx = req.ctx;
    checkReason(req.query.reason);
    const access = await selectAccount(ctx.db, ctx.credential, req.query.account_id);
    return {
      success: true,
      data: {
        account_id: access.account.id,
        limits: limitsFor(access.account),
        usage: { mailbox_creations: await mailboxCreationUsage(ctx.db, access.account, ctx.now()) },
      },
    };
  });
}

const SUGGESTED_PROJECTS = [
  { id: 'inbox-to-files', title: 'Collect receipts by email', description: 'Forward receipts to the bucket address; each arrives as files.' },
  { id: 'static-site', title: 'Publish a static site', description: 'Upload a folder with index.html and publish it.' },
  { id: 'agent-workspace', title: 'Give an agent a workspace', description: 'Share a bucket with an AI agent through an API key or OAuth.' },
];

export function registerAccountRoutesA(app: App, _deps: AppDeps) {
  app.get('/status', { schema: { operationId: 'getStatus', tags: ['accounts'], summary: 'Account, features and onboarding status', querystring: statusQuery, response: responsesA({ 200: okA(StatusA) }) } }, async (req) => {
    checkReason(req.query.reason);
    const s = await loadStatus(req.ctx, req.query.account_id);
    const publishing = s.access.account.website_publishing_enabled === 1;
    return {
      data: {
        account: s.account,
        default_account_id: s.default_account_id,
        accounts: s.accounts,
        features: { website_publishing: publishing, github_sync: req.ctx.config.gitSync.enabled, email_domains: s.access.account.plan === 'pilot' || s.access.account.plan === 'agency' },
        server_version: s.server_version,
        client_version: s.client_version,
        publishing: { free_plan_available: true, static_site: publishing },
        onboarding: { state: s.onboarding_state, suggested_projects: SUGGESTED_PROJECTS },
        connection: s.connection,
        user: s.user,
        dashboard_url: s.dashboard_url,
      },
    };
  });

  app.post('/accounts', { schema: { operationId: 'createAccount', tags: ['accounts'], summary: 'Create a client account (agency owner)', body: createAccountBody, response: responsesA({ 201: okA(AccountOne) }, CREATE_CODES, { write: true }) } }, async (req, reply) => {
    const account = await createClient(req, req.body);
    return reply.code(201).send({ data: { account } });
  });
}

