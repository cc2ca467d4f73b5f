import { sql, type SqlBool } from 'kysely';
import type { RequestCtx } from '../context.ts';
import { AppError } from '../errors.ts';
import { isUniqueViolation } from '../db/database.ts';
import { iso } from '../time.ts';
import { assertMutable, mailboxPermissions, selectAccount, visibleMailboxIds } from '../auth/access.ts';
import { recordActivity } from '../activity/activity.service.ts';
import { decodeCursor, toPage } from '../http/cursor.ts';
import { loadMailbox } from '../mailboxes/mailboxes.service.ts';
import { checkExplicitSlug } from './slugs.ts';
import { findPublication, publicationById } from './publications.repo.ts';
import { assertPublishingEnabled } from './publish.service.ts';
import { sitesChanged } from './changes.ts';
import type { PublicationKind, PublicationsTable } from './sites.schema.ts';

// Unpublishing, slug renames and reads of publications.

export const UNPUBLISH_TASK = 'sites.unpublish';

export interface UnpublishPayload {
  publication_id: string;
  seq: number;
}

/** Takes a site down at once (it stops serving) and queues the clean-up; poll until `unpublished`. */
export async function requestUnpublish(ctx: RequestCtx, bucketId: string, accountSelector: string | undefined, kind: PublicationKind, reason: string | null) {
  const loaded = await loadMailbox(ctx, accountSelector, bucketId, 'write');
  assertMutable(loaded.access);
  const p = await findPublication(ctx.db, bucketId, kind);
  if (!p) throw new AppError('PUBLICATION_NOT_FOUND', `The bucket has no ${kind === 'preview' ? 'preview' : 'website'}.`, { bucket_id: bucketId });
  if (p.status === 'unpublished' || p.status === 'unpublishing') return p;
  const now = ctx.now();
  await ctx.db.transaction().execute(async (trx) => {
    const seq = Number(p.request_seq) + 1;
    await trx
      .updateTable('publications')
      .set({ status: 'unpublishing', publish_state: 'unpublishing', request_seq: seq, access_epoch: Number(p.access_epoch) + 1, updated_at: iso(now) })
      .where('id', '=', p.id)
      .execute();
    if (kind === 'main') await trx.updateTable('mailboxes').set({ site_state: 'unpublishing' }).where('id', '=', bucketId).execute();
    const payload: UnpublishPayload = { publication_id: p.id, seq };
    const jobId = await ctx.jobs.enqueue(trx, UNPUBLISH_TASK, payload, { maxAttempts: 10 });
    await trx.updateTable('publications').set({ build_job_id: jobId }).where('id', '=', p.id).execute();
    await recordActivity(trx, ctx.actor, now, { accountId: p.account_id, action: 'publication.unpublish', targetType: 'publication', targetId: p.id, reason });
  });
  sitesChanged(ctx.db);
  return (await publicationById(ctx.db, p.id))!;
}

/** Days a renamed slug keeps redirecting (301) to the current address. */
export const SLUG_REDIRECT_DAYS = 30;

/** Renames the bucket's slug; the old host redirects to the new one for SLUG_REDIRECT_DAYS. */
export async function renameSlug(ctx: RequestCtx, bucketId: string, accountSelector: string | undefined, rawSlug: string, reason: string | null) {
  const loaded = await loadMailbox(ctx, accountSelector, bucketId, 'write');
  assertMutable(loaded.access);
  assertPublishingEnabled(loaded.access);
  const slug = checkExplicitSlug(rawSlug, 'public_slug');
  const now = ctx.now();
  try {
    await ctx.db.transaction().execute(async (trx) => {
      const taken = await trx.selectFrom('site_slugs').select('mailbox_id').where('slug', '=', slug).executeTakeFirst();
      if (taken && taken.mailbox_id !== bucketId) throw new AppError('SITE_SLUG_TAKEN', undefined, { field: 'public_slug', public_slug: slug });
      if (taken) return;
      const old = await trx.selectFrom('site_slugs').select('slug').where('mailbox_id', '=', bucketId).executeTakeFirst();
      // The new slug is live now: no redirect of its own (renaming back ends the old one's).
      await trx.deleteFrom('site_slug_redirects').where('old_slug', '=', slug).execute();
      if (old) {
        await trx.deleteFrom('site_slug_redirects').where('old_slug', '=', old.slug).execute();
        await trx.insertInto('site_slug_redirects').values({ old_slug: old.slug, mailbox_id: bucketId, expires_at: iso(new Date(now.getTime() + SLUG_REDIRECT_DAYS * 86_400_000)), created_at: iso(now) }).execute();
      }
      await trx.deleteFrom('site_slugs').where('mailbox_id', '=', bucketId).execute();
      await trx.insertInto('site_slugs').values({ slug, mailbox_id: bucketId, account_id: loaded.mailbox.account_id, created_at: iso(now) }).execute();
      await trx.updateTable('publications').set({ public_slug: slug, updated_at: iso(now) }).where('mailbox_id', '=', bucketId).execute();
      await trx.updateTable('mailboxes').set({ site_slug: slug }).where('id', '=', bucketId).execute();
      await recordActivity(trx, ctx.actor, now, { accountId: loaded.mailbox.account_id, action: 'publication.rename_slug', targetType: 'mailbox', targetId: bucketId, reason });
    });
  } catch (err) {
    if (isUniqueViolation(err)) throw new AppError('SITE_SLUG_TAKEN', undefined, { field: 'public_slug', public_slug: slug });
    throw err;
  }
  sitesChanged(ctx.db);
  return { slug, main: await findPublication(ctx.db, bucketId, 'main'), preview: await findPublication(ctx.db, bucketId, 'preview') };
}

/** One publication, through its bucket's tenancy (a foreign id answers like a missing one). */
export async function loadPublication(ctx: RequestCtx, accountSelector: string | undefined, id: string) {
  const access = await selectAccount(ctx.db, ctx.credential, accountSelector);
  const p = /^pub_[A-Za-z0-9]{1,64}$/.test(id) ? await publicationById(ctx.db, id) : undefined;
  const perms = p && p.account_id === access.account.id ? mailboxPermissions(ctx.credential, access, p.mailbox_id) : null;
  if (!p || !perms) throw new AppError('PUBLICATION_NOT_FOUND', undefined, { publication_id: id });
  const mailbox = await ctx.db.selectFrom('mailboxes').select('deleted_at').where('id', '=', p.mailbox_id).executeTakeFirst();
  if (!mailbox || mailbox.deleted_at) throw new AppError('PUBLICATION_NOT_FOUND', undefined, { publication_id: id });
  return { publication: p, perms };
}

export async function listPublications(ctx: RequestCtx, input: { accountId?: string; bucketId?: string; kind?: PublicationKind; limit: number; cursor?: string }) {
  const access = await selectAccount(ctx.db, ctx.credential, input.accountId);
  const filters = { account: access.account.id, bucket: input.bucketId ?? null, kind: input.kind ?? null };
  let q = ctx.db
    .selectFrom('publications')
    .innerJoin('mailboxes', 'mailboxes.id', 'publications.mailbox_id')
    .selectAll('publications')
    .where('publications.account_id', '=', access.account.id)
    .where('mailboxes.deleted_at', 'is', null);
  const visible = visibleMailboxIds(ctx.credential, access);
  if (visible !== null) q = visible.length ? q.where('publications.mailbox_id', 'in', visible) : q.where(sql<SqlBool>`1 = 0`);
  if (input.bucketId) q = q.where('publications.mailbox_id', '=', input.bucketId);
  if (input.kind) q = q.where('publications.kind', '=', input.kind);
  if (input.cursor) {
    const [after] = decodeCursor(ctx.secret, input.cursor, 'publications', filters);
    q = q.where('publications.id', '<', String(after));
  }
  const rows = (await q.orderBy('publications.id', 'desc').limit(input.limit + 1).execute()) as PublicationsTable[];
  const page = toPage(rows, input.limit, (r) => [r.id], { secret: ctx.secret, list: 'publications', filters });
  return { access, page };
}
