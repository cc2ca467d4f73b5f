import { z } from 'zod';
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import type { RequestCtx } from '../context.ts';
import { accountIdField, pageQuery, reasonField, writeBody } from '../http/schemas.ts';
import { reasonOf, selector } from '../mailboxes/mailboxes.routes.ts';
import { checkHostname, claimDomain, deleteDomain, getDomain, listDomains, requestVerify, type DomainView } from './domains.service.ts';
import { listGuidance, presentDomain } from './domains.present.ts';
import { Deleted, okA, okR, responsesA, responsesR, type Success } from '../http/contract.ts';
import type { ErrorCode } from '../errors.ts';
import { DomainList, DomainOne, HostnameCheck } from './domains.responses.ts';

const DOMAIN_CODES: ErrorCode[] = ['EMAIL_DOMAINS_NOT_ENABLED', 'EMAIL_DOMAIN_NOT_FOUND'];

// Custom receiving domains on both surfaces: /v1/account/email_domains (R) and
// /api/v1/account/inbound_email_domains (A). Same operations; surface A removes in the background.

type App = FastifyInstance<any, any, any, any, ZodTypeProvider>;
const tags = ['email domains'];

const idParams = z.object({ domain_id: z.string().min(1).max(100).describe('dom_… id') });
const readQuery = z.object({ account_id: accountIdField, reason: reasonField });
const listQuery = z.object({ ...pageQuery, account_id: accountIdField, reason: reasonField });
const hostnameBody = writeBody({ hostname: z.string().max(300).describe('An exact hostname, such as inbox.example.com') });
const deleteFields = {
  hostname: z.string().max(300).optional().describe("Must equal the domain's hostname"),
  confirm: z.union([z.boolean(), z.enum(['true', 'false'])]).optional().describe('Must be true'),
};
const deleteBody = writeBody(deleteFields).nullish();
const deleteQuery = z.object({ ...deleteFields, account_id: accountIdField, reason: reasonField });
const verifyBody = writeBody({}).nullish();

function present(ctx: RequestCtx, v: DomainView) {
  return presentDomain(v.domain, v.assigned, ctx.config.mxHost);
}

type Wrap = (data: unknown) => unknown;

function register(app: App, base: string, wrap: Wrap, surface: 'R' | 'A') {
  const ok = surface === 'R' ? okR : okA;
  const responses = (success: Record<number, Success>, codes: ErrorCode[], write = false, describe?: Record<number, string>) =>
    (surface === 'R' ? responsesR : responsesA)(success, [...DOMAIN_CODES, ...codes], { write, describe });
  const op = (r: string, a: string) => (surface === 'R' ? r : a);
  app.get(base, { schema: { tags, operationId: op('listEmailDomains', 'listInboundEmailDomains'), response: responses({ 200: ok(DomainList) }, []), summary: 'List custom email domains (full-account owner or administrator)', querystring: listQuery } }, async (req) => {
    reasonOf(req);
    const { enabled, views, pagination } = await listDomains(req.ctx, { accountId: req.query.account_id, limit: req.query.limit, cursor: req.query.cursor });
    return wrap({ domains: views.map((v) => present(req.ctx, v)), enabled, guidance: listGuidance(enabled), pagination });
  });

  app.post(base, { schema: { tags, operationId: op('createEmailDomain', 'createInboundEmailDomain'), response: responses({ 201: ok(DomainOne) }, ['EMAIL_DOMAIN_LIMIT_REACHED', 'EMAIL_DOMAIN_CONFLICT', 'EMAIL_DOMAIN_SETUP_RATE_LIMITED', 'EMAIL_DOMAIN_DNS_UNAVAILABLE'], true), summary: 'Claim an exact hostname (201); returns the DNS records to publish, then verify', querystring: readQuery, body: hostnameBody } }, async (req, reply) => {
    const v = await claimDomain(req.ctx, { accountId: selector(req), hostname: req.body.hostname, reason: reasonOf(req) });
    return reply.code(201).send(wrap({ domain: present(req.ctx, v) }));
  });

  app.post(`${base}/check`, { schema: { tags, operationId: op('checkEmailDomain', 'checkInboundEmailDomain'), response: responses({ 200: ok(HostnameCheck) }, ['EMAIL_DOMAIN_SETUP_RATE_LIMITED', 'EMAIL_DOMAIN_DNS_UNAVAILABLE']), summary: 'Root domain or subdomain, and a suggested subdomain; claims nothing', querystring: readQuery, body: hostnameBody } }, async (req) => {
    reasonOf(req);
    return wrap(await checkHostname(req.ctx, { accountId: selector(req), hostname: req.body.hostname }));
  });

  app.get(`${base}/:domain_id`, { schema: { tags, operationId: op('getEmailDomain', 'getInboundEmailDomain'), response: responses({ 200: ok(DomainOne) }, []), summary: 'Read a custom email domain', params: idParams, querystring: readQuery } }, async (req) => {
    reasonOf(req);
    return wrap({ domain: present(req.ctx, await getDomain(req.ctx, req.params.domain_id, { accountId: req.query.account_id })) });
  });

  app.delete(
    `${base}/:domain_id`,
    {
      schema: {
        tags,
        operationId: op('deleteEmailDomain', 'deleteInboundEmailDomain'),
        response: surface === 'R' ? responses({ 200: ok(Deleted) }, ['EMAIL_DOMAIN_IN_USE'], true) : responses({ 202: ok(DomainOne) }, ['EMAIL_DOMAIN_IN_USE'], true, { 202: 'Removal queued; poll the domain' }),
        summary: surface === 'R' ? 'Remove a domain no address uses (hostname and confirm=true)' : 'Queue removal of a domain no address uses (202; poll the domain)',
        params: idParams,
        querystring: deleteQuery,
        body: deleteBody,
      },
    },
    async (req, reply) => {
      const hostname = req.body?.hostname ?? req.query.hostname;
      const confirm = req.body?.confirm ?? req.query.confirm;
      const v = await deleteDomain(req.ctx, req.params.domain_id, { accountId: selector(req), hostname, confirm, queued: surface === 'A', reason: reasonOf(req) });
      if (surface === 'R') return { success: true, data: { deleted: true, id: v.domain.id } };
      return reply.code(202).send(wrap({ domain: present(req.ctx, v) }));
    },
  );

  app.post(`${base}/:domain_id/verify`, { schema: { tags, operationId: op('verifyEmailDomain', 'verifyInboundEmailDomain'), response: responses({ 202: ok(DomainOne) }, ['EMAIL_DOMAIN_SETUP_RATE_LIMITED'], true, { 202: 'Check queued; read the domain for the result' }), summary: 'Queue the ownership, provider and MX check (202); read the domain for the result', params: idParams, querystring: readQuery, body: verifyBody } }, async (req, reply) => {
    const v = await requestVerify(req.ctx, req.params.domain_id, { accountId: selector(req), reason: reasonOf(req) });
    return reply.code(202).send(wrap({ domain: present(req.ctx, v) }));
  });
}

export function registerDomainRoutesR(app: App) {
  register(app, '/account/email_domains', (data) => ({ success: true, data }), 'R');
}

export function registerDomainRoutesA(app: App) {
  register(app, '/account/inbound_email_domains', (data) => ({ data }), 'A');
}
