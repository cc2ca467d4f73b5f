import { z } from 'zod';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { writeBody } from '../http/schemas.ts';
import { reasonOf, selector } from '../mailboxes/mailboxes.routes.ts';
import { createUploadSession, MAX_FILES_PER_CALL, MAX_SESSION_FILES, requestUploads } from './upload-sessions.service.ts';
import { finalizeBatch, finalizeSession, MAX_BATCH } from './upload-sessions.finalize.ts';
import { sessionResponse, type SessionResult } from './upload-sessions.present.ts';
import { okA, okR, responsesA, responsesR, type Success } from '../http/contract.ts';
import type { ErrorCode } from '../errors.ts';
import { UploadSessionResultA, UploadSessionResultR } from './upload-sessions.responses.ts';
import { WRITE_FILE_CODES } from '../files/files.routes.ts';

const SESSION_CODES: ErrorCode[] = [...WRITE_FILE_CODES, 'UPLOAD_SESSION_NOT_FOUND', 'UPLOAD_SESSION_CLOSED'];

// Batch uploads on both surfaces: the same service functions; surface R answers
// {success, data}, surface A {data} with the session also under `upload_session` and
// `bucket_upload_session` (the name bucket-era clients read; docs/compat.md).

type App = FastifyInstance<any, any, any, any, ZodTypeProvider>;
type Surface = 'R' | 'A';
const tags = ['uploads'];

const createFields = {
  delete_missing: z.boolean().optional().describe('On finalize, delete live files the session did not name (never _email/); needs mailbox-admin'),
  expected_file_count: z.number().int().min(0).max(MAX_SESSION_FILES).nullable().optional().describe('How many files the client means to upload (progress only)'),
  client_session_key: z.string().min(1).max(200).nullable().optional().describe('Idempotency: the same key on the same mailbox returns its pending session'),
  expected_mailbox_version: z.string().max(100).nullable().optional().describe('A different current mailbox version gives MAILBOX_VERSION_CONFLICT'),
};
const fileDescriptor = z
  .object({
    path: z.string().max(2048),
    name: z.string().max(255).nullable().optional().describe('Display name; default the last path segment'),
    filename: z.string().max(255).nullable().optional().describe('Alias of name'),
    byte_size: z.number().int().min(0),
    content_type: z.string().min(3).max(255),
    checksum: z.string().max(64).describe('base64 MD5 of the bytes'),
    sha256: z.string().max(64).describe('hex SHA-256 of the bytes'),
  })
  .strict();
const uploadsBody = writeBody({ files: z.array(fileDescriptor).min(1).max(MAX_FILES_PER_CALL) });
const batchBody = writeBody({ limit: z.number().int().min(1).max(MAX_BATCH).optional().describe('Files to save (default 12)') }).nullish();
const finalizeBody = writeBody({ complete: z.boolean().optional().describe('true (default): save and finish; false: cancel') }).nullish();

const rParams = z.object({ mailbox_id: z.string().min(1).max(100) });
const rSession = rParams.extend({ session_id: z.string().min(1).max(100).describe('bus_… id') });
const aParams = z.object({ id: z.string().min(1).max(100).describe('bkt_… id') });
const aSession = aParams.extend({ session: z.string().min(1).max(100).describe('bus_… id') });

async function send(req: FastifyRequest, reply: FastifyReply, surface: Surface, status: number, result: SessionResult) {
  const body = await sessionResponse(req.ctx, result);
  if (result.finalizePending) {
    status = 202;
    reply.header('retry-after', '1');
  }
  if (surface === 'R') return reply.code(status).send({ success: true, data: body });
  const { mailbox_upload_session, ...rest } = body;
  const bucket_upload_session = { ...mailbox_upload_session, bucket_id: mailbox_upload_session.mailbox_id };
  return reply.code(status).send({ data: { id: mailbox_upload_session.id, bucket_upload_session, upload_session: mailbox_upload_session, mailbox_upload_session, ...rest } });
}

function register(app: App, surface: Surface) {
  const base = surface === 'R' ? '/mailboxes/:mailbox_id/upload_sessions' : '/buckets/:id/upload_sessions';
  const one = surface === 'R' ? `${base}/:session_id` : `${base}/:session`;
  const params = surface === 'R' ? rParams : aParams;
  const sessionParams = surface === 'R' ? rSession : aSession;
  const ok = (statuses: number[], describe: Record<number, string> = {}) => {
    const body = surface === 'R' ? okR(UploadSessionResultR) : okA(UploadSessionResultA);
    const success: Record<number, Success> = Object.fromEntries(statuses.map((st) => [st, body]));
    return (surface === 'R' ? responsesR : responsesA)(success, SESSION_CODES, { write: true, describe });
  };
  const op = (name: string) => (surface === 'R' ? name : name.replace('UploadSession', 'BucketUploadSession'));
  const ids = (p: any) => ({ mailboxId: (surface === 'R' ? p.mailbox_id : p.id) as string, sessionId: (surface === 'R' ? p.session_id : p.session) as string });

  app.post(
    base,
    { schema: { tags, operationId: op('createUploadSession'), response: ok([201, 200], { 201: 'Session started', 200: 'The pending session with this client_session_key' }), summary: 'Start a batch upload; locks the mailbox for other writes (201; 200 for a pending session with the same client_session_key)', params, body: writeBody(createFields).nullish() } },
    async (req, reply) => {
      const b = req.body ?? {};
      const r = await createUploadSession(req.ctx, {
        accountId: selector(req),
        mailboxId: ids(req.params).mailboxId,
        deleteMissing: b.delete_missing,
        expectedFileCount: b.expected_file_count,
        clientSessionKey: b.client_session_key,
        expectedMailboxVersion: b.expected_mailbox_version,
        reason: reasonOf(req),
      });
      return send(req, reply, surface, r.replayed ? 200 : 201, r);
    },
  );

  app.post(
    `${one}/uploads`,
    { schema: { tags, operationId: op('requestUploadSessionUploads'), response: ok([201]), summary: 'Declare up to 100 files: an upload URL and headers for each, or a skip for identical content', params: sessionParams, body: uploadsBody } },
    async (req, reply) => {
      reasonOf(req);
      const files = req.body.files.map((f) => ({ ...f, name: f.name ?? f.filename }));
      const r = await requestUploads(req.ctx, { accountId: selector(req), ...ids(req.params), files });
      return send(req, reply, surface, 201, r);
    },
  );

  app.post(
    `${one}/finalize_batch`,
    { schema: { tags, operationId: op('finalizeUploadSessionBatch'), response: ok([200, 202], { 202: 'Saved a batch; more work remains (Retry-After)' }), summary: 'Save a bounded batch of uploaded files (default 12); never deletes. Missing bytes: DIRECT_UPLOAD_NOT_FOUND with details.path', params: sessionParams, body: batchBody } },
    async (req, reply) => {
      const r = await finalizeBatch(req.ctx, { accountId: selector(req), ...ids(req.params), limit: req.body?.limit, reason: reasonOf(req) });
      return send(req, reply, surface, 200, r);
    },
  );

  app.post(
    `${one}/finalize`,
    { schema: { tags, operationId: op('finalizeUploadSession'), response: ok([200, 202], { 200: 'Finished or cancelled', 202: 'finalize_pending: call again after Retry-After' }), summary: 'Finish (complete=true: one mailbox version; 202 finalize_pending with Retry-After while work remains) or cancel (complete=false)', params: sessionParams, body: finalizeBody } },
    async (req, reply) => {
      const r = await finalizeSession(req.ctx, { accountId: selector(req), ...ids(req.params), complete: req.body?.complete, reason: reasonOf(req) });
      return send(req, reply, surface, 200, r);
    },
  );
}

export function registerUploadSessionRoutesR(app: App) {
  register(app, 'R');
}

export function registerUploadSessionRoutesA(app: App) {
  register(app, 'A');
}
