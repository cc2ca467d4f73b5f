import { z } from 'zod';
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { accountIdField, booleanQuery, pageQuery, reasonField, writeBody } from '../http/schemas.ts';
import { invalidArgument } from '../errors.ts';
import { loadMailbox } from '../mailboxes/mailboxes.service.ts';
import { mailboxPermissions } from '../auth/access.ts';
import { reasonOf, selector } from '../mailboxes/mailboxes.routes.ts';
import { requestPublish, retryPublish } from './publish.service.ts';
import { listPublications, loadPublication, renameSlug, requestUnpublish } from './manage.service.ts';
import { findPublication } from './publications.repo.ts';
import { presentPublication, publicUrlOf } from './publications.present.ts';
import { hostLabel } from './urls.ts';
import type { PublishBody } from './request.ts';
import { okA, responsesA } from '../http/contract.ts';
import type { ErrorCode } from '../errors.ts';
import { BucketPublications, PublicationAnalyticsOne, PublicationList, PublicationOne, SlugRenamed } from './publications.responses.ts';
import { publicationAnalytics } from './analytics/query.ts';

const PUBLISH_CODES: ErrorCode[] = ['EMAIL_NOT_VERIFIED', 
  'MAILBOX_NOT_FOUND', 'MAILBOX_ARCHIVED', 'MAILBOX_LOCKED', 'WEBSITE_PUBLISHING_DISABLED', 'PUBLICATION_UPGRADE_REQUIRED', 'SITE_SLUG_TAKEN', 'SITE_LIMIT_REACHED', 'BUCKET_PUBLISHED',
];

type App = FastifyInstance<any, any, any, any, ZodTypeProvider>;
const tags = ['publications'];
const idParams = z.object({ id: z.string().min(1).max(100).describe('bkt_… id') });
const readQuery = z.object({ account_id: accountIdField });

const fields = {
  site_mode: z.enum(['static', 'spa']).nullish().describe('static (default) or spa: unknown routes fall back to the entry page'),
  site_type: z.string().max(40).nullish().describe('Compatibility field: website is accepted (site_mode is canonical)'),
  access_mode: z.enum(['public', 'password', 'require_email']).nullish().describe('public (default), password or require_email; protected modes need a paid plan on the main site'),
  password: z.string().max(200).nullish().describe('Site password (access_mode password); omit to keep the current one or have one generated'),
  regenerate_password: z.boolean().nullish().describe('Generate a new password; only on the owner\'s explicit request'),
  publication_root_directory: z.string().max(1024).nullish().describe('Bucket-relative folder served as the site root; "" publishes the whole bucket'),
  slug_suggestions: z.union([z.array(z.string().max(100)).max(20), z.string().max(500)]).nullish().describe('Preferred slugs, best first (used when the bucket has none yet)'),
  metadata: z
    .record(z.string().max(200), z.unknown())
    .nullish()
    .describe('Client metadata: publication_root_directory is read from it (as the field of that name); other keys are ignored'),
};
const publishBody = writeBody({ ...fields, publication: z.object(fields).strict().optional().describe('The same fields, nested (accepted too)') }).nullish();
const actionBody = writeBody({}).nullish();

function bodyOf(b: z.infer<typeof publishBody>): PublishBody {
  if (!b) return {};
  const { publication, account_id: _a, reason: _r, ...top } = b;
  return { ...(publication ?? {}), ...Object.fromEntries(Object.entries(top).filter(([, v]) => v !== undefined)) } as PublishBody;
}

export function registerPublicationRoutesA(app: App) {
  for (const kind of ['main', 'preview'] as const) {
    const path = kind === 'main' ? '/buckets/:id/publication' : '/buckets/:id/publication/preview';
    app.post(
      path,
      {
        schema: {
          operationId: kind === 'main' ? 'publishBucket' : 'publishBucketPreview',
          response: responsesA({ 202: okA(PublicationOne) }, PUBLISH_CODES, { write: true, describe: { 202: 'Queued; poll the publication until publish_state is ready or failed' } }),
          tags,
          summary: kind === 'main' ? 'Publish the bucket as a website (202; poll the publication until ready or failed)' : 'Publish a public 24-hour preview at preview-<slug> (202)',
          params: idParams,
          body: publishBody,
        },
      },
      async (req, reply) => {
        const p = await requestPublish(req.ctx, req.params.id, selector(req), bodyOf(req.body), kind, reasonOf(req));
        return reply.code(202).send({ data: { publication: presentPublication(req.ctx, p, { owner: true }) } });
      },
    );
    app.delete(
      path,
      { schema: { operationId: kind === 'main' ? 'unpublishBucket' : 'unpublishBucketPreview', response: responsesA({ 202: okA(PublicationOne) }, ['MAILBOX_NOT_FOUND', 'PUBLICATION_NOT_FOUND'], { write: true }), tags, summary: kind === 'main' ? 'Unpublish the website (202: unpublishing, then unpublished)' : 'Take the preview down (202)', params: idParams, querystring: z.object({ account_id: accountIdField, reason: reasonField }), body: actionBody } },
      async (req, reply) => {
        const p = await requestUnpublish(req.ctx, req.params.id, selector(req), kind, reasonOf(req));
        return reply.code(202).send({ data: { publication: presentPublication(req.ctx, p, { owner: true }) } });
      },
    );
  }

  app.post('/buckets/:id/publication/retry', { schema: { operationId: 'retryBucketPublication', response: responsesA({ 202: okA(PublicationOne) }, [...PUBLISH_CODES, 'PUBLICATION_NOT_FOUND', 'PUBLICATION_NOT_RETRYABLE'], { write: true }), tags, summary: 'Requeue a failed build with the saved request (202)', params: idParams, body: actionBody } }, async (req, reply) => {
    const p = await retryPublish(req.ctx, req.params.id, selector(req), reasonOf(req));
    return reply.code(202).send({ data: { publication: presentPublication(req.ctx, p, { owner: true }) } });
  });

  app.get('/buckets/:id/publication', { schema: { operationId: 'getBucketPublication', response: responsesA({ 200: okA(BucketPublications) }, ['MAILBOX_NOT_FOUND']), tags, summary: "The bucket's website and preview publications (null when none)", params: idParams, querystring: readQuery } }, async (req) => {
    const { perms } = await loadMailbox(req.ctx, req.query.account_id, req.params.id, 'read');
    const main = await findPublication(req.ctx.db, req.params.id, 'main');
    const preview = await findPublication(req.ctx.db, req.params.id, 'preview');
    return { data: { publication: main ? presentPublication(req.ctx, main, { owner: perms.write }) : null, preview: preview ? presentPublication(req.ctx, preview, { owner: perms.write }) : null } };
  });

  app.patch(
    '/buckets/:id/custom_domains/public_slug',
    { schema: { operationId: 'renameBucketPublicSlug', response: responsesA({ 200: okA(SlugRenamed) }, ['MAILBOX_NOT_FOUND', 'MAILBOX_ARCHIVED', 'SITE_SLUG_TAKEN', 'WEBSITE_PUBLISHING_DISABLED'], { write: true }), tags, summary: 'Rename the managed website slug (the old address redirects with 301 for 30 days)', params: idParams, body: writeBody({ public_slug: z.string().max(100).optional(), slug: z.string().max(100).optional() }) } },
    async (req) => {
      const raw = req.body.public_slug ?? req.body.slug;
      if (raw === undefined) throw invalidArgument('public_slug', 'is required');
      const r = await renameSlug(req.ctx, req.params.id, selector(req), raw, reasonOf(req));
      return {
        data: {
          public_slug: r.slug,
          public_url: publicUrlOf(req.ctx, { kind: 'main', public_slug: r.slug, site_domain: r.main?.site_domain }),
          preview_url: req.ctx.siteUrl(hostLabel('preview', r.slug)),
          publication: r.main ? presentPublication(req.ctx, r.main, { owner: true }) : null,
          preview: r.preview ? presentPublication(req.ctx, r.preview, { owner: true }) : null,
        },
      };
    },
  );

  app.get(
    '/publications',
    {
      schema: {
        operationId: 'listPublications',
        response: responsesA({ 200: okA(PublicationList) }, ['MAILBOX_NOT_FOUND']),
        tags,
        summary: 'List publications (newest first)',
        querystring: z.object({
          bucket_id: z.string().max(100).optional(),
          kind: z.enum(['main', 'bucket_bundle', 'preview']).optional().describe('bucket_bundle (or main): the main sites; preview: the previews'),
          include_manifest: booleanQuery.optional().describe('Accepted for compatibility; publications carry no file manifest'),
          ...pageQuery,
          account_id: accountIdField,
        }),
      },
    },
    async (req) => {
      const kind = req.query.kind === 'bucket_bundle' ? 'main' : req.query.kind;
      const { access, page } = await listPublications(req.ctx, { accountId: req.query.account_id, bucketId: req.query.bucket_id, kind, limit: req.query.limit, cursor: req.query.cursor });
      const owner = (mailboxId: string) => mailboxPermissions(req.ctx.credential, access, mailboxId)?.write === true;
      return { data: { publications: page.items.map((p) => presentPublication(req.ctx, p, { owner: owner(p.mailbox_id) })), pagination: page.pagination } };
    },
  );

  app.get('/publications/:id', { schema: { operationId: 'getPublication', response: responsesA({ 200: okA(PublicationOne) }, ['PUBLICATION_NOT_FOUND']), tags, summary: 'Read a publication: publish_state, publish_error, and for the owner the password or share text once ready', params: z.object({ id: z.string().min(1).max(100).describe('pub_… id') }), querystring: readQuery } }, async (req) => {
    const { publication, perms } = await loadPublication(req.ctx, req.query.account_id, req.params.id);
    return { data: { publication: presentPublication(req.ctx, publication, { owner: perms.write }) } };
  });

  app.get(
    '/publications/:id/analytics',
    {
      schema: {
        operationId: 'getPublicationAnalytics',
        response: responsesA({ 200: okA(PublicationAnalyticsOne) }, ['PUBLICATION_NOT_FOUND', 'ANALYTICS_RANGE_INVALID', 'ANALYTICS_GRANULARITY_INVALID']),
        tags,
        summary: "A site's page views, unique visitors (no cookies), referrers, paths, countries and status codes per hour or day",
        params: z.object({ id: z.string().min(1).max(100).describe('pub_… id') }),
        querystring: z.object({
          from: z.string().max(40).optional().describe('Start: a date (YYYY-MM-DD) or an ISO 8601 time with a zone; default 7 days before to (the current hour or day included); aligned down to the granularity'),
          to: z.string().max(40).optional().describe('End (exclusive): same forms; default now; aligned up to the granularity'),
          granularity: z.string().max(20).optional().describe('hour (range up to 31 days) or day (default; up to 366 days); UTC'),
          account_id: accountIdField,
        }),
      },
    },
    async (req) => ({ data: { analytics: await publicationAnalytics(req.ctx, req.query.account_id, req.params.id, req.query) } }),
  );
}
