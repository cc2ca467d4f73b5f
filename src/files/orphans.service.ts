import type { Kysely } from 'kysely';
import type { DB } from '../db/schema.ts';
import type { BlobStore } from '../blobs/blob-store.ts';

/** Blob addresses looked up in the `blobs` table per query. */
const BATCH = 500;

export interface OrphanSweep {
  /** `*.part` temp files of interrupted writes, removed. */
  parts: number;
  /** Stored blobs no `blobs` row names, removed. */
  blobs: number;
}

/**
 * Removes what a crash (kill -9, power loss) leaves behind and nothing else will: temp files of
 * writes that never finished, and blobs stored just before the process died, whose row was never
 * committed (every write stores the blob first, then commits its row). Only leftovers older than
 * `ageMs` are taken; the age must be longer than any write in progress can take (default one day:
 * CUBBY_ORPHAN_SWEEP_AGE_S). Blobs that have a row are the blob collector's business
 * (collectGarbageBlobs), which removes the row first: if it crashes in between, this takes the blob.
 *
 * Ages are the file system's: file times come from the system clock, so the cut-off is taken from
 * it too (Date.now()), never from the app's clock (AppOptions.now, which tests move forward). Against
 * an app clock a day ahead, the temp file of an SMTP message still streaming looked a day old, was
 * taken, and the message was answered 451 (its rename into the store found no file); so was a
 * message.json stored a moment before its row was committed.
 */
export async function sweepOrphans(db: Kysely<DB>, blobs: BlobStore, ageMs: number): Promise<OrphanSweep> {
  const before = new Date(Date.now() - ageMs);
  const parts = await blobs.sweepTemp(before);
  let removed = 0;
  let batch: string[] = [];
  const flush = async () => {
    const known = new Set((await db.selectFrom('blobs').select('sha256').where('sha256', 'in', batch).execute()).map((r) => r.sha256));
    for (const sha256 of batch) if (!known.has(sha256) && (await blobs.deleteIfWrittenBefore(sha256, before))) removed++;
    batch = [];
  };
  for await (const sha256 of blobs.list()) {
    batch.push(sha256);
    if (batch.length >= BATCH) await flush();
  }
  if (batch.length) await flush();
  return { parts, blobs: removed };
}
