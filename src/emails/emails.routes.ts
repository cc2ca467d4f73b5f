import { z } from 'zod';
import { Deleted, okR, responsesR } from '../http/contract.ts';
import type { ErrorCode } from '../errors.ts';
import { EmailDetailOne, EmailDownload, EmailList, EmailSummaryOne } from './emails.responses.ts';

const READ_EMAIL_CODES: ErrorCode[] = ['MAILBOX_NOT_FOUND', 'EMAIL_NOT_FOUND', 'EMAIL_LABELING_PENDING', 'EMAIL_WITHHELD'];
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { accountIdField, booleanQuery, pageQuery, reasonField, writeBody } from '../http/schemas.ts';
import { reasonOf, selector } from '../mailboxes/mailboxes.routes.ts';
import { listEmails } from './emails.list.ts';
import { attachmentDownload, deleteEmail, rawDownload, readEmail, setEmailRead } from './emails.service.ts';
import { presentOneDetail, presentOneSummary, presentSummaries, viewerOf } from './emails.present.ts';

// Surface R emails: list, read, read status, delete, and download links for the original message
// and attachments. Sending (POST …/emails) is a separate feature.

type App = FastifyInstance<any, any, any, any, ZodTypeProvider>;
const tags = ['emails'];

const mailboxParams = z.object({ mailbox_id: z.string().min(1).max(100) });
const emailParams = mailboxParams.extend({ email_id: z.string().min(1).max(100) });
const includeStorage = booleanQuery.optional().describe('Adds file_id, version_id and files (body_id, original_id, attachment_ids, directory)');
// Generated SDKs send purpose=open|background on email reads; accepted and checked, and
// (as every read here) nothing is marked read either way (docs/compat.md).
const purpose = z.enum(['open', 'background']).optional().describe('Accepted for compatibility; reads never mark read');
const readQuery = z.object({ account_id: accountIdField, reason: reasonField, purpose });
const withStorageQuery = readQuery.extend({ include_storage: includeStorage });

const listQuery = z.object({
  ...pageQuery,
  order: z.enum(['asc', 'desc']).optional().describe('desc (default): newest first. Polling: asc, and resend next_cursor with the same filters'),
  direction: z.enum(['received', 'sent', 'all']).optional().describe('received (default), sent or all'),
  sender: z.string().max(320).optional().describe('Exact sender address (first From address), case-insensitive'),
  subject: z.string().max(200).optional().describe('Case-insensitive text in the subject'),
  received_after: z.string().max(64).optional().describe('Date-time with zone; only mail received after it'),
  received_before: z.string().max(64).optional().describe('Date-time with zone; only mail received before it'),
  read: booleanQuery.optional(),
  has_attachments: booleanQuery.optional(),
  conversation_id: z.string().max(100).optional(),
  q: z.string().max(1000).optional().describe('Search: words, "phrases", -word, from:, to:, subject:, filename:, has:attachment, before:/after:YYYY-MM-DD (body and attachment text included)'),
  include_storage: includeStorage,
  purpose,
  account_id: accountIdField,
  reason: reasonField,
});

export function registerEmailRoutesR(app: App) {
  app.get(
    '/mailboxes/:mailbox_id/emails',
    { schema: { operationId: 'listEmails', response: responsesR({ 200: okR(EmailList) }, ['MAILBOX_NOT_FOUND']), tags, summary: 'List emails (newest first unless order=asc); every page has a next_cursor for polling; never marks read', params: mailboxParams, querystring: listQuery } },
    async (req) => {
      reasonOf(req);
      const q = req.query;
      const page = await listEmails(req.ctx, {
        accountId: q.account_id,
        mailboxId: req.params.mailbox_id,
        limit: q.limit,
        cursor: q.cursor,
        order: q.order,
        direction: q.direction,
        sender: q.sender,
        subject: q.subject,
        receivedAfter: q.received_after,
        receivedBefore: q.received_before,
        read: q.read,
        hasAttachments: q.has_attachments,
        conversationId: q.conversation_id,
        q: q.q,
      });
      return { success: true, data: { emails: await presentSummaries(req.ctx.db, page.items, viewerOf(req.ctx, q.include_storage === true)), pagination: page.pagination } };
    },
  );

  app.get(
    '/mailboxes/:mailbox_id/emails/:email_id',
    { schema: { operationId: 'getEmail', response: responsesR({ 200: okR(EmailDetailOne) }, READ_EMAIL_CODES), tags, summary: 'Read an email with body and attachments (does not mark read; 503 EMAIL_LABELING_PENDING while labeling)', params: emailParams, querystring: withStorageQuery } },
    async (req) => {
      reasonOf(req);
      const email = await readEmail(req.ctx, { accountId: req.query.account_id, mailboxId: req.params.mailbox_id, emailId: req.params.email_id });
      return { success: true, data: { email: await presentOneDetail(req.ctx.db, email, viewerOf(req.ctx, req.query.include_storage === true)) } };
    },
  );

  app.patch(
    '/mailboxes/:mailbox_id/emails/:email_id',
    { schema: { operationId: 'setEmailRead', response: responsesR({ 200: okR(EmailSummaryOne) }, ['MAILBOX_NOT_FOUND', 'EMAIL_NOT_FOUND'], { write: true }), tags, summary: 'Set the shared read status (read permission)', params: emailParams, querystring: withStorageQuery, body: writeBody({ read: z.boolean() }) } },
    async (req) => {
      reasonOf(req);
      const email = await setEmailRead(req.ctx, { accountId: selector(req), mailboxId: req.params.mailbox_id, emailId: req.params.email_id, read: req.body.read });
      return { success: true, data: { email: await presentOneSummary(req.ctx.db, email, viewerOf(req.ctx, req.query.include_storage === true)) } };
    },
  );

  app.delete(
    '/mailboxes/:mailbox_id/emails/:email_id',
    { schema: { operationId: 'deleteEmail', response: responsesR({ 200: okR(Deleted) }, ['MAILBOX_NOT_FOUND', 'EMAIL_NOT_FOUND', 'MAILBOX_ARCHIVED', 'MAILBOX_LOCKED'], { write: true }), tags, summary: 'Delete an email and its stored files for good (mailbox-admin; no trash)', params: emailParams, querystring: readQuery, body: writeBody({}).nullish() } },
    async (req) => {
      const result = await deleteEmail(req.ctx, { accountId: selector(req), mailboxId: req.params.mailbox_id, emailId: req.params.email_id, reason: reasonOf(req) });
      return { success: true, data: result };
    },
  );

  app.get(
    '/mailboxes/:mailbox_id/emails/:email_id/raw',
    { schema: { operationId: 'getEmailRawDownload', response: responsesR({ 200: okR(EmailDownload) }, READ_EMAIL_CODES), tags, summary: 'A signed, expiring download link for the original message (.eml); withheld mail: 503 or 403', params: emailParams, querystring: readQuery } },
    async (req) => {
      reasonOf(req);
      const download = await rawDownload(req.ctx, { accountId: req.query.account_id, mailboxId: req.params.mailbox_id, emailId: req.params.email_id });
      return { success: true, data: { download } };
    },
  );

  app.get(
    '/mailboxes/:mailbox_id/emails/:email_id/attachments/:attachment_id',
    {
      schema: {
        operationId: 'getEmailAttachmentDownload',
        response: responsesR({ 200: okR(EmailDownload) }, [...READ_EMAIL_CODES, 'EMAIL_ATTACHMENT_NOT_FOUND']),
        tags,
        summary: 'A signed, expiring download link for an attachment; withheld mail: 503 or 403',
        params: emailParams.extend({ attachment_id: z.string().min(1).max(100) }),
        querystring: readQuery,
      },
    },
    async (req) => {
      reasonOf(req);
      const download = await attachmentDownload(req.ctx, { accountId: req.query.account_id, mailboxId: req.params.mailbox_id, emailId: req.params.email_id, attachmentId: req.params.attachment_id });
      return { success: true, data: { download } };
    },
  );
}
