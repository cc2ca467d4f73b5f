import type { AppDeps } from '../context.ts';
import type { Worker } from './worker.ts';
import { sweepFinishedJobs } from './queue.ts';
import { sweepActivity } from '../activity/activity.service.ts';
import { expireUploadSessions } from '../uploads/upload-sessions.lifecycle.ts';
import { collectGarbageBlobs, purgeDeletedMailboxes } from '../files/purge.service.ts';
import { sweepOrphans } from '../files/orphans.service.ts';
import { sweepSessions } from '../web/session.ts';
import { sweepSignInAttempts } from '../web/throttle.ts';
import { purgeSiteAnalytics } from '../sites/analytics/store.ts';

const MINUTE = 60_000;

/** Housekeeping as recurring jobs: each runs once per period across all nodes. */
export function registerMaintenance(worker: Worker, deps: AppDeps): void {
  const tasks: [string, number, () => Promise<unknown>][] = [
    // Upload sessions past uploads_expire_at or idle (CUBBY_UPLOAD_SESSION_IDLE_S): expired, unsaved uploads discarded, lock released.
    ['maintenance.expire_upload_sessions', MINUTE, () => expireUploadSessions(deps.db, deps.now(), deps.config.uploadSessionIdleSeconds)],
    ['maintenance.purge_deleted_mailboxes', 5 * MINUTE, () => purgeDeletedMailboxes(deps.db)],
    ['maintenance.activity', 60 * MINUTE, () => sweepActivity(deps.db, deps.now())],
    ['maintenance.sessions', 60 * MINUTE, () => sweepSessions(deps.db, deps.now())],
    ['maintenance.sign_in_attempts', 60 * MINUTE, () => sweepSignInAttempts(deps.db, deps.now())],
    ['maintenance.blobs', 60 * MINUTE, () => collectGarbageBlobs(deps.db, deps.blobs, deps.now())],
    // Site analytics older than CUBBY_SITE_ANALYTICS_RETENTION_DAYS (default 90), and past days' visitor hashes.
    ['maintenance.site_analytics', 60 * MINUTE, () => purgeSiteAnalytics(deps.db, deps.now(), deps.config.siteAnalytics.retentionDays)],
    ['maintenance.jobs', 60 * MINUTE, () => sweepFinishedJobs(deps.db, deps.now())],
    // Crash leftovers (temp files, blobs whose row was never committed) past CUBBY_ORPHAN_SWEEP_AGE_S
    // by the file system's clock (not deps.now()); hourly, or as often as the age when that is
    // shorter, so a short age is honoured soon.
    [
      'maintenance.orphans',
      Math.max(1000, Math.min(60 * MINUTE, deps.config.orphanSweepAgeMs)),
      async () => {
        const swept = await sweepOrphans(deps.db, deps.blobs, deps.config.orphanSweepAgeMs);
        // Worth a line only when a crash left something behind.
        if (swept.parts || swept.blobs) deps.log.info({ swept: { temp_files: swept.parts, blobs: swept.blobs } }, 'removed crash leftovers');
      },
    ],
  ];
  for (const [name, every, run] of tasks) {
    worker.register(name, { handler: async () => void (await run()), leaseMs: 10 * MINUTE });
    worker.every(name, every);
  }
}
