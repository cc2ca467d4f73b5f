import { z } from 'zod';
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import type { AppDeps } from '../context.ts';
import type { ErrorCode } from '../errors.ts';
import { accountIdField, reasonField, writeBody } from '../http/schemas.ts';
import { Deleted, okA, responsesA } from '../http/contract.ts';
import { reasonOf, selector } from '../mailboxes/mailboxes.routes.ts';
import { connectGitSync, disconnectGitSync, readGitSync, receivePush, requestGitSync } from './gitsync.service.ts';
import { GitSyncConnected, GitSyncState, PushReceived } from './gitsync.responses.ts';

type App = FastifyInstance<any, any, any, any, ZodTypeProvider>;
const tags = ['git sync'];
const idParams = z.object({ id: z.string().min(1).max(100).describe('bkt_… id') });

const CONNECT_CODES: ErrorCode[] = ['MAILBOX_NOT_FOUND', 'MAILBOX_ARCHIVED', 'GIT_SYNC_DISABLED', 'INVALID_GIT_REPOSITORY_URL'];
const SYNC_CODES: ErrorCode[] = ['MAILBOX_NOT_FOUND', 'MAILBOX_ARCHIVED', 'GIT_SYNC_DISABLED', 'GIT_SYNC_NOT_CONNECTED'];

const connectBody = writeBody({
  repository_url: z.string().min(1).max(2048).describe('HTTPS clone URL, e.g. https://github.com/owner/repo.git (public hosts only)'),
  branch: z.string().min(1).max(255).nullish().describe('Branch to follow (default main)'),
  subdirectory: z.string().max(1024).nullish().describe('Repository folder whose contents become the bucket root (default: the whole tree)'),
  token: z.string().max(1000).nullish().describe('Access token for private repositories, stored encrypted; omit to keep the stored one, null to remove it'),
  auto_publish: z.boolean().nullish().describe("Rebuild the bucket's website after each sync that changes files (default false)"),
  rotate_webhook_secret: z.boolean().nullish().describe('Issue a new push webhook secret (returned once)'),
});
const actionBody = writeBody({}).nullish();

export function registerGitSyncRoutesA(app: App) {
  app.get(
    '/buckets/:id/github_sync',
    { schema: { operationId: 'getBucketGithubSync', response: responsesA({ 200: okA(GitSyncState) }, ['MAILBOX_NOT_FOUND']), tags, summary: "The bucket's git sync connection (null when not connected) and whether it can be connected", params: idParams, querystring: z.object({ account_id: accountIdField }) } },
    async (req) => ({ data: await readGitSync(req.ctx, req.params.id, req.query.account_id) }),
  );

  app.put(
    '/buckets/:id/github_sync',
    {
      schema: {
        operationId: 'connectBucketGithubSync',
        response: responsesA({ 201: okA(GitSyncConnected), 200: okA(GitSyncConnected) }, CONNECT_CODES, { write: true, describe: { 201: 'Connected; a first sync is queued and webhook_secret is shown once', 200: 'Settings changed; a sync is queued' } }),
        tags,
        summary: 'Connect the bucket to a git repository over HTTPS, or change the connection (admin). Queues a sync',
        params: idParams,
        body: connectBody,
      },
    },
    async (req, reply) => {
      const { created, ...data } = await connectGitSync(req.ctx, req.params.id, selector(req), req.body, reasonOf(req));
      return reply.code(created ? 201 : 200).send({ data });
    },
  );

  app.delete(
    '/buckets/:id/github_sync',
    { schema: { operationId: 'disconnectBucketGithubSync', response: responsesA({ 200: okA(Deleted) }, ['MAILBOX_NOT_FOUND', 'GIT_SYNC_NOT_CONNECTED'], { write: true }), tags, summary: 'Disconnect the repository (admin); the files stay', params: idParams, querystring: z.object({ account_id: accountIdField, reason: reasonField }), body: actionBody } },
    async (req) => ({ data: await disconnectGitSync(req.ctx, req.params.id, selector(req), reasonOf(req)) }),
  );

  app.post(
    '/buckets/:id/github_sync/sync',
    { schema: { operationId: 'syncBucketGithubSync', response: responsesA({ 202: okA(GitSyncState) }, SYNC_CODES, { write: true, describe: { 202: 'Queued; poll GET …/github_sync until sync_state is synced or failed' } }), tags, summary: 'Sync now (202): pulls the branch into the bucket as one version', params: idParams, body: actionBody } },
    async (req, reply) => reply.code(202).send({ data: await requestGitSync(req.ctx, req.params.id, selector(req), reasonOf(req)) }),
  );
}

/**
 * POST /hooks/git/{bucket_id}: the push webhook, outside the API surfaces (the git host has no API
 * key; the HMAC signature is the credential). The raw body is kept for the signature check.
 */
export async function registerGitHooks(app: FastifyInstance, deps: AppDeps): Promise<void> {
  await app.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: 5 * 1024 * 1024 }, (_req, body, done) => done(null, body));
    scope.post<{ Params: { bucket_id: string } }>(
      '/hooks/git/:bucket_id',
      { schema: { hide: true }, config: { auth: false }, bodyLimit: 5 * 1024 * 1024 },
      async (req, reply) => {
        const body = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
        const result = await receivePush(deps, req.params.bucket_id, body, req.headers);
        return reply.code(result.queued ? 202 : 200).send({ data: PushReceived.parse(result) });
      },
    );
  });
}
