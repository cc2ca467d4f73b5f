import { z } from 'zod';
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { accountIdField, reasonField, writeBody } from '../../http/schemas.ts';
import { reasonOf, selector } from '../../mailboxes/mailboxes.routes.ts';
import { Deleted, okA, responsesA } from '../../http/contract.ts';
import type { ErrorCode } from '../../errors.ts';
import { addSiteDomain, getSiteDomain, listSiteDomains, makePrimary, removeSiteDomain, verifySiteDomain } from './site-domains.service.ts';
import { presentSiteDomain } from './site-domains.present.ts';
import { SiteDomainList, SiteDomainOne } from './site-domains.responses.ts';

// Custom domains of a bucket's site, beside the spec's `custom_domains/public_slug` (the managed
// slug): /api/v1/buckets/{id}/custom_domains[/{domain_id}[/verify]].

type App = FastifyInstance<any, any, any, any, ZodTypeProvider>;
const tags = ['publications'];
const base = '/buckets/:id/custom_domains';
const bucketParams = z.object({ id: z.string().min(1).max(100).describe('bkt_… id') });
const domainParams = bucketParams.extend({ domain_id: z.string().min(1).max(100).describe('sdm_… id') });
const readQuery = z.object({ account_id: accountIdField });
const BASE_CODES: ErrorCode[] = ['MAILBOX_NOT_FOUND', 'SITE_DOMAIN_NOT_FOUND'];

export function registerSiteDomainRoutesA(app: App) {
  app.get(base, { schema: { operationId: 'listSiteDomains', tags, summary: "The custom domains of the bucket's website", params: bucketParams, querystring: readQuery, response: responsesA({ 200: okA(SiteDomainList) }, ['MAILBOX_NOT_FOUND']) } }, async (req) => {
    const rows = await listSiteDomains(req.ctx, req.params.id, req.query.account_id);
    return { data: { domains: rows.map((d) => presentSiteDomain(req.ctx, d)) } };
  });

  app.post(
    base,
    {
      schema: {
        operationId: 'addSiteDomain',
        tags,
        summary: 'Add a custom domain to the website (201; 200 when the bucket has it already); DNS is checked at once',
        description: 'Publish the returned dns_records (ownership TXT, and a CNAME or A/AAAA), then call verify. A hostname verified for another site answers 409 SITE_DOMAIN_TAKEN.',
        params: bucketParams,
        body: writeBody({
          hostname: z.string().max(300).describe('An exact host name such as www.example.org (international names are stored in punycode form)'),
          primary: z.boolean().nullish().describe("Make it the site's main address (default: true for the bucket's first domain)"),
        }),
        response: responsesA({ 200: okA(SiteDomainOne), 201: okA(SiteDomainOne) }, ['MAILBOX_NOT_FOUND', 'MAILBOX_ARCHIVED', 'WEBSITE_PUBLISHING_DISABLED', 'SITE_DOMAIN_TAKEN', 'SITE_DOMAIN_NOT_ALLOWED', 'SITE_DOMAIN_LIMIT_REACHED', 'SITE_DOMAIN_SETUP_RATE_LIMITED'], { write: true }),
      },
    },
    async (req, reply) => {
      const r = await addSiteDomain(req.ctx, req.params.id, selector(req), { hostname: req.body.hostname, primary: req.body.primary }, reasonOf(req));
      return reply.code(r.created ? 201 : 200).send({ data: { domain: presentSiteDomain(req.ctx, r.domain) } });
    },
  );

  app.get(`${base}/:domain_id`, { schema: { operationId: 'getSiteDomain', tags, summary: 'Read a custom domain of the website', params: domainParams, querystring: readQuery, response: responsesA({ 200: okA(SiteDomainOne) }, BASE_CODES) } }, async (req) => {
    return { data: { domain: presentSiteDomain(req.ctx, await getSiteDomain(req.ctx, req.params.id, req.query.account_id, req.params.domain_id)) } };
  });

  app.post(
    `${base}/:domain_id/verify`,
    { schema: { operationId: 'verifySiteDomain', tags, summary: 'Check the DNS records now (200 with the outcome; a failed domain starts a new 7-day window)', params: domainParams, body: writeBody({}).nullish(), response: responsesA({ 200: okA(SiteDomainOne) }, [...BASE_CODES, 'SITE_DOMAIN_SETUP_RATE_LIMITED'], { write: true }) } },
    async (req) => {
      return { data: { domain: presentSiteDomain(req.ctx, await verifySiteDomain(req.ctx, req.params.id, selector(req), req.params.domain_id)) } };
    },
  );

  app.patch(
    `${base}/:domain_id`,
    { schema: { operationId: 'updateSiteDomain', tags, summary: "Make the domain the site's primary address (or not)", params: domainParams, body: writeBody({ primary: z.boolean() }), response: responsesA({ 200: okA(SiteDomainOne) }, BASE_CODES, { write: true }) } },
    async (req) => {
      return { data: { domain: presentSiteDomain(req.ctx, await makePrimary(req.ctx, req.params.id, selector(req), req.params.domain_id, req.body.primary, reasonOf(req))) } };
    },
  );

  app.delete(
    `${base}/:domain_id`,
    { schema: { operationId: 'removeSiteDomain', tags, summary: 'Remove the domain: the site stops answering on it at once', params: domainParams, querystring: z.object({ account_id: accountIdField, reason: reasonField }), body: writeBody({}).nullish(), response: responsesA({ 200: okA(Deleted) }, BASE_CODES, { write: true }) } },
    async (req) => {
      return { data: { deleted: true as const, id: await removeSiteDomain(req.ctx, req.params.id, selector(req), req.params.domain_id, reasonOf(req)) } };
    },
  );
}
