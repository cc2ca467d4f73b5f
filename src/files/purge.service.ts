import type { Kysely } from 'kysely';
import type { DB } from '../db/schema.ts';
import type { BlobStore } from '../blobs/blob-store.ts';
import { iso } from '../time.ts';

/** Rows removed per step, so that deleting a large mailbox never holds a long transaction. */
const CHUNK = 500;
/** Blobs younger than this are never collected: an upload may be about to refer to them. */
const GRACE_MS = 24 * 3600 * 1000;

/**
 * Finishes deleting mailboxes marked deleted: removes their files and versions in chunks.
 * The mailbox row stays (its id and retired addresses stay reserved). Returns rows removed.
 */
export async function purgeDeletedMailboxes(db: Kysely<DB>, maxChunks = 20): Promise<number> {
  let removed = 0;
  for (let i = 0; i < maxChunks; i++) {
    // From the deleted mailboxes to their files (by the files' mailbox index). As a join, SQLite
    // without statistics read every file of every mailbox to find them: 80 ms at 300,000 files,
    // every five minutes, when no mailbox was deleted at all.
    const files = await db
      .selectFrom('files')
      .select('files.id')
      .where('files.mailbox_id', 'in', (eb) => eb.selectFrom('mailboxes').select('mailboxes.id').where('mailboxes.deleted_at', 'is not', null))
      .limit(CHUNK)
      .execute();
    if (files.length === 0) break;
    const ids = files.map((f) => f.id);
    await db.transaction().execute(async (trx) => {
      await trx.deleteFrom('file_versions').where('file_id', 'in', ids).execute();
      await trx.deleteFrom('files').where('id', 'in', ids).execute();
    });
    removed += ids.length;
  }
  const deleted = db.selectFrom('mailboxes').select('id').where('deleted_at', 'is not', null);
  await db.transaction().execute(async (trx) => {
    await trx.deleteFrom('upload_session_files').where('session_id', 'in', trx.selectFrom('upload_sessions').select('id').where('mailbox_id', 'in', deleted)).execute();
    await trx.deleteFrom('upload_sessions').where('mailbox_id', 'in', deleted).execute();
    await trx.deleteFrom('direct_uploads').where('mailbox_id', 'in', deleted).execute();
    // A deleted bucket's git connection (token and webhook secret) goes with it.
    await trx.deleteFrom('git_syncs').where('mailbox_id', 'in', deleted).execute();
  });
  return removed;
}

/**
 * Blobs looked at per statement. The collector reads every blob row older than the grace period,
 * and most are in use: at 300,000 blobs one statement held SQLite's connection (the event loop) for
 * 160–230 ms, every hour, growing with the store. In pages, with a turn of the event loop
 * between them, SMTP sessions and requests are served meanwhile.
 */
const SCAN_PAGE = 2000;

/**
 * Deletes blobs no file version or live upload refers to. A blob is first forgotten in the
 * database (so nothing new can pick it up through the `blobs` table), then removed from the store.
 * Looks through the blobs in pages of `pageSize` (in address order) until `max` are found.
 */
export async function collectGarbageBlobs(db: Kysely<DB>, blobs: BlobStore, now: Date, max = 1000, pageSize = SCAN_PAGE): Promise<number> {
  const orphans: string[] = [];
  let after = '';
  while (orphans.length < max) {
    const page = await db
      .selectFrom((eb) => eb.selectFrom('blobs').select('sha256').where('sha256', '>', after).orderBy('sha256').limit(pageSize).as('page'))
      .select((eb) => [eb.fn.countAll<number | string>().as('n'), eb.fn.max('sha256').as('last')])
      .executeTakeFirstOrThrow();
    if (!page.last) break;
    for (const { sha256 } of await orphansBetween(db, now, after, page.last, max - orphans.length)) orphans.push(sha256);
    if (Number(page.n) < pageSize) break;
    after = page.last;
    await new Promise((resolve) => setImmediate(resolve));
  }
  return forget(db, blobs, orphans);
}

/** Blobs with addresses in (after, last], past the grace period, that nothing refers to. */
function orphansBetween(db: Kysely<DB>, now: Date, after: string, last: string, limit: number) {
  const cutoff = iso(now.getTime() - GRACE_MS);
  return db
    .selectFrom('blobs')
    .select('sha256')
    .where('sha256', '>', after)
    .where('sha256', '<=', last)
    .where('created_at', '<', cutoff)
    .where(({ not, exists, selectFrom }) =>
      not(exists(selectFrom('file_versions').select('file_versions.id').whereRef('file_versions.sha256', '=', 'blobs.sha256'))),
    )
    // Published site bundles (src/sites): generated pages and gzip/brotli variants.
    .where(({ not, exists, selectFrom }) => not(exists(selectFrom('site_bundle_blobs').select('site_bundle_blobs.bundle_id').whereRef('site_bundle_blobs.sha256', '=', 'blobs.sha256'))))
    // Account logos (src/accounts/logo.service.ts).
    .where(({ not, exists, selectFrom }) => not(exists(selectFrom('accounts').select('accounts.id').whereRef('accounts.logo_sha256', '=', 'blobs.sha256'))))
    .where(({ not, exists, selectFrom }) =>
      not(
        exists(
          selectFrom('direct_uploads')
            .select('direct_uploads.id')
            .whereRef('direct_uploads.sha256', '=', 'blobs.sha256')
            .where('direct_uploads.status', '=', 'uploaded')
            .where('direct_uploads.expires_at', '>', iso(now)),
        ),
      ),
    )
    .limit(limit)
    .execute();
}

async function forget(db: Kysely<DB>, blobs: BlobStore, orphans: string[]): Promise<number> {
  let n = 0;
  for (const sha256 of orphans) {
    await db.deleteFrom('blobs').where('sha256', '=', sha256).execute();
    await blobs.delete(sha256);
    n++;
  }
  return n;
}
