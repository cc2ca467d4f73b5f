import { expect, it } from 'vitest';
import { sql } from 'kysely';
import { describeEachDatabase } from './harness.ts';
import { EXTRACT_TASK, queueExtraction } from '../src/search/queue-extraction.ts';

// One change (a group commit's attachments, an upload batch) queues its documents' extraction in
// one insert: one job per new content with an extractor, none for contents already extracted. No
// job worker runs here (CUBBY_ROLES=api), so the queued jobs stay as queued.
describeEachDatabase('queueing text extraction', (app) => {
  it('queues one job per new extractable content of a change, skipping known, repeated and unextractable contents', async () => {
    const { db, dialect } = app().started.deps;
    const sha = (c: string) => c.repeat(64).slice(0, 64);
    const tag = Math.random().toString(16).slice(2, 10);
    const [a, b, known, zip] = ['a', 'b', 'c', 'd'].map((c) => sha(`${tag}${c}`));
    // blob_texts is one table on both databases, with their own search columns (not in the shared schema types).
    await sql`insert into blob_texts (sha256, status, text, pages, error, extracted_at) values (${known!}, 'done', 'x', 1, null, ${new Date().toISOString()})`.execute(db);
    await db.transaction().execute((trx) =>
      queueExtraction(trx, dialect, new Date(), [
        { sha256: a!, name: 'one.pdf', mime: 'application/pdf', account_id: null },
        { sha256: b!, name: 'two.txt', mime: 'text/plain', account_id: null },
        { sha256: a!, name: 'one-again.pdf', mime: 'application/pdf', account_id: null },
        { sha256: known!, name: 'known.pdf', mime: 'application/pdf', account_id: null },
        { sha256: zip!, name: 'archive.zip', mime: 'application/zip', account_id: null },
      ]),
    );
    const jobs = await db.selectFrom('jobs').select(['payload', 'unique_key', 'max_attempts']).where('task', '=', EXTRACT_TASK).where('unique_key', 'in', [a, b, known, zip].map((s) => `${EXTRACT_TASK}:${s}`)).execute();
    expect(jobs.map((j) => JSON.parse(j.payload).name).sort()).toEqual(['one.pdf', 'two.txt']);
    expect(jobs.every((j) => j.max_attempts === 3)).toBe(true);
    // Again: the jobs are pending, their keys taken; nothing more is queued.
    await db.transaction().execute((trx) => queueExtraction(trx, dialect, new Date(), [{ sha256: a!, name: 'one.pdf', mime: 'application/pdf' }, { sha256: b!, name: 'two.txt', mime: 'text/plain' }]));
    expect((await db.selectFrom('jobs').select('id').where('unique_key', 'in', [a, b].map((s) => `${EXTRACT_TASK}:${s}`)).execute()).length).toBe(2);
  });
}, { CUBBY_ROLES: 'api' });
