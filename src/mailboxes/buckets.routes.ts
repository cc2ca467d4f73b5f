import { z } from 'zod';
import { Deleted, okA, responsesA } from '../http/contract.ts';
import { BucketInboundEmail, BucketList, BucketOne } from './mailboxes.responses.ts';
import { ARCHIVE_CODES, CREATE_CODES, DELETE_CODES, reasonOf, selector, UPDATE_CODES } from './mailboxes.routes.ts';
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { accountIdField, booleanQuery, pageQuery, reasonField, writeBody } from '../http/schemas.ts';
import { AppError, invalidArgument } from '../errors.ts';
import { mailboxPermissions } from '../auth/access.ts';
import { idempotentCreate } from '../http/idempotency.ts';
import { archiveMailbox, createMailbox, deleteMailbox, loadMailbox, unarchiveMailbox, updateMailbox } from './mailboxes.service.ts';
import { listMailboxes } from './mailboxes.list.ts';
import { presentBucket } from './mailboxes.present.ts';
import { inboundEmailSettings } from '../addresses/settings.ts';
import { MAX_DESCRIPTION, MAX_TAG_PATH, MAX_TITLE } from './mailbox-fields.ts';


type App = FastifyInstance<any, any, any, any, ZodTypeProvider>;

const idParams = z.object({ id: z.string().min(1).max(100).describe('bkt_… id') });
const readQuery = z.object({ account_id: accountIdField });
const tags = ['buckets'];

const createBody = writeBody({
  bucket: z
    .object({
      title: z.string().min(1).max(MAX_TITLE),
      description: z.string().max(MAX_DESCRIPTION).nullable().optional(),
      tag_paths: z.array(z.string().max(MAX_TAG_PATH)).max(50).optional(),
      metadata: z.record(z.string(), z.unknown()).optional(),
    })
    .strict(),
});

const patchBody = writeBody({
  bucket: z
    .object({
      title: z.string().max(MAX_TITLE).nullable().optional(),
      description: z.string().max(MAX_DESCRIPTION).nullable().optional(),
      metadata: z.record(z.string(), z.unknown()).optional(),
    })
    .strict(),
  expected_metadata_version: z.string().max(100).nullable().optional(),
});

const actionBody = writeBody({}).nullish();

export function registerBucketRoutesA(app: App) {
  app.post(
    '/buckets',
    {
      schema: {
        operationId: 'createBucket',
        response: responsesA({ 201: okA(BucketOne), 200: okA(BucketOne) }, CREATE_CODES, { write: true, describe: { 200: 'The bucket made by the first request with this Idempotency-Key (replay)' } }),
        tags,
        summary: 'Create a private bucket with its receiving address (201; 200 on Idempotency-Key replay). A title another active bucket holds gets a numeric suffix',
        body: createBody,
        headers: z.object({ 'idempotency-key': z.string().max(200).optional() }).passthrough(),
      },
    },
    async (req, reply) => {
      const b = req.body.bucket;
      const reason = reasonOf(req);
      const ctx = req.ctx;
      const { replayed, result } = await idempotentCreate(
        ctx,
        'bucket.create',
        req.headers['idempotency-key'] as string | undefined,
        req.body,
        (onCreated) =>
          createMailbox(ctx, { accountId: selector(req), title: b.title, description: b.description, metadata: b.metadata, tagPaths: b.tag_paths, reason, field: 'bucket', titleClash: 'suffix', onCreated }),
        (id) => loadMailbox(ctx, selector(req), id, 'read'),
      );
      const bucket = presentBucket(ctx, result.mailbox, result.perms, result.access, { includeInboundEmail: result.perms.write });
      return reply.code(replayed ? 200 : 201).send({ data: { bucket } });
    },
  );

  app.get(
    '/buckets',
    {
      schema: {
        operationId: 'listBuckets',
        response: responsesA({ 200: okA(BucketList) }),
        tags,
        summary: 'List buckets (newest first)',
        querystring: z.object({
          archived: z.enum(['true', 'false', 'all']).default('false').describe('false: active (default); true: archived; all'),
          q: z.string().max(200).optional(),
          ...pageQuery,
          account_id: accountIdField,
        }),
      },
    },
    async (req) => {
      const status = req.query.archived === 'all' ? 'all' : req.query.archived === 'true' ? 'archived' : 'active';
      const { access, page, counts } = await listMailboxes(req.ctx, { accountId: req.query.account_id, status, q: req.query.q, limit: req.query.limit, cursor: req.query.cursor });
      return {
        data: {
          buckets: page.items.map((m) => presentBucket(req.ctx, m, mailboxPermissions(req.ctx.credential, access, m.id)!, access, { includeInboundEmail: false })),
          counts,
          pagination: page.pagination,
        },
      };
    },
  );

  app.get(
    '/buckets/:id',
    { schema: { operationId: 'getBucket', response: responsesA({ 200: okA(BucketOne) }, ['MAILBOX_NOT_FOUND', 'PERMISSION_DENIED']), tags, summary: 'Read a bucket', params: idParams, querystring: z.object({ include_inbound_email: booleanQuery.optional(), account_id: accountIdField }) } },
    async (req) => {
      const include = req.query.include_inbound_email === true;
      const { mailbox, perms, access } = await loadMailbox(req.ctx, req.query.account_id, req.params.id, 'read');
      if (include && !perms.write) {
        throw new AppError('PERMISSION_DENIED', 'include_inbound_email needs upload/write access to the bucket.', { required: 'write', field: 'include_inbound_email' });
      }
      return { data: { bucket: presentBucket(req.ctx, mailbox, perms, access, { includeInboundEmail: include }) } };
    },
  );

  app.get('/buckets/:id/inbound_email', { schema: { operationId: 'getBucketInboundEmail', response: responsesA({ 200: okA(BucketInboundEmail) }, ['MAILBOX_NOT_FOUND', 'PERMISSION_DENIED']), tags, summary: "The bucket's inbound email address and activity (write access)", params: idParams, querystring: readQuery } }, async (req) => {
    // The full state: address, activity, and the address facts of src/addresses (assignment to poll after a rotation).
    return { data: await inboundEmailSettings(req.ctx, await loadMailbox(req.ctx, req.query.account_id, req.params.id, 'write')) };
  });

  app.patch('/buckets/:id', { schema: { operationId: 'updateBucket', response: responsesA({ 200: okA(BucketOne) }, UPDATE_CODES, { write: true }), tags, summary: 'Update title, description or metadata', params: idParams, querystring: readQuery, body: patchBody } }, async (req) => {
    const b = req.body.bucket;
    const { mailbox, perms, access } = await updateMailbox(req.ctx, req.params.id, {
      accountId: selector(req),
      title: b.title,
      description: b.description,
      metadata: b.metadata,
      expectedMetadataVersion: req.body.expected_metadata_version,
      reason: reasonOf(req),
      field: 'bucket',
    });
    return { data: { bucket: presentBucket(req.ctx, mailbox, perms, access, { includeInboundEmail: false }) } };
  });

  app.post('/buckets/:id/archive', { schema: { operationId: 'archiveBucket', response: responsesA({ 200: okA(BucketOne) }, ARCHIVE_CODES, { write: true }), tags, summary: 'Archive a bucket', params: idParams, querystring: readQuery, body: actionBody } }, async (req) => {
    const { mailbox, perms, access } = await archiveMailbox(req.ctx, req.params.id, { accountId: selector(req), reason: reasonOf(req) });
    return { data: { bucket: presentBucket(req.ctx, mailbox, perms, access, { includeInboundEmail: false }) } };
  });

  app.post('/buckets/:id/unarchive', { schema: { operationId: 'unarchiveBucket', response: responsesA({ 200: okA(BucketOne) }, ['MAILBOX_NOT_FOUND', 'MAILBOX_NOT_ARCHIVED', 'MAILBOX_TITLE_TAKEN'], { write: true }), tags, summary: 'Unarchive a bucket (admin)', params: idParams, querystring: readQuery, body: actionBody } }, async (req) => {
    const { mailbox, perms, access } = await unarchiveMailbox(req.ctx, req.params.id, { accountId: selector(req), reason: reasonOf(req) });
    return { data: { bucket: presentBucket(req.ctx, mailbox, perms, access, { includeInboundEmail: false }) } };
  });

  app.delete(
    '/buckets/:id',
    {
      schema: {
        operationId: 'deleteBucket',
        response: responsesA({ 200: okA(Deleted) }, DELETE_CODES, { write: true }),
        tags,
        summary: 'Delete an archived bucket',
        params: idParams,
        querystring: z.object({ account_id: accountIdField, reason: reasonField, confirmation: z.string().max(200).optional() }),
        body: writeBody({ confirmation: z.string().max(200).optional() }).nullish(),
      },
    },
    async (req) => {
      const confirmation = req.body?.confirmation ?? req.query.confirmation;
      if (confirmation === undefined) throw invalidArgument('confirmation', 'is required; use delete.confirmation from a bucket read');
      return { data: await deleteMailbox(req.ctx, req.params.id, { accountId: selector(req), confirmation, reason: reasonOf(req) }) };
    },
  );
}
