import type { AppDeps } from '../context.ts';
import { registerSiteDomainTasks } from './domains/tasks.ts';
import type { Worker } from '../jobs/worker.ts';
import { iso } from '../time.ts';
import { runBuild } from './build/run.ts';
import { BUILD_TASK, queueBuild, type BuildPayload } from './publish.service.ts';
import { UNPUBLISH_TASK, type UnpublishPayload } from './manage.service.ts';
import { dropBundle, publicationById } from './publications.repo.ts';
import { sitesChanged } from './changes.ts';

// Background work of the sites feature: builds, unpublishing, and a sweeper that recovers builds
// whose job vanished, ends expired previews and forgets old access attempts.

const MINUTE = 60_000;
/** A queued or running state untouched this long, without a live job behind it, is stuck. */
const STUCK_AFTER_MS = 2 * MINUTE;
const KEEP_ATTEMPTS_MS = 24 * 60 * MINUTE;

export function registerSiteTasks(worker: Worker, deps: AppDeps, log: { error: (o: unknown, m: string) => void }): void {
  worker.register(BUILD_TASK, { handler: (payload: BuildPayload, job) => runBuild(deps, payload, job, log), leaseMs: 15 * MINUTE });
  worker.register(UNPUBLISH_TASK, { handler: (payload: UnpublishPayload) => finishUnpublish(deps, payload) });
  worker.register('sites.sweep', { handler: async () => void (await sweepSites(deps)), leaseMs: 5 * MINUTE });
  worker.every('sites.sweep', MINUTE);
  registerSiteDomainTasks(worker, deps);
}

export async function finishUnpublish(deps: AppDeps, payload: UnpublishPayload): Promise<void> {
  const p = await publicationById(deps.db, payload.publication_id);
  if (!p || Number(p.request_seq) !== payload.seq || p.status !== 'unpublishing') return;
  const now = deps.now();
  await deps.db.transaction().execute(async (trx) => {
    const res = await trx
      .updateTable('publications')
      .set({ status: 'unpublished', publish_state: 'unpublished', bundle_id: null, unpublished_at: iso(now), updated_at: iso(now) })
      .where('id', '=', p.id)
      .where('request_seq', '=', payload.seq)
      .where('status', '=', 'unpublishing')
      .executeTakeFirst();
    if (Number(res.numUpdatedRows) === 0) return;
    if (p.bundle_id) await dropBundle(trx, p.bundle_id);
    if (p.kind === 'main') await trx.updateTable('mailboxes').set({ site_state: null }).where('id', '=', p.mailbox_id).execute();
  });
  sitesChanged(deps.db);
}

export async function sweepSites(deps: AppDeps): Promise<{ requeued: number; expired: number }> {
  const now = deps.now();
  let requeued = 0;
  const stale = await deps.db
    .selectFrom('publications')
    .leftJoin('jobs', 'jobs.id', 'publications.build_job_id')
    .select(['publications.id', 'publications.publish_state', 'publications.request_seq', 'jobs.status as job_status'])
    .where('publications.publish_state', 'in', ['queued', 'processing', 'unpublishing'])
    .where('publications.updated_at', '<', iso(now.getTime() - STUCK_AFTER_MS))
    .limit(100)
    .execute();
  for (const s of stale) {
    if (s.job_status === 'queued' || s.job_status === 'running') continue;
    await deps.db.transaction().execute(async (trx) => {
      const seq = Number(s.request_seq);
      if (s.publish_state === 'unpublishing') {
        const jobId = await deps.jobs.enqueue(trx, UNPUBLISH_TASK, { publication_id: s.id, seq } satisfies UnpublishPayload);
        await trx.updateTable('publications').set({ build_job_id: jobId, updated_at: iso(now) }).where('id', '=', s.id).execute();
      } else {
        await trx.updateTable('publications').set({ publish_state: 'queued', updated_at: iso(now) }).where('id', '=', s.id).where('request_seq', '=', seq).execute();
        await queueBuild(deps, trx, s.id, seq);
      }
    });
    requeued++;
  }

  // Previews end 24 hours after their last run.
  const expired = await deps.db
    .selectFrom('publications')
    .selectAll()
    .where('kind', '=', 'preview')
    .where('status', 'in', ['publishing', 'published'])
    .where('expires_at', '<=', iso(now))
    .limit(100)
    .execute();
  for (const p of expired) {
    await deps.db.transaction().execute(async (trx) => {
      const res = await trx
        .updateTable('publications')
        .set({ status: 'unpublished', publish_state: 'unpublished', bundle_id: null, request_seq: Number(p.request_seq) + 1, unpublished_at: iso(now), updated_at: iso(now) })
        .where('id', '=', p.id)
        .where('request_seq', '=', p.request_seq)
        .executeTakeFirst();
      if (Number(res.numUpdatedRows) && p.bundle_id) await dropBundle(trx, p.bundle_id);
    });
  }
  if (expired.length || requeued) sitesChanged(deps.db);

  const cutoff = iso(now.getTime() - KEEP_ATTEMPTS_MS);
  await deps.db.deleteFrom('site_access_attempts').where('created_at', '<', cutoff).execute();
  await deps.db.deleteFrom('site_email_codes').where('created_at', '<', cutoff).execute();
  return { requeued, expired: expired.length };
}
