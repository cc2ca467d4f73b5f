import { z } from 'zod';
import { Deleted, okR, responsesR } from '../http/contract.ts';
import type { ErrorCode } from '../errors.ts';
import { MailboxList, MailboxOne } from './mailboxes.responses.ts';

// Error codes shared by the mailbox routes of both surfaces (src/mailboxes/buckets.routes.ts).
export const CREATE_CODES: ErrorCode[] = [
  'MAILBOX_TITLE_TAKEN', 'MAILBOX_LIMIT_REACHED', 'MAILBOX_CREATION_LIMIT_REACHED', 'MAILBOX_CREATION_NOT_ALLOWED', 'EMAIL_NOT_READY',
  'EMAIL_USERNAME_INVALID', 'EMAIL_USERNAME_RESERVED', 'EMAIL_ADDRESS_TAKEN', 'EMAIL_DOMAIN_NOT_AVAILABLE', 'IDEMPOTENCY_KEY_CONFLICT',
];
export const UPDATE_CODES: ErrorCode[] = ['MAILBOX_NOT_FOUND', 'MAILBOX_TITLE_TAKEN', 'MAILBOX_METADATA_CONFLICT', 'MAILBOX_ARCHIVED', 'MAILBOX_LOCKED'];
export const DELETE_CODES: ErrorCode[] = ['MAILBOX_NOT_FOUND', 'MAILBOX_DELETE_BLOCKED', 'MAILBOX_DELETE_CONFIRMATION_MISMATCH', 'BUCKET_PUBLISHED'];
export const ARCHIVE_CODES: ErrorCode[] = ['MAILBOX_NOT_FOUND', 'MAILBOX_ARCHIVED', 'MAILBOX_LOCKED', 'BUCKET_PUBLISHED'];
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { accountIdField, booleanQuery, pageQuery, reasonField, writeBody } from '../http/schemas.ts';
import { checkReason } from '../activity/activity.service.ts';
import { invalidArgument } from '../errors.ts';
import { mailboxPermissions } from '../auth/access.ts';
import { archiveMailbox, createMailbox, deleteMailbox, loadMailbox, unarchiveMailbox, updateMailbox } from './mailboxes.service.ts';
import { listMailboxes } from './mailboxes.list.ts';
import { presentMailbox } from './mailboxes.present.ts';
import { MAX_DESCRIPTION, MAX_TITLE } from './mailbox-fields.ts';

type App = FastifyInstance<any, any, any, any, ZodTypeProvider>;

export const mailboxIdParams = z.object({ mailbox_id: z.string().min(1).max(100).describe('bkt_… id') });
const readQuery = z.object({ account_id: accountIdField, reason: reasonField });
const metadataField = z.record(z.string(), z.unknown()).describe('Application data; replaces the whole object');

const createBody = writeBody({
  mailbox: z
    .object({
      title: z.string().max(MAX_TITLE).nullable().optional(),
      description: z.string().max(MAX_DESCRIPTION).nullable().optional(),
      metadata: metadataField.optional(),
      email: z.object({ username: z.string().max(100).optional(), domain: z.string().max(253).optional() }).strict().optional(),
    })
    .strict()
    .optional(),
}).nullish();

const patchBody = writeBody({
  mailbox: z
    .object({
      title: z.string().max(MAX_TITLE).nullable().optional(),
      description: z.string().max(MAX_DESCRIPTION).nullable().optional(),
      metadata: metadataField.optional(),
    })
    .strict(),
  expected_metadata_version: z.string().max(100).nullable().optional(),
});

const actionBody = writeBody({}).nullish();
const deleteBody = writeBody({ confirmation: z.string().max(200).optional() }).nullish();
const deleteQuery = z.object({ account_id: accountIdField, reason: reasonField, confirmation: z.string().max(200).optional() });

/** account_id: the JSON body on writes, the query on reads; the query also works on writes. */
export function selector(req: { body?: unknown; query?: unknown }): string | undefined {
  return (req.body as { account_id?: string } | undefined)?.account_id ?? (req.query as { account_id?: string } | undefined)?.account_id;
}

export function reasonOf(req: { body?: unknown; query?: unknown }): string | null {
  return checkReason((req.body as { reason?: unknown } | undefined)?.reason ?? (req.query as { reason?: unknown } | undefined)?.reason);
}

const tags = ['mailboxes'];

export function registerMailboxRoutesR(app: App) {
  app.get(
    '/mailboxes',
    {
      schema: {
        operationId: 'listMailboxes',
        response: responsesR({ 200: okR(MailboxList) }),
        tags,
        summary: 'List mailboxes (newest first) with counts',
        querystring: z.object({
          status: z.enum(['active', 'archived', 'all']).optional().describe('active (default), archived or all'),
          archived: booleanQuery.optional().describe('Bucket-era filter: true = status archived, false = status active; must agree with status when both are sent'),
          q: z.string().max(200).optional(),
          ...pageQuery,
          account_id: accountIdField,
          reason: reasonField,
        }),
      },
    },
    async (req) => {
      reasonOf(req);
      const fromArchived = req.query.archived === undefined ? undefined : req.query.archived ? 'archived' : 'active';
      if (fromArchived && req.query.status && req.query.status !== fromArchived) throw invalidArgument('archived', `disagrees with status=${req.query.status}; send one of them`);
      const status = req.query.status ?? fromArchived ?? 'active';
      const { access, page, counts } = await listMailboxes(req.ctx, { accountId: req.query.account_id, status, q: req.query.q, limit: req.query.limit, cursor: req.query.cursor });
      return {
        success: true,
        data: {
          mailboxes: page.items.map((m) => presentMailbox(req.ctx, m, mailboxPermissions(req.ctx.credential, access, m.id)!, access)),
          counts,
          pagination: page.pagination,
        },
      };
    },
  );

  app.post('/mailboxes', { schema: { operationId: 'createMailbox', response: responsesR({ 201: okR(MailboxOne) }, CREATE_CODES, { write: true }), tags, summary: 'Create a mailbox with its receiving address (never retried automatically)', body: createBody } }, async (req, reply) => {
    const b = req.body?.mailbox;
    const reason = reasonOf(req);
    const { mailbox, perms, access } = await createMailbox(req.ctx, {
      accountId: selector(req),
      title: b?.title,
      description: b?.description,
      metadata: b?.metadata,
      username: b?.email?.username,
      domain: b?.email?.domain,
      reason,
      field: 'mailbox',
    });
    return reply.code(201).send({ success: true, data: { mailbox: presentMailbox(req.ctx, mailbox, perms, access) } });
  });

  app.get('/mailboxes/:mailbox_id', { schema: { operationId: 'getMailbox', response: responsesR({ 200: okR(MailboxOne) }, ['MAILBOX_NOT_FOUND']), tags, summary: 'Read a mailbox (never changes it)', params: mailboxIdParams, querystring: readQuery } }, async (req) => {
    reasonOf(req);
    const { mailbox, perms, access } = await loadMailbox(req.ctx, req.query.account_id, req.params.mailbox_id, 'read');
    return { success: true, data: { mailbox: presentMailbox(req.ctx, mailbox, perms, access) } };
  });

  app.patch('/mailboxes/:mailbox_id', { schema: { operationId: 'updateMailbox', response: responsesR({ 200: okR(MailboxOne) }, UPDATE_CODES, { write: true }), tags, summary: 'Update title, description or metadata', params: mailboxIdParams, querystring: readQuery, body: patchBody } }, async (req) => {
    const b = req.body.mailbox;
    const { mailbox, perms, access } = await updateMailbox(req.ctx, req.params.mailbox_id, {
      accountId: selector(req),
      title: b.title === undefined ? undefined : b.title,
      description: b.description,
      metadata: b.metadata,
      expectedMetadataVersion: req.body.expected_metadata_version,
      reason: reasonOf(req),
      field: 'mailbox',
    });
    return { success: true, data: { mailbox: presentMailbox(req.ctx, mailbox, perms, access) } };
  });

  app.delete('/mailboxes/:mailbox_id', { schema: { operationId: 'deleteMailbox', response: responsesR({ 200: okR(Deleted) }, DELETE_CODES, { write: true }), tags, summary: 'Delete an archived mailbox', params: mailboxIdParams, querystring: deleteQuery, body: deleteBody } }, async (req) => {
    const confirmation = req.body?.confirmation ?? req.query.confirmation;
    if (confirmation === undefined) throw invalidArgument('confirmation', 'is required; use delete.confirmation from a mailbox read');
    const result = await deleteMailbox(req.ctx, req.params.mailbox_id, { accountId: selector(req), confirmation, reason: reasonOf(req) });
    return { success: true, data: result };
  });

  app.post('/mailboxes/:mailbox_id/archive', { schema: { operationId: 'archiveMailbox', response: responsesR({ 200: okR(MailboxOne) }, ARCHIVE_CODES, { write: true }), tags, summary: 'Archive (read-only; files and emails kept)', params: mailboxIdParams, querystring: readQuery, body: actionBody } }, async (req) => {
    const { mailbox, perms, access } = await archiveMailbox(req.ctx, req.params.mailbox_id, { accountId: selector(req), reason: reasonOf(req) });
    return { success: true, data: { mailbox: presentMailbox(req.ctx, mailbox, perms, access) } };
  });

  app.post('/mailboxes/:mailbox_id/unarchive', { schema: { operationId: 'unarchiveMailbox', response: responsesR({ 200: okR(MailboxOne) }, ['MAILBOX_NOT_FOUND', 'MAILBOX_NOT_ARCHIVED', 'MAILBOX_TITLE_TAKEN'], { write: true }), tags, summary: 'Unarchive (mailbox-admin)', params: mailboxIdParams, querystring: readQuery, body: actionBody } }, async (req) => {
    const { mailbox, perms, access } = await unarchiveMailbox(req.ctx, req.params.mailbox_id, { accountId: selector(req), reason: reasonOf(req) });
    return { success: true, data: { mailbox: presentMailbox(req.ctx, mailbox, perms, access) } };
  });
}

