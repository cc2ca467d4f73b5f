import type { AppDeps, RequestCtx } from '../context.ts';
import { AppError } from '../errors.ts';
import { iso } from '../time.ts';
import { assertMutable } from '../auth/access.ts';
import { recordActivity } from '../activity/activity.service.ts';
import { loadMailbox, type LoadedMailbox } from '../mailboxes/mailboxes.service.ts';
import { resolveTarget, SafeFetchError } from '../net/safe-fetch.ts';
import { systemHostResolver } from '../net/resolve.ts';
import { GitSyncError } from './errors.ts';
import { checkBranch, checkSubdirectory, normalRepositoryUrl, parseRepositoryUrl } from './settings.ts';
import { generateWebhookSecret, seal, unseal, verifyPushSignature } from './secrets.ts';
import { queueSync } from './sync.ts';
import { presentGitSync, presentGitSyncSetup } from './gitsync.present.ts';
import type { GitSyncsTable } from './gitsync.schema.ts';

// Connecting a bucket to a repository, reading the connection, asking for a sync, and the push
// webhook. The sync itself runs as a job (sync.ts).

export interface ConnectBody {
  repository_url: string;
  branch?: string | null;
  subdirectory?: string | null;
  /** Omitted: keep the stored token; null: forget it (public repository). */
  token?: string | null;
  auto_publish?: boolean | null;
  rotate_webhook_secret?: boolean | null;
}

function findConnection(deps: AppDeps, bucketId: string): Promise<GitSyncsTable | undefined> {
  return deps.db.selectFrom('git_syncs').selectAll().where('mailbox_id', '=', bucketId).executeTakeFirst();
}

function setupOf(ctx: RequestCtx, loaded: LoadedMailbox) {
  return presentGitSyncSetup(ctx, loaded.mailbox.id, loaded.mailbox.archived_at !== null, loaded.access.account);
}

/** Refuses changes the bucket's setup does not allow (feature off, archived, account state). */
function assertEligible(ctx: RequestCtx, loaded: LoadedMailbox): void {
  if (!ctx.config.gitSync.enabled) throw new AppError('GIT_SYNC_DISABLED', undefined, { feature: 'github_sync' });
  assertMutable(loaded.access);
  if (loaded.mailbox.archived_at) throw new AppError('MAILBOX_ARCHIVED', undefined, { mailbox_id: loaded.mailbox.id });
}

/** Connects (or reconfigures) the bucket and queues a first sync. The webhook secret is returned only when issued. */
export async function connectGitSync(ctx: RequestCtx, bucketId: string, selector: string | undefined, body: ConnectBody, reason: string | null) {
  const loaded = await loadMailbox(ctx, selector, bucketId, 'admin');
  assertEligible(ctx, loaded);
  const url = parseRepositoryUrl(body.repository_url);
  const branch = checkBranch(body.branch ?? 'main');
  const subdirectory = checkSubdirectory(body.subdirectory);
  if (body.token !== undefined && body.token !== null && (body.token.length === 0 || body.token.length > 1000 || /\s/.test(body.token))) {
    throw new AppError('INVALID_ARGUMENT', 'token: must be 1 to 1000 characters without spaces (or null for a public repository)', { field: 'token' });
  }
  // The SSRF rule of webhooks: the host must resolve to public addresses only (checked again at every sync).
  try {
    await resolveTarget(url, { resolver: ctx.events?.webhooks.resolver ?? systemHostResolver, allowPrivate: ctx.config.gitSync.allowPrivate });
  } catch (err) {
    const e = err as SafeFetchError;
    throw new GitSyncError('INVALID_GIT_REPOSITORY_URL', `repository_url: ${e.message}.`, { field: 'repository_url' });
  }
  const now = iso(ctx.now());
  const existing = await findConnection(ctx, bucketId);
  const issueSecret = !existing || body.rotate_webhook_secret === true;
  const webhookSecret = issueSecret ? generateWebhookSecret() : null;
  const repositoryUrl = normalRepositoryUrl(url);
  // A kept token only goes back to the origin it was given for: pointing the connection at another
  // host without a new token drops it, so nobody can collect the stored token on a server of theirs.
  const movedOrigin = existing !== undefined && new URL(existing.repository_url).origin !== new URL(repositoryUrl).origin;
  const tokenChange = body.token !== undefined ? body.token : movedOrigin ? null : undefined;
  const values = {
    repository_url: repositoryUrl,
    branch,
    subdirectory,
    ...(tokenChange !== undefined ? { token_ciphertext: tokenChange === null ? null : seal(ctx.secret, bucketId, 'token', tokenChange) } : {}),
    ...(webhookSecret ? { webhook_secret_ciphertext: seal(ctx.secret, bucketId, 'webhook', webhookSecret) } : {}),
    auto_publish: body.auto_publish === undefined || body.auto_publish === null ? (existing?.auto_publish ?? 0) : body.auto_publish ? 1 : 0,
    sync_state: 'queued' as const,
    error_code: null,
    error_message: null,
    updated_at: now,
  };
  await ctx.db.transaction().execute(async (trx) => {
    if (existing) await trx.updateTable('git_syncs').set(values).where('mailbox_id', '=', bucketId).execute();
    else {
      await trx
        .insertInto('git_syncs')
        .values({
          ...values,
          mailbox_id: bucketId,
          account_id: loaded.mailbox.account_id,
          token_ciphertext: values.token_ciphertext ?? null,
          webhook_secret_ciphertext: values.webhook_secret_ciphertext!,
          last_commit: null,
          last_synced_at: null,
          last_checked_at: null,
          last_trigger: null,
          last_version_id: null,
          manifest: '{}',
          skipped: '[]',
          created_by_user_id: ctx.actor.userId,
          created_at: now,
        })
        .execute();
    }
    await queueSync(ctx, trx, bucketId, 'connect');
    await recordActivity(trx, ctx.actor, ctx.now(), { accountId: loaded.mailbox.account_id, action: existing ? 'git_sync.update' : 'git_sync.connect', targetType: 'mailbox', targetId: bucketId, reason });
  });
  const row = (await findConnection(ctx, bucketId))!;
  return { github_sync: presentGitSync(ctx, row), github_sync_setup: setupOf(ctx, loaded), ...(webhookSecret ? { webhook_secret: webhookSecret } : {}), created: !existing };
}

export async function readGitSync(ctx: RequestCtx, bucketId: string, selector: string | undefined) {
  const loaded = await loadMailbox(ctx, selector, bucketId, 'read');
  const row = await findConnection(ctx, bucketId);
  return { github_sync: row ? presentGitSync(ctx, row) : null, github_sync_setup: setupOf(ctx, loaded) };
}

/** Disconnects: the files stay, later pushes are refused. */
export async function disconnectGitSync(ctx: RequestCtx, bucketId: string, selector: string | undefined, reason: string | null) {
  const loaded = await loadMailbox(ctx, selector, bucketId, 'admin');
  assertMutable(loaded.access);
  await ctx.db.transaction().execute(async (trx) => {
    const res = await trx.deleteFrom('git_syncs').where('mailbox_id', '=', bucketId).executeTakeFirst();
    if (Number(res.numDeletedRows) === 0) throw new AppError('GIT_SYNC_NOT_CONNECTED', undefined, { bucket_id: bucketId });
    await recordActivity(trx, ctx.actor, ctx.now(), { accountId: loaded.mailbox.account_id, action: 'git_sync.disconnect', targetType: 'mailbox', targetId: bucketId, reason });
  });
  return { deleted: true as const, id: bucketId };
}

/** POST …/github_sync/sync: queues a sync now (a full one, even when the branch has not moved). */
export async function requestGitSync(ctx: RequestCtx, bucketId: string, selector: string | undefined, reason: string | null) {
  const loaded = await loadMailbox(ctx, selector, bucketId, 'write');
  const row = await findConnection(ctx, bucketId);
  if (!row) throw new AppError('GIT_SYNC_NOT_CONNECTED', undefined, { bucket_id: bucketId });
  assertEligible(ctx, loaded);
  await ctx.db.transaction().execute(async (trx) => {
    await trx.updateTable('git_syncs').set({ sync_state: 'queued', updated_at: iso(ctx.now()) }).where('mailbox_id', '=', bucketId).execute();
    await queueSync(ctx, trx, bucketId, 'manual');
    await recordActivity(trx, ctx.actor, ctx.now(), { accountId: loaded.mailbox.account_id, action: 'git_sync.sync', targetType: 'mailbox', targetId: bucketId, reason });
  });
  return { github_sync: presentGitSync(ctx, (await findConnection(ctx, bucketId))!), github_sync_setup: setupOf(ctx, loaded) };
}

/**
 * POST /hooks/git/{bucket_id}: a push from the git host. The signature (made with the
 * connection's webhook secret) is the only credential; a bad one changes nothing. Pings and pushes
 * to other branches are acknowledged without a sync.
 */
export async function receivePush(deps: AppDeps, bucketId: string, body: Buffer, headers: Record<string, string | string[] | undefined>) {
  const row = /^bkt_[A-Za-z0-9]{1,64}$/.test(bucketId) ? await findConnection(deps, bucketId) : undefined;
  if (!row) throw new AppError('GIT_SYNC_NOT_CONNECTED', undefined, { bucket_id: bucketId });
  if (!verifyPushSignature(unseal(deps.secret, bucketId, 'webhook', row.webhook_secret_ciphertext), body, headers)) {
    throw new AppError('GIT_WEBHOOK_SIGNATURE_INVALID', undefined, { headers: ['X-Hub-Signature-256', 'X-Gitea-Signature'] });
  }
  const event = String(headers['x-github-event'] ?? headers['x-gitea-event'] ?? headers['x-forgejo-event'] ?? 'push');
  if (event === 'ping') return { queued: false, reason: 'ping' };
  if (event !== 'push') return { queued: false, reason: 'ignored_event' };
  let ref: unknown;
  try {
    ref = (JSON.parse(body.toString('utf8')) as { ref?: unknown }).ref;
  } catch {
    ref = undefined;
  }
  if (typeof ref === 'string' && ref !== `refs/heads/${row.branch}`) return { queued: false, reason: 'other_branch' };
  if (!deps.config.gitSync.enabled) throw new AppError('GIT_SYNC_DISABLED', undefined, { feature: 'github_sync' });
  const mailbox = await deps.db.selectFrom('mailboxes').select(['archived_at', 'deleted_at']).where('id', '=', bucketId).executeTakeFirst();
  if (!mailbox || mailbox.deleted_at) throw new AppError('GIT_SYNC_NOT_CONNECTED', undefined, { bucket_id: bucketId });
  if (mailbox.archived_at) throw new AppError('MAILBOX_ARCHIVED', undefined, { mailbox_id: bucketId });
  await deps.db.transaction().execute(async (trx) => {
    await trx.updateTable('git_syncs').set({ sync_state: 'queued', updated_at: iso(deps.now()) }).where('mailbox_id', '=', bucketId).execute();
    await queueSync(deps, trx, bucketId, 'webhook');
  });
  return { queued: true, reason: null };
}
