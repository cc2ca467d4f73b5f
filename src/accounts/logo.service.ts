import { imageSize } from 'image-size';
import type { Kysely } from 'kysely';
import type { Actor, AppDeps } from '../context.ts';
import type { DB } from '../db/schema.ts';
import { AppError } from '../errors.ts';
import { iso } from '../time.ts';
import { recordActivity } from '../activity/activity.service.ts';
import { queueBuild } from '../sites/publish.service.ts';
import { sitesChanged } from '../sites/changes.ts';
import { assertMemberAdmin } from './members.service.ts';
import { assertAccountMutable } from '../auth/access.ts';

// Account logos: the branding published auto-index sites show as {{account_logo}}.
//
// Only raster images are accepted — PNG, JPEG and WebP — recognised from their bytes (the
// filename and the browser's declared type are ignored). SVG is refused on purpose: it is a
// document that can carry script and links, and a logo must never run anything where it is shown.
// The bytes live in the blob store (content-addressed); the account row names the blob and the
// sniffed type, which is the only Content-Type it is ever served with.

export const MAX_LOGO_BYTES = 512 * 1024;
export const MAX_LOGO_SIDE = 2048;
export const MIN_LOGO_SIDE = 16;

const TYPES: Record<string, { contentType: string; ext: string }> = {
  png: { contentType: 'image/png', ext: 'png' },
  jpg: { contentType: 'image/jpeg', ext: 'jpg' },
  webp: { contentType: 'image/webp', ext: 'webp' },
};

export interface SniffedLogo {
  contentType: string;
  width: number;
  height: number;
}

/** The logo's type and size read from its bytes, or the precise reason it is refused. */
export function sniffLogo(bytes: Buffer): SniffedLogo {
  if (bytes.length === 0) throw new AppError('ACCOUNT_LOGO_UNSUPPORTED', 'Choose an image file to upload.');
  if (bytes.length > MAX_LOGO_BYTES) throw new AppError('ACCOUNT_LOGO_TOO_LARGE', undefined, { max_bytes: MAX_LOGO_BYTES });
  let found: { type?: string; width?: number; height?: number };
  try {
    found = imageSize(bytes);
  } catch {
    throw new AppError('ACCOUNT_LOGO_UNSUPPORTED');
  }
  const type = found.type ? TYPES[found.type] : undefined;
  if (!type) throw new AppError('ACCOUNT_LOGO_UNSUPPORTED', undefined, { detected: found.type ?? null });
  const { width = 0, height = 0 } = found;
  if (width < MIN_LOGO_SIDE || height < MIN_LOGO_SIDE || width > MAX_LOGO_SIDE || height > MAX_LOGO_SIDE) {
    throw new AppError('ACCOUNT_LOGO_DIMENSIONS', undefined, { width, height, min: MIN_LOGO_SIDE, max: MAX_LOGO_SIDE });
  }
  return { contentType: type.contentType, width, height };
}

/** The file name a published bundle serves the logo under (`.cubby/` is never user content). */
export function logoBundlePath(contentType: string): string {
  const ext = Object.values(TYPES).find((t) => t.contentType === contentType)?.ext ?? 'png';
  return `.cubby/account-logo.${ext}`;
}

/**
 * Requeues the builds of the account's live auto-index sites so that they show the new branding
 * (name or logo). A site keeps serving its current bundle while the new one builds.
 */
export async function refreshBranding(deps: AppDeps, trx: Kysely<DB>, accountId: string, now: Date): Promise<number> {
  const live = await trx
    .selectFrom('publications')
    .innerJoin('site_bundles', 'site_bundles.id', 'publications.bundle_id')
    .select(['publications.id', 'publications.request_seq'])
    .where('publications.account_id', '=', accountId)
    .where('publications.status', '=', 'published')
    .where('publications.publish_state', '=', 'ready')
    .where('site_bundles.home_kind', '=', 'auto')
    .execute();
  for (const p of live) {
    const seq = Number(p.request_seq) + 1;
    await trx
      .updateTable('publications')
      .set({ publish_state: 'queued', request_seq: seq, publish_enqueued_at: iso(now), publish_started_at: null, publish_completed_at: null, updated_at: iso(now) })
      .where('id', '=', p.id)
      .execute();
    await queueBuild(deps, trx, p.id, seq);
  }
  return live.length;
}

/** Suspended and read-only accounts keep their branding as it is (the rule of every other change). */
async function assertBrandingMutable(deps: AppDeps, accountId: string): Promise<void> {
  const account = await deps.db.selectFrom('accounts').select(['id', 'suspended_at', 'status']).where('id', '=', accountId).executeTakeFirstOrThrow();
  assertAccountMutable(account);
}

/** Stores the image as the account's logo (owners, administrators, the owner of its agency). */
export async function setAccountLogo(deps: AppDeps, actor: Actor & { userId: string }, accountId: string, bytes: Buffer): Promise<SniffedLogo> {
  await assertMemberAdmin(deps.db, accountId, actor.userId);
  await assertBrandingMutable(deps, accountId);
  const logo = sniffLogo(bytes);
  const stored = await deps.blobs.putBuffer(bytes);
  const now = deps.now();
  await deps.db.transaction().execute(async (trx) => {
    await trx.insertInto('blobs').values({ sha256: stored.sha256, byte_size: stored.byteSize, md5: stored.md5Base64, created_at: iso(now) }).onConflict((oc) => oc.column('sha256').doNothing()).execute();
    await trx.updateTable('accounts').set({ logo_sha256: stored.sha256, logo_content_type: logo.contentType, updated_at: iso(now) }).where('id', '=', accountId).execute();
    await recordActivity(trx, actor, now, { accountId, action: 'account.logo_update', targetType: 'account', targetId: accountId });
    await refreshBranding(deps, trx, accountId, now);
  });
  sitesChanged(deps.db);
  return logo;
}

/** Removes the logo: published listings show the account's initial again. */
export async function removeAccountLogo(deps: AppDeps, actor: Actor & { userId: string }, accountId: string): Promise<void> {
  await assertMemberAdmin(deps.db, accountId, actor.userId);
  await assertBrandingMutable(deps, accountId);
  const now = deps.now();
  await deps.db.transaction().execute(async (trx) => {
    // The old blob is left to the blob collector, which takes it once nothing names it.
    await trx.updateTable('accounts').set({ logo_sha256: null, logo_content_type: null, updated_at: iso(now) }).where('id', '=', accountId).execute();
    await recordActivity(trx, actor, now, { accountId, action: 'account.logo_remove', targetType: 'account', targetId: accountId });
    await refreshBranding(deps, trx, accountId, now);
  });
  sitesChanged(deps.db);
}

/** The logo's bytes and type for the dashboard's preview, or null when the account has none. */
export async function readAccountLogo(deps: AppDeps, accountId: string): Promise<{ bytes: Buffer; contentType: string; sha256: string } | null> {
  const row = await deps.db.selectFrom('accounts').select(['logo_sha256', 'logo_content_type']).where('id', '=', accountId).executeTakeFirst();
  if (!row?.logo_sha256 || !row.logo_content_type) return null;
  const chunks: Buffer[] = [];
  for await (const chunk of await deps.blobs.read(row.logo_sha256)) chunks.push(chunk as Buffer);
  return { bytes: Buffer.concat(chunks), contentType: row.logo_content_type, sha256: row.logo_sha256 };
}
