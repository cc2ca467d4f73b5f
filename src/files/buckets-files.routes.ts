import { assertEmailFileReadable } from '../emails/withheld.ts';
import { z } from 'zod';
import { binary, okA, responsesA } from '../http/contract.ts';
import { AppendResult, DirectUpload, DirectUploadSkipped, FileList, FileOne, FileWrite, VersionList } from './files.responses.ts';
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { accountIdField, pageQuery, writeBody } from '../http/schemas.ts';
import { AppError } from '../errors.ts';
import { reasonOf, selector } from '../mailboxes/mailboxes.routes.ts';
import { loadMailbox } from '../mailboxes/mailboxes.service.ts';
import { createDirectUpload } from './direct-uploads.service.ts';
import { appendText, loadFile, restoreVersion, saveFile } from './files.service.ts';
import { listFiles, listVersions } from './files.list.ts';
import { presentFiles, presentOneFile, presentVersions } from './files.present.ts';
import { offsetQuery } from '../http/offset.ts';
import { findFileByPath } from './files.repo.ts';
import { cleanPath } from './paths.ts';
import { attachmentDisposition } from '../blobs/content-disposition.ts';
import { blobDeclaration, DIRECT_UPLOAD_CODES, DIRECT_UPLOAD_DESCRIBE, directUploadResponse, expectedVersion, presentWrite, READ_FILE_CODES, SAVE_DESCRIBE, WRITE_FILE_CODES } from './files.routes.ts';

type App = FastifyInstance<any, any, any, any, ZodTypeProvider>;
const tags = ['files'];
const idParams = z.object({ id: z.string().min(1).max(100) });
const fileParams = idParams.extend({ file_id: z.string().min(1).max(100).describe('df_… id') });
const readQuery = z.object({ account_id: accountIdField });

export function registerBucketFileRoutesA(app: App) {
  app.post(
    '/direct_uploads',
    {
      schema: {
        operationId: 'createDirectUpload',
        response: responsesA({ 201: okA(DirectUpload), 200: okA(DirectUploadSkipped) }, DIRECT_UPLOAD_CODES, { write: true, describe: DIRECT_UPLOAD_DESCRIBE }),
        tags,
        summary: 'Declare a file and get a signed upload URL; PUT the bytes without the API key',
        body: writeBody({ bucket_id: z.string().min(1).max(100), path: z.string().max(2048), existing_file_policy: z.enum(['replace', 'skip']).optional(), blob: blobDeclaration }),
      },
    },
    async (req, reply) => {
      const b = req.body;
      const result = await createDirectUpload(req.ctx, { accountId: selector(req), mailboxId: b.bucket_id, path: b.path, existingFilePolicy: b.existing_file_policy, blob: b.blob });
      const out = await directUploadResponse(req.ctx, result);
      return reply.code(out.status).send({ data: out.data });
    },
  );

  app.post(
    '/buckets/:id/files',
    { schema: { operationId: 'saveBucketFile', response: responsesA({ 201: okA(FileWrite), 200: okA(FileWrite) }, WRITE_FILE_CODES, { write: true, describe: SAVE_DESCRIBE }), tags, summary: 'Save an uploaded blob at a path; the same path creates a new version', params: idParams, body: writeBody({ path: z.string().max(2048), signed_blob_id: z.string().min(1).max(300), expected_mailbox_version: z.string().max(100).nullable().optional() }) } },
    async (req, reply) => {
      const r = await saveFile(req.ctx, { accountId: selector(req), mailboxId: req.params.id, path: req.body.path, signedBlobId: req.body.signed_blob_id, expectedMailboxVersion: req.body.expected_mailbox_version, reason: reasonOf(req) });
      return reply.code(r.created ? 201 : 200).send({ data: await presentWrite(req.ctx, r) });
    },
  );

  app.get(
    '/buckets/:id/files',
    { schema: { operationId: 'listBucketFiles', response: responsesA({ 200: okA(FileList) }, ['MAILBOX_NOT_FOUND']), tags, summary: 'List files of a bucket; cursor or offset paging', params: idParams, querystring: z.object({ q: z.string().max(200).optional(), folder: z.string().max(1024).optional(), ...pageQuery, ...offsetQuery, account_id: accountIdField }) } },
    async (req) => {
      const page = await listFiles(req.ctx, { accountId: req.query.account_id, mailboxId: req.params.id, q: req.query.q, folder: req.query.folder, limit: req.query.limit, cursor: req.query.cursor, offset: req.query.offset });
      return { data: { files: await presentFiles(req.ctx.db, page.items), pagination: page.pagination } };
    },
  );

  // Surface R's file operations under the bucket names (docs/compat.md): the same service
  // functions, so the rules (paths, _email/ read-only, versions, locks) are the same.
  app.post(
    '/buckets/:id/files/append_text',
    {
      schema: {
        operationId: 'appendBucketText',
        response: responsesA({ 200: okA(AppendResult) }, WRITE_FILE_CODES, { write: true }),
        tags,
        summary: 'Append UTF-8 text to an existing file (a new version); missing file: MAILBOX_FILE_NOT_FOUND',
        params: idParams,
        body: writeBody({ path: z.string().max(2048), content: z.string(), newline_before: z.boolean().optional(), expected_mailbox_version: expectedVersion }),
      },
    },
    async (req) => {
      const b = req.body;
      const r = await appendText(req.ctx, { accountId: selector(req), mailboxId: req.params.id, path: b.path, content: b.content, newlineBefore: b.newline_before, expectedMailboxVersion: b.expected_mailbox_version, reason: reasonOf(req) });
      const { file, version } = await presentWrite(req.ctx, r);
      return { data: { file, version, path: r.path, appended: true, appended_bytes: r.appended_bytes, newline_inserted: r.newline_inserted } };
    },
  );

  app.get('/buckets/:id/files/:file_id', { schema: { operationId: 'getBucketFile', response: responsesA({ 200: okA(FileOne) }, READ_FILE_CODES), tags, summary: 'Read file metadata (does not mark read)', params: fileParams, querystring: readQuery } }, async (req) => {
    const { file } = await loadFile(req.ctx, req.query.account_id, req.params.id, req.params.file_id);
    return { data: { file: await presentOneFile(req.ctx.db, file) } };
  });

  app.get(
    '/buckets/:id/files/:file_id/versions',
    { schema: { operationId: 'listBucketFileVersions', response: responsesA({ 200: okA(VersionList) }, READ_FILE_CODES), tags, summary: 'Versions of a file, newest first', params: fileParams, querystring: z.object({ ...pageQuery, account_id: accountIdField }) } },
    async (req) => {
      const { file } = await loadFile(req.ctx, req.query.account_id, req.params.id, req.params.file_id);
      const page = await listVersions(req.ctx, { fileId: file.id, mailboxId: file.mailbox_id, limit: req.query.limit, cursor: req.query.cursor });
      return { data: { versions: await presentVersions(req.ctx.db, page.items), pagination: page.pagination } };
    },
  );

  app.post(
    '/buckets/:id/files/:file_id/versions/:version_id/restore',
    { schema: { operationId: 'restoreBucketFileVersion', response: responsesA({ 200: okA(FileWrite) }, [...WRITE_FILE_CODES, 'FILE_VERSION_NOT_FOUND'], { write: true }), tags, summary: 'Restore an earlier version as a new version', params: fileParams.extend({ version_id: z.string().min(1).max(100) }), body: writeBody({ expected_mailbox_version: expectedVersion }).nullish() } },
    async (req) => {
      const r = await restoreVersion(req.ctx, { accountId: selector(req), mailboxId: req.params.id, fileId: req.params.file_id, versionId: req.params.version_id, expectedMailboxVersion: req.body?.expected_mailbox_version, reason: reasonOf(req) });
      return { data: await presentWrite(req.ctx, r) };
    },
  );

  app.get(
    '/buckets/:id/files/by_path',
    { schema: { operationId: 'downloadBucketFileByPath', response: responsesA({ 200: binary('The current bytes of the file, with its content type') }, READ_FILE_CODES), tags, summary: "The file's bytes by path", params: idParams, querystring: z.object({ path: z.string().max(2048), account_id: accountIdField }) } },
    async (req, reply) => {
      const { mailbox } = await loadMailbox(req.ctx, req.query.account_id, req.params.id, 'read');
      const p = cleanPath(req.query.path, 'path', { allowEmail: true });
      const file = await findFileByPath(req.ctx.db, mailbox.id, p.path);
      const v = file?.current_version_id ? await req.ctx.db.selectFrom('file_versions').selectAll().where('id', '=', file.current_version_id).executeTakeFirst() : undefined;
      if (!file || !v?.sha256) throw new AppError('MAILBOX_FILE_NOT_FOUND', `No file at ${p.path}.`, { path: p.path });
      await assertEmailFileReadable(req.ctx, mailbox.id, file.path);
      reply
        .type(v.mime_type)
        .header('content-length', String(v.byte_size))
        .header('etag', `"${v.sha256}"`)
        .header('x-content-type-options', 'nosniff')
        .header('content-security-policy', "sandbox; default-src 'none'")
        .header('content-disposition', attachmentDisposition(v.name));
      return reply.send(Number(v.byte_size) === 0 ? '' : await req.ctx.blobs.read(v.sha256));
    },
  );
}
