import { sql } from 'kysely';
import type { AppDeps } from '../context.ts';
import type { EmailsTable } from '../db/schema.ts';
import type { Worker } from '../jobs/worker.ts';
import { enqueue } from '../jobs/queue.ts';
import { limitsFor } from '../accounts/limits.service.ts';
import { iso } from '../time.ts';
import { Extractor, extractKind, type ExtractResult } from './extract/extract.ts';
import { EXTRACT_TASK, queueExtraction, type ExtractPayload } from './queue-extraction.ts';
import { emailDocsFor, emailsWithAttachment } from './documents.ts';
import { searchIndex } from './search-index.ts';

// Background work of search: extracting the text of stored contents (one durable job per content,
// queued in the transaction that stored it), and indexing data that existed before search did.

export const BACKFILL_TASK = 'search.backfill';

async function readAll(deps: AppDeps, sha256: string): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of await deps.blobs.read(sha256)) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

/** Extracts one content and indexes it (and the emails it is attached to) in one transaction. */
async function extractOne(deps: AppDeps, extractor: Extractor, p: ExtractPayload): Promise<ExtractResult | null> {
  const kind = extractKind(p.name, p.mime);
  if (!kind) return null;
  const existing = await sql<{ sha256: string }>`select sha256 from blob_texts where sha256 = ${p.sha256}`.execute(deps.db);
  if (existing.rows.length) return null;
  const size = await deps.blobs.size(p.sha256);
  if (size === null) return null; // collected since: nothing to do
  let cap = deps.config.search.extractMaxBytes;
  if (kind === 'pdf' && p.account_id) {
    const account = await deps.db.selectFrom('accounts').selectAll().where('id', '=', p.account_id).executeTakeFirst();
    const pdfMax = account ? limitsFor(account).max_pdf_size_bytes : null;
    if (pdfMax !== null && pdfMax !== undefined) cap = Math.min(cap, pdfMax);
  }
  const result: ExtractResult =
    size > cap ? { status: 'too_large', text: null, pages: null, error: `the file is ${size} bytes; text is extracted from files up to ${cap}` } : await extractor.extract(kind, await readAll(deps, p.sha256));
  const index = searchIndex(deps);
  await deps.db.transaction().execute(async (trx) => {
    await index.putText(trx, { sha256: p.sha256, status: result.status, text: result.text, pages: result.pages, error: result.error ?? null, extractedAt: iso(deps.now()) });
    if (result.text) {
      const emails = await emailsWithAttachment(trx, p.sha256);
      if (emails.length) await index.putEmails(trx, await emailDocsFor(trx, emails));
    }
  });
  return result;
}

const BATCH = 200;

/**
 * Indexes what was stored before search existed (or what `cubby admin reindex` asks for): emails in
 * id order, then the current versions of live files, a batch per run; each run queues the next.
 */
export async function backfillStep(deps: Pick<AppDeps, 'db' | 'dialect' | 'config' | 'now'>, payload: { phase?: 'emails' | 'files'; after?: string | null; mailbox_id?: string | null }): Promise<{ done: boolean; next: typeof payload; emails: number; files: number }> {
  const phase = payload.phase ?? 'emails';
  const after = payload.after ?? '';
  if (phase === 'emails') {
    let q = deps.db.selectFrom('emails').selectAll().where('id', '>', after).orderBy('id').limit(BATCH);
    if (payload.mailbox_id) q = q.where('mailbox_id', '=', payload.mailbox_id);
    const rows: EmailsTable[] = await q.execute();
    if (rows.length) await deps.db.transaction().execute(async (trx) => searchIndex(deps).putEmails(trx, await emailDocsFor(trx, rows)));
    const next = rows.length === BATCH ? { ...payload, phase, after: rows.at(-1)!.id } : { ...payload, phase: 'files' as const, after: null };
    return { done: false, next, emails: rows.length, files: 0 };
  }
  let q = deps.db
    .selectFrom('files')
    .innerJoin('file_versions', 'file_versions.id', 'files.current_version_id')
    .select(['files.id as id', 'files.account_id as account_id', 'file_versions.sha256 as sha256', 'file_versions.name as name', 'file_versions.mime_type as mime'])
    .where('files.deleted_at', 'is', null)
    .where('files.id', '>', after)
    .orderBy('files.id')
    .limit(BATCH);
  if (payload.mailbox_id) q = q.where('files.mailbox_id', '=', payload.mailbox_id);
  const rows = await q.execute();
  await deps.db.transaction().execute((trx) => queueExtraction(trx, deps.dialect, deps.now(), rows.filter((r) => r.sha256).map((r) => ({ sha256: r.sha256!, name: r.name, mime: r.mime, account_id: r.account_id }))));
  if (rows.length === BATCH) return { done: false, next: { ...payload, phase, after: rows.at(-1)!.id }, emails: 0, files: rows.length };
  return { done: true, next: payload, emails: 0, files: rows.length };
}

export function registerSearchTasks(worker: Worker, deps: AppDeps, log: { info: (obj: unknown, msg: string) => void }): { close(): Promise<void> } {
  const extractor = new Extractor({ timeoutMs: deps.config.search.extractTimeoutMs, maxMemoryMb: 256 });
  worker.register(EXTRACT_TASK, {
    // Extraction has its own time limit; the lease only has to outlast it.
    leaseMs: deps.config.search.extractTimeoutMs + 60_000,
    handler: async (payload: ExtractPayload) => {
      await extractOne(deps, extractor, payload);
    },
  });
  worker.register(BACKFILL_TASK, {
    exclusive: true,
    handler: async (payload) => {
      const step = await backfillStep(deps, payload ?? {});
      log.info({ phase: payload?.phase ?? 'emails', emails: step.emails, files: step.files }, 'search backfill step');
      if (!step.done) await enqueue(deps.db, deps.dialect, BACKFILL_TASK, step.next, deps.now(), { maxAttempts: 10 });
    },
  });
  return { close: () => extractor.close() };
}
