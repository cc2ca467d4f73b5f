import type { Kysely } from 'kysely';
import type { DB, PlanName } from '../db/schema.ts';
import type { AppDeps, RequestCtx } from '../context.ts';
import { AppError } from '../errors.ts';
import { isUniqueViolation } from '../db/database.ts';
import { iso } from '../time.ts';
import { assertMutable, type AccountAccess } from '../auth/access.ts';
import { recordActivity } from '../activity/activity.service.ts';
import { billingGroupId } from '../accounts/accounts.service.ts';
import { isPaidPlan } from '../accounts/plans.ts';
import { loadMailbox, type LoadedMailbox } from '../mailboxes/mailboxes.service.ts';
import { siteId } from './ids.ts';
import { chooseSlug } from './slugs.ts';
import { resolveSettings, type PublishBody, type Settings } from './request.ts';
import { generatePassword, openPassword, sealPassword } from './secrets.ts';
import { countLiveSites, findPublication, isLive, publicationById } from './publications.repo.ts';
import { sitesChanged } from './changes.ts';
import { assertEmailVerified } from '../accounts/signup.service.ts';
import type { PublicationKind, PublicationsTable } from './sites.schema.ts';

// Publish and preview requests: check, settle the slug and settings, and queue a build in the same
// transaction. The build (build/run.ts) does the rest; the request answers 202 at once.

export const BUILD_TASK = 'sites.build';
export const PREVIEW_TTL_MS = 24 * 3600 * 1000;
/** Live main sites per billing group. Previews never count. */
export const LIVE_SITE_LIMITS: Record<PlanName, number> = { free: 3, paid: 25, pilot: 50, agency: 100 };

export interface BuildPayload {
  publication_id: string;
  seq: number;
}

/** Publishing must be switched on for the account (an operator setting, independent of plan). */
export function assertPublishingEnabled(access: AccountAccess): void {
  if (access.account.website_publishing_enabled !== 1) {
    throw new AppError('WEBSITE_PUBLISHING_DISABLED', undefined, { account_id: access.account.id, feature: 'website_publishing' });
  }
}

function upgradeRequired(ctx: RequestCtx, bucketId: string, accessMode: string): AppError {
  const upgradeUrl = `${ctx.publicUrl()}/settings/billing`;
  const choices = [
    { choice: 'preview', description: 'Publish a public preview for 24 hours instead.', method: 'POST', path: `/api/v1/buckets/${bucketId}/publication/preview`, body: { access_mode: 'public' } },
    { choice: 'upgrade', description: `Upgrade to a paid plan to publish with ${accessMode} access.`, url: upgradeUrl },
    { choice: 'public', description: 'Publish the main site publicly (anyone with the link can see it).', method: 'POST', path: `/api/v1/buckets/${bucketId}/publication`, body: { access_mode: 'public' } },
  ];
  const message = `access_mode ${accessMode} needs a paid plan on the main site. Choose: a public preview, an upgrade, or public access. Nothing was published.`;
  return new AppError('PUBLICATION_UPGRADE_REQUIRED', message, { field: 'access_mode', access_mode: accessMode, upgrade_url: upgradeUrl, choices }, { upgrade_url: upgradeUrl, choices });
}

function passwordFor(deps: AppDeps, s: Settings, existing: PublicationsTable | undefined): string | null {
  if (s.accessMode !== 'password') return null;
  if (s.password !== null) return sealPassword(deps.secret, s.password);
  if (s.regeneratePassword || !existing?.password_sealed) return sealPassword(deps.secret, generatePassword());
  return existing.password_sealed;
}

export async function requestPublish(ctx: RequestCtx, bucketId: string, accountSelector: string | undefined, body: PublishBody, kind: PublicationKind, reason: string | null) {
  const loaded = await loadMailbox(ctx, accountSelector, bucketId, 'write');
  assertMutable(loaded.access);
  if (loaded.mailbox.archived_at) throw new AppError('MAILBOX_ARCHIVED', undefined, { mailbox_id: bucketId });
  assertPublishingEnabled(loaded.access);
  await assertEmailVerified(ctx.db, ctx.credential.user.id);
  const existing = await findPublication(ctx.db, bucketId, kind);
  const settings = resolveSettings(body, existing, JSON.parse(loaded.mailbox.metadata), kind);
  const plan = loaded.access.account.plan;
  if (kind === 'main' && settings.accessMode !== 'public' && !isPaidPlan(plan)) throw upgradeRequired(ctx, bucketId, settings.accessMode);
  if (kind === 'main' && !(existing && (existing.status === 'published' || existing.status === 'publishing'))) {
    const max = LIVE_SITE_LIMITS[plan];
    if ((await countLiveSites(ctx.db, billingGroupId(loaded.access.account), bucketId)) >= max) {
      throw new AppError('SITE_LIMIT_REACHED', `The plan allows ${max} live websites.`, { limit: 'live_sites', max, upgrade_url: `${ctx.publicUrl()}/settings/billing` });
    }
  }
  const id = await savePublication(ctx, loaded, kind, settings, existing, reason);
  sitesChanged(ctx.db);
  return (await publicationById(ctx.db, id))!;
}

async function savePublication(ctx: RequestCtx, loaded: LoadedMailbox, kind: PublicationKind, s: Settings, existing: PublicationsTable | undefined, reason: string | null): Promise<string> {
  const m = loaded.mailbox;
  const now = ctx.now();
  for (let attempt = 0; ; attempt++) {
    const { slug, existing: ownSlug } = await chooseSlug(ctx.db, m.id, s.slugSuggestions, m.title);
    try {
      return await ctx.db.transaction().execute(async (trx) => {
        if (!ownSlug) await trx.insertInto('site_slugs').values({ slug, mailbox_id: m.id, account_id: m.account_id, created_at: iso(now) }).execute();
        const sealed = passwordFor(ctx, s, existing);
        const accessChanged = !existing || existing.access_mode !== s.accessMode || existing.password_sealed !== sealed;
        const live = existing ? isLive(existing, now) : false;
        const values = {
          public_slug: slug,
          // A live site keeps serving its current bundle while the new one builds.
          status: live ? ('published' as const) : ('publishing' as const),
          publish_state: 'queued' as const,
          site_mode: s.siteMode,
          access_mode: s.accessMode,
          root_directory: s.rootDirectory,
          password_sealed: sealed,
          request: JSON.stringify({ site_mode: s.siteMode, access_mode: s.accessMode, publication_root_directory: s.rootDirectory, requested_by_user_id: ctx.actor.userId, requested_by_api_key_id: ctx.actor.apiKeyId }),
          publish_error: null,
          publish_enqueued_at: iso(now),
          publish_started_at: null,
          publish_completed_at: null,
          // Each preview run opens a new 24-hour window.
          expires_at: kind === 'preview' ? iso(now.getTime() + PREVIEW_TTL_MS) : null,
          unpublished_at: null,
          updated_at: iso(now),
        };
        let id: string;
        let seq: number;
        if (existing) {
          id = existing.id;
          seq = Number(existing.request_seq) + 1;
          await trx
            .updateTable('publications')
            .set({ ...values, request_seq: seq, access_epoch: Number(existing.access_epoch) + (accessChanged ? 1 : 0) })
            .where('id', '=', id)
            .execute();
        } else {
          id = siteId('pub');
          seq = 1;
          await trx
            .insertInto('publications')
            .values({ id, account_id: m.account_id, mailbox_id: m.id, kind, ...values, site_domain: kind === 'main' ? m.site_domain : null, access_epoch: 1, request_seq: seq, build_job_id: null, bundle_id: null, created_by_user_id: ctx.actor.userId, created_by_api_key_id: ctx.actor.apiKeyId, created_at: iso(now) })
            .execute();
        }
        await queueBuild(ctx, trx, id, seq);
        if (kind === 'main') await trx.updateTable('mailboxes').set({ site_slug: slug }).where('id', '=', m.id).execute();
        await recordActivity(trx, ctx.actor, now, { accountId: m.account_id, action: kind === 'main' ? 'publication.publish' : 'publication.preview', targetType: 'publication', targetId: id, reason });
        return id;
      });
    } catch (err) {
      // Two buckets picked the same free slug at once: choose again.
      if (isUniqueViolation(err) && attempt < 3) {
        existing = await findPublication(ctx.db, m.id, kind);
        continue;
      }
      throw err;
    }
  }
}

/** Queues a build of request `seq` (inside the caller's transaction) and remembers the job. */
export async function queueBuild(deps: AppDeps, trx: Kysely<DB>, publicationId: string, seq: number): Promise<void> {
  const payload: BuildPayload = { publication_id: publicationId, seq };
  const jobId = await deps.jobs.enqueue(trx, BUILD_TASK, payload, { maxAttempts: 3 });
  await trx.updateTable('publications').set({ build_job_id: jobId }).where('id', '=', publicationId).execute();
}

/** Requeues a failed build with the saved request (main site first, else the preview). */
export async function retryPublish(ctx: RequestCtx, bucketId: string, accountSelector: string | undefined, reason: string | null) {
  const loaded = await loadMailbox(ctx, accountSelector, bucketId, 'write');
  assertMutable(loaded.access);
  if (loaded.mailbox.archived_at) throw new AppError('MAILBOX_ARCHIVED', undefined, { mailbox_id: bucketId });
  assertPublishingEnabled(loaded.access);
  const main = await findPublication(ctx.db, bucketId, 'main');
  const preview = await findPublication(ctx.db, bucketId, 'preview');
  const target = [main, preview].find((p) => p?.publish_state === 'failed');
  if (!target) throw new AppError('PUBLICATION_NOT_RETRYABLE', undefined, { bucket_id: bucketId, publish_state: main?.publish_state ?? preview?.publish_state ?? null });
  const now = ctx.now();
  await ctx.db.transaction().execute(async (trx) => {
    const seq = Number(target.request_seq) + 1;
    const res = await trx
      .updateTable('publications')
      .set({
        publish_state: 'queued',
        request_seq: seq,
        publish_error: null,
        publish_enqueued_at: iso(now),
        publish_started_at: null,
        publish_completed_at: null,
        ...(target.kind === 'preview' ? { expires_at: iso(now.getTime() + PREVIEW_TTL_MS) } : {}),
        updated_at: iso(now),
      })
      .where('id', '=', target.id)
      .where('publish_state', '=', 'failed')
      .executeTakeFirst();
    if (Number(res.numUpdatedRows) === 0) throw new AppError('PUBLICATION_NOT_RETRYABLE', undefined, { bucket_id: bucketId });
    await queueBuild(ctx, trx, target.id, seq);
    await recordActivity(trx, ctx.actor, now, { accountId: target.account_id, action: 'publication.retry', targetType: 'publication', targetId: target.id, reason });
  });
  sitesChanged(ctx.db);
  return (await publicationById(ctx.db, target.id))!;
}

/** The owner's password, in the clear, for the publication read. */
export function revealPassword(deps: AppDeps, p: PublicationsTable): string | null {
  return p.access_mode === 'password' && p.password_sealed ? openPassword(deps.secret, p.password_sealed) : null;
}
