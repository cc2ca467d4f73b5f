import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { AppDeps } from '../context.ts';
import { AppError } from '../errors.ts';
import { resolveSignedBlob, storeUploadedBytes } from '../files/direct-uploads.service.ts';
import { mimeFromName } from '../files/paths.ts';
import { createUploadSession, requestUploads } from '../uploads/upload-sessions.service.ts';
import { finalizeSession } from '../uploads/upload-sessions.finalize.ts';
import { loadSession } from '../uploads/upload-sessions.lifecycle.ts';
import { sessionCounts, sessionFileStates } from '../uploads/upload-sessions.repo.ts';
import { presentSession } from '../uploads/upload-sessions.present.ts';
import { openMailbox, type OpenedMailbox } from './person-ctx.ts';
import { attempt, refusalText } from './ui.ts';

// Uploads from the files page go through an upload session, the API's batch upload: one batch
// (files or whole folders, picked or dropped) is one session and becomes one mailbox version.
// app.js starts the session (a client key kept in localStorage makes the same call return it
// again after a reload), sends each file's bytes here, where the server hashes them, declares
// the file with requestUploads and stores the bytes like the API's upload URL does, then
// finalizes. After a reload the script asks which files the session already has and sends only
// the others. Every route needs the page's CSRF token (x-csrf-token) and the session's services
// decide permissions: a read-only member or account gets the services' refusal.

const ROUTE = { schema: { hide: true }, config: { auth: false } } as const;
export const MAX_WEB_UPLOAD_BYTES = 100 * 1024 * 1024;

type Params = { id: string; sid: string };

/** A refusal as JSON for the script: the words a person reads, the catalogue code, the details. */
function refuse(reply: FastifyReply, err: AppError) {
  return reply.code(err.status).send({ error: refusalText(err), code: err.code, details: err.details });
}

async function opened(deps: AppDeps, req: FastifyRequest<{ Params: { id: string } }>, reply: FastifyReply): Promise<OpenedMailbox | null> {
  const session = req.webSession;
  if (!session) {
    await reply.code(401).send({ error: 'Sign in again.', code: 'UNAUTHENTICATED' });
    return null;
  }
  const o = await openMailbox(deps, req, session, req.params.id);
  if (!o) await reply.code(404).send({ error: 'Mailbox not found.', code: 'MAILBOX_NOT_FOUND' });
  return o;
}

const ids = (o: OpenedMailbox) => ({ accountId: o.loaded.access.account.id, mailboxId: o.loaded.mailbox.id });

export function registerUploadPages(parent: FastifyInstance, deps: AppDeps): void {
  // A scope of their own: the raw-bytes parser (up to 100 MB) applies to these routes only, and a
  // request without a signed-in session is refused before its body is read.
  parent.register(async (web) => registerUploadRoutes(web, deps));
}

function registerUploadRoutes(web: FastifyInstance, deps: AppDeps): void {
  web.addHook('onRequest', async (req, reply) => {
    if (!req.webSession) return reply.code(401).send({ error: 'Sign in again.', code: 'UNAUTHENTICATED' });
  });
  web.addContentTypeParser('application/octet-stream', { parseAs: 'buffer', bodyLimit: MAX_WEB_UPLOAD_BYTES }, (_req, body, done) => done(null, body));

  // Starts the batch, or returns the pending session started with the same client key.
  web.post('/mailboxes/:id/files/sessions', ROUTE, async (req: FastifyRequest<{ Params: { id: string }; Body: { key?: unknown; expected_file_count?: unknown } | null }>, reply) => {
    const o = await opened(deps, req, reply);
    if (!o) return reply;
    const b = req.body ?? {};
    const r = await attempt(() =>
      createUploadSession(o.ctx, {
        ...ids(o),
        clientSessionKey: typeof b.key === 'string' ? b.key : null,
        expectedFileCount: typeof b.expected_file_count === 'number' ? b.expected_file_count : null,
      }),
    );
    if (!r.ok) return refuse(reply, r.error);
    const counts = await sessionCounts(deps.db, r.value.session.id);
    return reply.code(r.value.replayed ? 200 : 201).send({ session: presentSession(r.value.session, counts, deps.config.uploadSessionIdleSeconds), replayed: r.value.replayed });
  });

  // What a session holds, for a script resuming it after a reload.
  web.get('/mailboxes/:id/files/sessions/:sid', ROUTE, async (req: FastifyRequest<{ Params: Params }>, reply) => {
    const o = await opened(deps, req, reply);
    if (!o) return reply;
    const r = await attempt(() => loadSession(o.ctx, o.loaded.mailbox.id, req.params.sid));
    if (!r.ok) return refuse(reply, r.error);
    const [counts, files] = await Promise.all([sessionCounts(deps.db, r.value.id), sessionFileStates(deps.db, r.value.id)]);
    return reply.header('cache-control', 'no-store').send({ session: presentSession(r.value, counts, deps.config.uploadSessionIdleSeconds), files });
  });

  // One file's bytes: hashed here, declared in the session, stored like the API's upload URL stores them.
  web.post('/mailboxes/:id/files/sessions/:sid/files', ROUTE, async (req: FastifyRequest<{ Params: Params; Querystring: { path?: string } }>, reply) => {
    const o = await opened(deps, req, reply);
    if (!o) return reply;
    const bytes = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
    const path = typeof req.query.path === 'string' ? req.query.path : '';
    const r = await attempt(async () => {
      const sha256 = createHash('sha256').update(bytes).digest('hex');
      const checksum = createHash('md5').update(bytes).digest('base64');
      const declared = await requestUploads(o.ctx, {
        ...ids(o),
        sessionId: req.params.sid,
        files: [{ path, byte_size: bytes.length, checksum, sha256, content_type: mimeFromName(path.split('/').pop() ?? '') }],
      });
      const target = declared.uploads?.[0];
      if (!target) return { path, sha256, state: 'skipped' as const, reason: declared.skipped?.[0]?.details.message ?? 'Identical content is already stored at this path.' };
      const row = await resolveSignedBlob(deps.db, deps.secret, o.loaded.mailbox.id, target.signed_blob_id);
      await storeUploadedBytes(deps, row, Readable.from([bytes]));
      return { path: target.path, sha256, state: 'received' as const };
    });
    if (!r.ok) return refuse(reply, r.error);
    return reply.send(r.value);
  });

  // Saves the batch as one mailbox version; a large batch answers finalize_pending, call again.
  web.post('/mailboxes/:id/files/sessions/:sid/finalize', ROUTE, async (req: FastifyRequest<{ Params: Params }>, reply) => {
    const o = await opened(deps, req, reply);
    if (!o) return reply;
    const r = await attempt(() => finalizeSession(o.ctx, { ...ids(o), sessionId: req.params.sid }));
    if (!r.ok) return refuse(reply, r.error);
    const counts = await sessionCounts(deps.db, r.value.session.id);
    return reply.send({ session: presentSession(r.value.session, counts, deps.config.uploadSessionIdleSeconds), finalize_pending: Boolean(r.value.finalizePending), message: r.value.message });
  });

  // Cancels the batch: nothing of it is saved and the mailbox lock is released.
  web.post('/mailboxes/:id/files/sessions/:sid/cancel', ROUTE, async (req: FastifyRequest<{ Params: Params }>, reply) => {
    const o = await opened(deps, req, reply);
    if (!o) return reply;
    const r = await attempt(() => finalizeSession(o.ctx, { ...ids(o), sessionId: req.params.sid, complete: false }));
    if (!r.ok) return refuse(reply, r.error);
    return reply.send({ status: r.value.session.status, message: r.value.message });
  });
}
