import type { AppDeps } from '../../context.ts';
import type { JobsTable } from '../../db/schema.ts';
import { iso } from '../../time.ts';
import { BuildError, contentKey, currentFiles, planSite } from './plan.ts';
import { blobRow, generateEntries, type Generated } from './generate.ts';
import { dropBundle, isLive, publicationById } from '../publications.repo.ts';
import { siteId } from '../ids.ts';
import { logoBundlePath } from '../../accounts/logo.service.ts';
import { sitesChanged } from '../changes.ts';
import { notifyPublishFailed } from '../notify.ts';
import type { BuildPayload } from '../publish.service.ts';
import type { PublicationsTable } from '../sites.schema.ts';

// A build, run by the job queue: queued → processing → ready | failed. Every state write names the
// request it belongs to (request_seq): a build overtaken by a newer request changes nothing.

const CHUNK = 200;
class Overtaken extends Error {}

export async function runBuild(deps: AppDeps, payload: BuildPayload, job: JobsTable, log: { error: (o: unknown, m: string) => void }): Promise<void> {
  const p = await publicationById(deps.db, payload.publication_id);
  if (!p || Number(p.request_seq) !== payload.seq || (p.publish_state !== 'queued' && p.publish_state !== 'processing')) return;
  const claimed = await deps.db
    .updateTable('publications')
    .set({ publish_state: 'processing', publish_started_at: iso(deps.now()), updated_at: iso(deps.now()) })
    .where('id', '=', p.id)
    .where('request_seq', '=', payload.seq)
    .where('publish_state', 'in', ['queued', 'processing'])
    .executeTakeFirst();
  if (Number(claimed.numUpdatedRows) === 0) return;
  let title: string | null = null;
  try {
    const mailbox = await deps.db.selectFrom('mailboxes').select(['title', 'description', 'archived_at', 'deleted_at', 'account_id']).where('id', '=', p.mailbox_id).executeTakeFirst();
    title = mailbox?.title ?? null;
    if (!mailbox || mailbox.deleted_at) throw new BuildError('The bucket was deleted.');
    if (mailbox.archived_at) throw new BuildError('The bucket is archived; unarchive it to publish.');
    const account = await deps.db.selectFrom('accounts').select(['name', 'website_publishing_enabled', 'logo_sha256', 'logo_content_type']).where('id', '=', p.account_id).executeTakeFirstOrThrow();
    if (account.website_publishing_enabled !== 1) throw new BuildError('Website publishing is disabled for this account.');
    const plan = planSite(await currentFiles(deps.db, p.mailbox_id), p.root_directory);
    const page = { title: mailbox.title ?? 'Files', description: mailbox.description ?? '', accountName: account.name, logo: await bundleLogo(deps, account) };
    const key = contentKey(plan, p.root_directory, page);
    const current = p.bundle_id ? await deps.db.selectFrom('site_bundles').select(['id', 'content_key']).where('id', '=', p.bundle_id).executeTakeFirst() : undefined;
    if (current && current.content_key === key) {
      // Settings-only change: the same bytes, served under the new settings.
      await commitReady(deps, p, payload.seq, current.id, null);
    } else {
      const generated = await generateEntries(deps, plan, page);
      const bundle = { id: siteId('sbd'), content_key: key, root_directory: p.root_directory, home_kind: plan.homeKind, entry_path: plan.entryPath, file_count: plan.files.length, excluded_count: plan.excluded.length, total_bytes: plan.files.reduce((n, f) => n + f.size, 0) };
      await commitReady(deps, p, payload.seq, bundle.id, { bundle, generated });
    }
  } catch (err) {
    if (err instanceof Overtaken) return;
    if (err instanceof BuildError) return failBuild(deps, p, payload.seq, err.message, title);
    if (job.attempts < job.max_attempts) throw err;
    log.error({ err, publication: p.id }, 'site build failed');
    await failBuild(deps, p, payload.seq, `The build failed on our side (job ${job.id}); retry it.`, title);
  }
}

/** The account's logo as a bundle entry, or null (none, or its blob is gone). */
async function bundleLogo(deps: AppDeps, account: { logo_sha256: string | null; logo_content_type: string | null }) {
  if (!account.logo_sha256 || !account.logo_content_type) return null;
  const blob = await deps.db.selectFrom('blobs').select('byte_size').where('sha256', '=', account.logo_sha256).executeTakeFirst();
  if (!blob) return null;
  return { path: logoBundlePath(account.logo_content_type), sha256: account.logo_sha256, size: Number(blob.byte_size), contentType: account.logo_content_type };
}

type NewBundle = Omit<import('../sites.schema.ts').SiteBundlesTable, 'publication_id' | 'mailbox_id' | 'created_at'>;

async function commitReady(deps: AppDeps, p: PublicationsTable, seq: number, bundleId: string, fresh: { bundle: NewBundle; generated: Generated } | null): Promise<void> {
  const now = deps.now();
  await deps.db.transaction().execute(async (trx) => {
    const res = await trx
      .updateTable('publications')
      .set({ status: 'published', publish_state: 'ready', bundle_id: bundleId, publish_completed_at: iso(now), publish_error: null, updated_at: iso(now) })
      .where('id', '=', p.id)
      .where('request_seq', '=', seq)
      .where('publish_state', '=', 'processing')
      .executeTakeFirst();
    if (Number(res.numUpdatedRows) === 0) throw new Overtaken();
    if (fresh) {
      const { bundle, generated } = fresh;
      if (generated.newBlobs.length) {
        const rows = [...new Map(generated.newBlobs.map((b) => [b.sha256, blobRow(b, now)])).values()];
        for (let i = 0; i < rows.length; i += CHUNK) await trx.insertInto('blobs').values(rows.slice(i, i + CHUNK)).onConflict((oc) => oc.column('sha256').doNothing()).execute();
      }
      await trx.insertInto('site_bundles').values({ ...bundle, publication_id: p.id, mailbox_id: p.mailbox_id, created_at: iso(now) }).execute();
      const files = generated.entries.map((e) => ({ ...e, bundle_id: bundle.id }));
      for (let i = 0; i < files.length; i += CHUNK) await trx.insertInto('site_files').values(files.slice(i, i + CHUNK)).execute();
      const shas = new Set<string>();
      for (const e of generated.entries) for (const s of [e.sha256, e.gzip_sha256, e.br_sha256, e.viewer_sha256]) if (s) shas.add(s);
      const refs = [...shas].map((sha256) => ({ bundle_id: bundle.id, sha256 }));
      for (let i = 0; i < refs.length; i += CHUNK) await trx.insertInto('site_bundle_blobs').values(refs.slice(i, i + CHUNK)).execute();
    }
    if (p.bundle_id && p.bundle_id !== bundleId) await dropBundle(trx, p.bundle_id);
    if (p.kind === 'main') await trx.updateTable('mailboxes').set({ site_state: 'published', site_slug: p.public_slug }).where('id', '=', p.mailbox_id).execute();
  });
  sitesChanged(deps.db);
}

async function failBuild(deps: AppDeps, p: PublicationsTable, seq: number, message: string, title: string | null): Promise<void> {
  const now = deps.now();
  await deps.db.transaction().execute(async (trx) => {
    const res = await trx
      .updateTable('publications')
      .set({ publish_state: 'failed', publish_error: message.slice(0, 2000), publish_completed_at: iso(now), updated_at: iso(now) })
      .where('id', '=', p.id)
      .where('request_seq', '=', seq)
      .where('publish_state', '=', 'processing')
      .executeTakeFirst();
    if (Number(res.numUpdatedRows) === 0) return;
    // A site that was up stays up with its previous bundle.
    if (p.kind === 'main') await trx.updateTable('mailboxes').set({ site_state: isLive(p, now) ? 'published' : null }).where('id', '=', p.mailbox_id).execute();
    await notifyPublishFailed(deps, trx, p, title, message);
  });
  sitesChanged(deps.db);
}
