import { z } from 'zod';
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import type { RequestCtx } from '../context.ts';
import { accountIdField, pageQuery, reasonField, writeBody } from '../http/schemas.ts';
import { reasonOf, selector } from '../mailboxes/mailboxes.routes.ts';
import { checkHostname, claimDomain, deleteDomain, getDomain, listDomains, requestVerify, type DomainView } from './domains.service.ts';
import { listGuidance, presentDomain } from './domains.present.ts';

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
  app.get(base, { schema: { tags, summary: 'List custom email domains (full-account owner or administrator)', querystring: listQuery } }, async (req) => {
    reasonOf(req);
    const { enabled, views, pagination } = await listDomains(req.ctx, { accountId: req.query.account_id, limit: req.query.limit, cursor: req.query.cursor });
    return wrap({ domains: views.map((v) => present(req.ctx, v)), enabled, guidance: listGuidance(enabled), pagination });
  });

  app.post(base, { schema: { tags, summary: 'Claim an exact hostname (201); returns the DNS records to publish, then verify', querystring: readQuery, body: hostnameBody } }, async (req, reply) => {
    const v = await claimDomain(req.ctx, { accountId: selector(req), hostname: req.body.hostname, reason: reasonOf(req) });
    return reply.code(201).send(wrap({ domain: present(req.ctx, v) }));
  });

  app.post(`${base}/check`, { schema: { tags, summary: 'Root domain or subdomain, and a suggested subdomain; claims nothing', querystring: readQuery, body: hostnameBody } }, async (req) => {
    reasonOf(req);
    return wrap(await checkHostname(req.ctx, { accountId: selector(req), hostname: req.body.hostname }));
  });

  app.get(`${base}/:domain_id`, { schema: { tags, summary: 'Read a custom email domain', params: idParams, querystring: readQuery } }, async (req) => {
    reasonOf(req);
    return wrap({ domain: present(req.ctx, await getDomain(req.ctx, req.params.domain_id, { accountId: req.query.account_id })) });
  });

  app.delete(
    `${base}/:domain_id`,
    {
      schema: {
        tags,
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

  app.post(`${base}/:domain_id/verify`, { schema: { tags, summary: 'Queue the ownership, provider and MX check (202); read the domain for the result', params: idParams, querystring: readQuery, body: verifyBody } }, async (req, reply) => {
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
