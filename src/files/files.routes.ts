import { assertEmailFileReadable } from '../emails/withheld.ts';
import { z } from 'zod';
import { okR, responsesR } from '../http/contract.ts';
import type { ErrorCode } from '../errors.ts';
import { AppendResult, DirectUpload, DirectUploadSkipped, DownloadLink, FileDeleted, FileList, FileOne, FileWrite, VersionList } from './files.responses.ts';

// Error codes of the file routes (both surfaces).
export const READ_FILE_CODES: ErrorCode[] = ['MAILBOX_NOT_FOUND', 'MAILBOX_FILE_NOT_FOUND', 'EMAIL_WITHHELD', 'EMAIL_LABELING_PENDING'];
export const WRITE_FILE_CODES: ErrorCode[] = [
  ...READ_FILE_CODES, 'MAILBOX_ARCHIVED', 'MAILBOX_LOCKED', 'MAILBOX_VERSION_CONFLICT', 'EMAIL_PATH_READ_ONLY', 'FILE_TYPE_FORBIDDEN', 'FILE_PATH_TAKEN',
  'FILE_TOO_LARGE', 'FILE_LIMIT_REACHED', 'STORAGE_LIMIT_REACHED', 'FILE_VERSION_LIMIT_REACHED', 'DIRECT_UPLOAD_NOT_FOUND', 'DIRECT_UPLOAD_INVALID', 'UPLOAD_CHECKSUM_MISMATCH',
];
export const DIRECT_UPLOAD_CODES: ErrorCode[] = ['MAILBOX_NOT_FOUND', 'MAILBOX_ARCHIVED', 'MAILBOX_LOCKED', 'EMAIL_PATH_READ_ONLY', 'FILE_TYPE_FORBIDDEN', 'FILE_TOO_LARGE', 'FILE_LIMIT_REACHED', 'STORAGE_LIMIT_REACHED', 'FILE_VERSION_LIMIT_REACHED'];
export const DIRECT_UPLOAD_DESCRIBE = { 201: 'Upload target made: PUT the bytes, then save the file', 200: 'No upload needed (identical content, or existing_file_policy=skip)' };
export const SAVE_DESCRIBE = { 201: 'A new file', 200: 'A new version of an existing file, or skipped (see `skipped`, `code`)' };
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import type { RequestCtx } from '../context.ts';
import { accountIdField, pageQuery, reasonField, writeBody } from '../http/schemas.ts';
import { offsetQuery } from '../http/offset.ts';
import { AppError, invalidArgument } from '../errors.ts';
import { reasonOf, selector } from '../mailboxes/mailboxes.routes.ts';
import { loadMailbox } from '../mailboxes/mailboxes.service.ts';
import { createDirectUpload } from './direct-uploads.service.ts';
import { appendText, deleteFile, FILE_ROLES, loadFile, relocateFile, restoreVersion, saveFile, setFileRead } from './files.service.ts';
import { listFiles, listVersions } from './files.list.ts';
import { presentFiles, presentOneFile, presentVersions } from './files.present.ts';
import { findFileByPath } from './files.repo.ts';
import { cleanPath } from './paths.ts';
import { downloadLink } from './blob.routes.ts';
import type { WriteResult } from './files.write.ts';

type App = FastifyInstance<any, any, any, any, ZodTypeProvider>;
const tags = ['files'];

export const blobDeclaration = z
  .object({
    filename: z.string().min(1).max(255),
    byte_size: z.number().int().min(0),
    checksum: z.string().max(64).describe('base64 MD5 of the bytes'),
    content_type: z.string().min(3).max(255),
    sha256: z.string().max(64).describe('hex SHA-256 of the bytes'),
    purpose: z.string().max(40).optional(),
  })
  .strict();
const policy = z.enum(['replace', 'skip']);
const mailboxParams = z.object({ mailbox_id: z.string().min(1).max(100) });
const fileParams = mailboxParams.extend({ file_id: z.string().min(1).max(100) });
const readQuery = z.object({ account_id: accountIdField, reason: reasonField });
export const expectedVersion = z.string().max(100).nullable().optional().describe('A different current mailbox version gives MAILBOX_VERSION_CONFLICT and nothing is saved');

/** Presents a write result: file, version and what happened. */
export async function presentWrite(ctx: RequestCtx, r: WriteResult) {
  const [file] = await presentFiles(ctx.db, [r.file]);
  const [version] = await presentVersions(ctx.db, [r.version]);
  return { file, version, created: r.created, skipped: r.skipped, duplicate: r.duplicate, ...(r.skipCode ? { code: r.skipCode } : {}) };
}

/** The direct-upload answer on both surfaces. */
export async function directUploadResponse(ctx: RequestCtx, result: Awaited<ReturnType<typeof createDirectUpload>>) {
  if (result.kind === 'skipped') {
    const [file] = await presentFiles(ctx.db, [result.file]);
    const [version] = await presentVersions(ctx.db, [result.version]);
    return { status: 200, data: { skipped: true, duplicate: result.duplicate, file, version, reason: result.reason, details: { code: result.code, path: result.file.path } } };
  }
  const r = result.row;
  return {
    status: 201,
    data: { signed_id: result.signedId, filename: r.filename, byte_size: Number(r.byte_size), checksum: r.checksum, content_type: r.content_type, expires_at: r.expires_at, direct_upload: result.target, skipped: false, duplicate: false },
  };
}

export function registerFileRoutesR(app: App) {
  app.post(
    '/direct_uploads',
    {
      schema: {
        operationId: 'createDirectUpload',
        response: responsesR({ 201: okR(DirectUpload), 200: okR(DirectUploadSkipped) }, DIRECT_UPLOAD_CODES, { write: true, describe: DIRECT_UPLOAD_DESCRIBE }),
        tags,
        summary: 'Step 1: declare a file and get a signed upload URL (or a skip for identical content)',
        body: writeBody({ mailbox_id: z.string().min(1).max(100), path: z.string().max(2048), existing_file_policy: policy.optional(), blob: blobDeclaration }),
      },
    },
    async (req, reply) => {
      reasonOf(req);
      const b = req.body;
      const result = await createDirectUpload(req.ctx, { accountId: selector(req), mailboxId: b.mailbox_id, path: b.path, existingFilePolicy: b.existing_file_policy, blob: b.blob });
      const out = await directUploadResponse(req.ctx, result);
      return reply.code(out.status).send({ success: true, data: out.data });
    },
  );

  app.post(
    '/mailboxes/:mailbox_id/files',
    {
      schema: {
        operationId: 'saveFile',
        response: responsesR({ 201: okR(FileWrite), 200: okR(FileWrite) }, WRITE_FILE_CODES, { write: true, describe: SAVE_DESCRIBE }),
        tags,
        summary: 'Step 3: save an uploaded blob at a path (an existing path gets a new version)',
        params: mailboxParams,
        body: writeBody({
          path: z.string().max(2048),
          signed_blob_id: z.string().min(1).max(300),
          name: z.string().max(255).nullable().optional(),
          role: z.enum(FILE_ROLES as [string, ...string[]]).optional(),
          existing_file_policy: policy.optional(),
          expected_mailbox_version: expectedVersion,
        }),
      },
    },
    async (req, reply) => {
      const b = req.body;
      const r = await saveFile(req.ctx, {
        accountId: selector(req),
        mailboxId: req.params.mailbox_id,
        path: b.path,
        signedBlobId: b.signed_blob_id,
        name: b.name,
        role: b.role as any,
        existingFilePolicy: b.existing_file_policy,
        expectedMailboxVersion: b.expected_mailbox_version,
        reason: reasonOf(req),
      });
      return reply.code(r.created ? 201 : 200).send({ success: true, data: await presentWrite(req.ctx, r) });
    },
  );

  app.get(
    '/mailboxes/:mailbox_id/files',
    { schema: { operationId: 'listFiles', response: responsesR({ 200: okR(FileList) }, ['MAILBOX_NOT_FOUND']), tags, summary: 'List files (includes _email/; never marks read); cursor or offset paging', params: mailboxParams, querystring: z.object({ q: z.string().max(1000).optional().describe('Path text (default), or search syntax with q_in=content|all'), q_in: z.enum(['path', 'content', 'all']).optional().describe('path (default): q is text in the path; content: search the extracted text; all: either'), folder: z.string().max(1024).optional(), ...pageQuery, ...offsetQuery, account_id: accountIdField, reason: reasonField }) } },
    async (req) => {
      reasonOf(req);
      const page = await listFiles(req.ctx, { accountId: req.query.account_id, mailboxId: req.params.mailbox_id, q: req.query.q, qIn: req.query.q_in, folder: req.query.folder, limit: req.query.limit, cursor: req.query.cursor, offset: req.query.offset });
      return { success: true, data: { files: await presentFiles(req.ctx.db, page.items), pagination: page.pagination } };
    },
  );

  app.get(
    '/mailboxes/:mailbox_id/files/by_path',
    {
      schema: {
        operationId: 'getFileByPath',
        response: responsesR({ 200: okR(FileOne) }, READ_FILE_CODES),
        tags,
        summary: 'File metadata by path',
        params: mailboxParams,
        querystring: z.object({ path: z.string().max(2048), account_id: accountIdField, reason: reasonField, disposition: z.string().optional(), content_url: z.string().optional() }),
      },
    },
    async (req) => {
      reasonOf(req);
      for (const field of ['disposition', 'content_url'] as const) {
        if (req.query[field] !== undefined) throw invalidArgument(field, 'is not accepted here: by_path returns metadata; use the download operation for content');
      }
      const { mailbox } = await loadMailbox(req.ctx, req.query.account_id, req.params.mailbox_id, 'read');
      const p = cleanPath(req.query.path, 'path', { allowEmail: true });
      const file = await findFileByPath(req.ctx.db, mailbox.id, p.path);
      if (!file) throw new AppError('MAILBOX_FILE_NOT_FOUND', `No file at ${p.path}.`, { path: p.path });
      await assertEmailFileReadable(req.ctx, mailbox.id, file.path);
      return { success: true, data: { file: await presentOneFile(req.ctx.db, file) } };
    },
  );

  app.post(
    '/mailboxes/:mailbox_id/files/append_text',
    {
      schema: {
        operationId: 'appendText',
        response: responsesR({ 200: okR(AppendResult) }, WRITE_FILE_CODES, { write: true }),
        tags,
        summary: 'Append UTF-8 text to an existing file (a new version)',
        params: mailboxParams,
        body: writeBody({ path: z.string().max(2048), content: z.string(), newline_before: z.boolean().optional(), expected_mailbox_version: expectedVersion }),
      },
    },
    async (req) => {
      const b = req.body;
      const r = await appendText(req.ctx, { accountId: selector(req), mailboxId: req.params.mailbox_id, path: b.path, content: b.content, newlineBefore: b.newline_before, expectedMailboxVersion: b.expected_mailbox_version, reason: reasonOf(req) });
      const { file, version } = await presentWrite(req.ctx, r);
      return { success: true, data: { file, version, path: r.path, appended: true, appended_bytes: r.appended_bytes, newline_inserted: r.newline_inserted } };
    },
  );

  app.get('/mailboxes/:mailbox_id/files/:file_id', { schema: { operationId: 'getFile', response: responsesR({ 200: okR(FileOne) }, READ_FILE_CODES), tags, summary: 'Read file metadata (does not mark read)', params: fileParams, querystring: readQuery } }, async (req) => {
    reasonOf(req);
    const { file } = await loadFile(req.ctx, req.query.account_id, req.params.mailbox_id, req.params.file_id);
    return { success: true, data: { file: await presentOneFile(req.ctx.db, file) } };
  });

  app.patch(
    '/mailboxes/:mailbox_id/files/:file_id',
    { schema: { operationId: 'setFileRead', response: responsesR({ 200: okR(FileOne) }, READ_FILE_CODES, { write: true }), tags, summary: 'Set the shared read status', params: fileParams, querystring: readQuery, body: writeBody({ read: z.boolean() }) } },
    async (req) => {
      reasonOf(req);
      const file = await setFileRead(req.ctx, { accountId: selector(req), mailboxId: req.params.mailbox_id, fileId: req.params.file_id, read: req.body.read });
      return { success: true, data: { file: await presentOneFile(req.ctx.db, file) } };
    },
  );

  app.delete(
    '/mailboxes/:mailbox_id/files/:file_id',
    {
      schema: {
        operationId: 'deleteFile',
        response: responsesR({ 200: okR(FileDeleted) }, WRITE_FILE_CODES, { write: true }),
        tags,
        summary: 'Delete a file (mailbox-admin); recorded as a version',
        params: fileParams,
        querystring: readQuery.extend({ expected_mailbox_version: z.string().max(100).optional() }),
        body: writeBody({ expected_mailbox_version: expectedVersion }).nullish(),
      },
    },
    async (req) => {
      const r = await deleteFile(req.ctx, {
        accountId: selector(req),
        mailboxId: req.params.mailbox_id,
        fileId: req.params.file_id,
        expectedMailboxVersion: req.body?.expected_mailbox_version ?? req.query.expected_mailbox_version,
        reason: reasonOf(req),
      });
      const [version] = await presentVersions(req.ctx.db, [r.version]);
      return { success: true, data: { deleted: true, id: r.id, version, mailbox_version_id: r.mailbox_version_id } };
    },
  );

  app.get('/mailboxes/:mailbox_id/files/:file_id/download', { schema: { operationId: 'getFileDownload', response: responsesR({ 200: okR(z.object({ download: DownloadLink })) }, READ_FILE_CODES), tags, summary: 'A signed, expiring download link for the current version', params: fileParams, querystring: readQuery } }, async (req) => {
    reasonOf(req);
    const { file } = await loadFile(req.ctx, req.query.account_id, req.params.mailbox_id, req.params.file_id);
    const v = await req.ctx.db.selectFrom('file_versions').selectAll().where('id', '=', file.current_version_id!).executeTakeFirstOrThrow();
    return { success: true, data: { download: await downloadLink(req.ctx, { sha256: v.sha256!, filename: v.name, contentType: v.mime_type, byteSize: Number(v.byte_size) }) } };
  });

  for (const kind of ['rename', 'move', 'copy'] as const) {
    const field = kind === 'rename' ? 'name' : 'path';
    app.post(
      `/mailboxes/:mailbox_id/files/:file_id/${kind}`,
      {
        schema: {
          tags,
          operationId: `${kind}File`,
          summary: kind === 'rename' ? 'Rename within its folder (body: name)' : kind === 'move' ? 'Move to another path (body: path)' : 'Copy to a new path (body: path)',
          response: responsesR(kind === 'copy' ? { 201: okR(FileWrite) } : { 200: okR(FileWrite) }, WRITE_FILE_CODES, { write: true }),
          params: fileParams,
          body: writeBody({ [field]: z.string().min(1).max(2048), expected_mailbox_version: expectedVersion }),
        },
      },
      async (req, reply) => {
        const b = req.body as Record<string, any>;
        const r = await relocateFile(req.ctx, kind, { accountId: selector(req), mailboxId: req.params.mailbox_id, fileId: req.params.file_id, target: b[field], expectedMailboxVersion: b.expected_mailbox_version, reason: reasonOf(req) });
        return reply.code(kind === 'copy' ? 201 : 200).send({ success: true, data: await presentWrite(req.ctx, r) });
      },
    );
  }

  app.get(
    '/mailboxes/:mailbox_id/files/:file_id/versions',
    { schema: { operationId: 'listFileVersions', response: responsesR({ 200: okR(VersionList) }, READ_FILE_CODES), tags, summary: 'Versions of a file, newest first', params: fileParams, querystring: z.object({ ...pageQuery, account_id: accountIdField, reason: reasonField }) } },
    async (req) => {
      reasonOf(req);
      const { file } = await loadFile(req.ctx, req.query.account_id, req.params.mailbox_id, req.params.file_id);
      const page = await listVersions(req.ctx, { fileId: file.id, mailboxId: file.mailbox_id, limit: req.query.limit, cursor: req.query.cursor });
      return { success: true, data: { versions: await presentVersions(req.ctx.db, page.items), pagination: page.pagination } };
    },
  );

  app.post(
    '/mailboxes/:mailbox_id/files/:file_id/versions/:version_id/restore',
    { schema: { operationId: 'restoreFileVersion', response: responsesR({ 200: okR(FileWrite) }, [...WRITE_FILE_CODES, 'FILE_VERSION_NOT_FOUND'], { write: true }), tags, summary: 'Restore an earlier version as a new version', params: fileParams.extend({ version_id: z.string().min(1).max(100) }), body: writeBody({ expected_mailbox_version: expectedVersion }).nullish() } },
    async (req) => {
      const r = await restoreVersion(req.ctx, { accountId: selector(req), mailboxId: req.params.mailbox_id, fileId: req.params.file_id, versionId: req.params.version_id, expectedMailboxVersion: req.body?.expected_mailbox_version, reason: reasonOf(req) });
      return { success: true, data: await presentWrite(req.ctx, r) };
    },
  );
}

