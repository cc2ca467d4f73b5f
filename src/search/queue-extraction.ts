import { sql, type Kysely } from 'kysely';
import type { DB } from '../db/schema.ts';
import type { Dialect } from '../db/database.ts';
import { enqueueEach } from '../jobs/queue.ts';
import { extractKind } from './extract/extract.ts';

export const EXTRACT_TASK = 'search.extract';

export interface ExtractPayload {
  sha256: string;
  name: string;
  mime: string;
  /** Whose plan limits apply (max_pdf_size_bytes). */
  account_id?: string | null;
}

/**
 * Queues text extraction for stored contents that have an extractor and no result yet. Called in
 * the transaction that stores them (the outbox): one job per content, however many files and
 * emails share it.
 */
export async function queueExtraction(db: Kysely<DB>, dialect: Dialect, now: Date, items: ExtractPayload[]): Promise<void> {
  const wanted = new Map<string, ExtractPayload>();
  for (const it of items) if (it.sha256 && !wanted.has(it.sha256) && extractKind(it.name, it.mime)) wanted.set(it.sha256, it);
  if (!wanted.size) return;
  const known = await sql<{ sha256: string }>`select sha256 from blob_texts where sha256 in (${sql.join([...wanted.keys()])})`.execute(db);
  for (const k of known.rows) wanted.delete(k.sha256);
  // One insert for all of them (src/jobs/queue.ts enqueueEach), not one insert and wake-up each.
  await enqueueEach(db, dialect, EXTRACT_TASK, [...wanted.values()].map((it) => ({ payload: it, opts: { uniqueKey: `${EXTRACT_TASK}:${it.sha256}`, maxAttempts: 3 } })), now);
}
