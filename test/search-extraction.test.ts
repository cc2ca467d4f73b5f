import { createHash } from 'node:crypto';
import { sql } from 'kysely';
import { expect, it } from 'vitest';
import { describeEachDatabase, type TestApp } from './harness.ts';
import { newMailbox } from './files-helpers.ts';
import { labelNow } from './smtp-helpers.ts';
import { DOCX_TYPE, encryptedPdf, makeDocx, makePdf, pdfBomb, zipBombDocx } from './search-documents.ts';

// Text extraction of uploaded files, good and hostile: every document ends with a final status
// (never retried forever), the server keeps answering, and only real text is searchable.

const MAX_BYTES = 400_000;
const word = () => `zq${Math.random().toString(36).slice(2, 9)}`;
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

async function upload(app: TestApp, key: string, mailboxId: string, path: string, bytes: Buffer, contentType: string) {
  const blob = { filename: path.split('/').pop()!, byte_size: bytes.length, checksum: createHash('md5').update(bytes).digest('base64'), content_type: contentType, sha256: sha(bytes) };
  const step1 = await app.request('POST', '/v1/direct_uploads', { key, body: { mailbox_id: mailboxId, path, blob } });
  expect(step1.status, step1.text).toBe(201);
  const put = await fetch(step1.body.data.direct_upload.url, { method: 'PUT', headers: step1.body.data.direct_upload.headers, body: new Uint8Array(bytes) });
  expect(put.status).toBe(200);
  const saved = await app.request('POST', `/v1/mailboxes/${mailboxId}/files`, { key, body: { path, signed_blob_id: step1.body.data.signed_id } });
  expect(saved.status, saved.text).toBe(201);
  return saved.body.data.file;
}

async function statusOf(app: TestApp, bytes: Buffer) {
  const r = await sql<{ status: string; error: string | null }>`select status, error from blob_texts where sha256 = ${sha(bytes)}`.execute(app.started.deps.db);
  return r.rows[0] ?? null;
}

async function contentSearch(app: TestApp, key: string, mailboxId: string, q: string): Promise<string[]> {
  const r = await app.request('GET', `/v1/mailboxes/${mailboxId}/files`, { key, query: { q, q_in: 'content' } });
  expect(r.status, r.text).toBe(200);
  return r.body.data.files.map((f: any) => f.path);
}

describeEachDatabase(
  'search extraction',
  (app) => {
    it('extracts DOCX, HTML, Markdown and text with invalid UTF-8, and sets has_text', async () => {
      const user = await app().user();
      const box = await newMailbox(app(), user.key);
      const [a, b, c, d] = [word(), word(), word(), word()];
      await upload(app(), user.key, box.id, 'docs/plan.docx', makeDocx('Title', `The ${a} plan`), DOCX_TYPE);
      await upload(app(), user.key, box.id, 'docs/page.html', Buffer.from(`<html><body><p>Hello ${b}</p><script>var ${c} = 1</script></body></html>`), 'text/html');
      await upload(app(), user.key, box.id, 'docs/notes.md', Buffer.concat([Buffer.from(`# Notes\nbroken `), Buffer.from([0xff, 0xfe, 0xc3]), Buffer.from(` ${d} end`)]), 'text/markdown');
      await labelNow(app());
      expect(await contentSearch(app(), user.key, box.id, a)).toEqual(['docs/plan.docx']);
      expect(await contentSearch(app(), user.key, box.id, b)).toEqual(['docs/page.html']);
      expect(await contentSearch(app(), user.key, box.id, c)).toEqual([]); // scripts are not text
      expect(await contentSearch(app(), user.key, box.id, d)).toEqual(['docs/notes.md']);
      const files = await app().request('GET', `/v1/mailboxes/${box.id}/files`, { key: user.key, query: { q: 'plan', q_in: 'all' } });
      expect(files.body.data.files.map((f: any) => [f.path, f.current_file_version.has_text])).toEqual([['docs/plan.docx', true]]);
    });

    it('marks hostile documents with a final status, once, and keeps serving', async () => {
      const user = await app().user();
      const box = await newMailbox(app(), user.key);
      const filler = Array.from({ length: 40 }, (_, i) => `Page ${i} ${'lorem ipsum dolor sit amet '.repeat(400)}`);
      const docs = {
        large: makePdf(...filler),
        bomb: pdfBomb(),
        zip: zipBombDocx(),
        locked: encryptedPdf(),
        garbage: Buffer.from('%PDF-1.4\n' + 'x'.repeat(5000)),
      };
      expect(docs.large.length).toBeGreaterThan(MAX_BYTES);
      await upload(app(), user.key, box.id, 'bad/large.pdf', docs.large, 'application/pdf');
      await upload(app(), user.key, box.id, 'bad/bomb.pdf', docs.bomb, 'application/pdf');
      await upload(app(), user.key, box.id, 'bad/zip.docx', docs.zip, DOCX_TYPE);
      await upload(app(), user.key, box.id, 'bad/locked.pdf', docs.locked, 'application/pdf');
      await upload(app(), user.key, box.id, 'bad/garbage.pdf', docs.garbage, 'application/pdf');
      await labelNow(app());
      expect(await statusOf(app(), docs.large)).toMatchObject({ status: 'too_large' });
      expect(['broken', 'empty']).toContain((await statusOf(app(), docs.bomb))?.status);
      expect(await statusOf(app(), docs.zip)).toMatchObject({ status: 'too_large' });
      expect(await statusOf(app(), docs.locked)).toMatchObject({ status: 'encrypted' });
      expect(await statusOf(app(), docs.garbage)).toMatchObject({ status: 'broken' });
      // One job each, finished (not failed, not queued for another try).
      const jobs = await app().started.deps.db.selectFrom('jobs').select(['status', 'attempts', 'payload']).where('task', '=', 'search.extract').execute();
      for (const bytes of Object.values(docs)) {
        const mine = jobs.filter((j) => j.payload.includes(sha(bytes)));
        expect(mine.map((j) => [j.status, j.attempts])).toEqual([['done', 1]]);
      }
      const files = await app().request('GET', `/v1/mailboxes/${box.id}/files`, { key: user.key, query: { folder: 'bad' } });
      expect(files.body.data.files.every((f: any) => f.current_file_version.has_text === false)).toBe(true);
      expect(await contentSearch(app(), user.key, box.id, 'lorem')).toEqual([]);
    }, 90_000);

    it('answers bad queries with INVALID_ARGUMENT and syntax characters with plain results', async () => {
      const user = await app().user();
      const box = await newMailbox(app(), user.key);
      for (const [path, query] of [
        ['/v1/search', { q: 'x'.repeat(10_000) }],
        ['/v1/search', { q: '" * : -' }],
        ['/v1/search', { q: '-only -negated' }],
        ['/v1/search', { q: 'before:someday x' }],
        [`/v1/mailboxes/${box.id}/emails`, { q: 'x'.repeat(10_000) }],
        [`/v1/mailboxes/${box.id}/emails`, { q: '***' }],
        [`/v1/mailboxes/${box.id}/files`, { q: '"', q_in: 'content' }],
        ['/api/v1/search', { q: '' }],
      ] as const) {
        const r = await app().request('GET', path, { key: user.key, query });
        expect(r.status, `${path} ${JSON.stringify(query).slice(0, 80)}: ${r.text}`).toBe(422);
        expect(r.text).toContain('INVALID_ARGUMENT');
      }
      for (const q of ['"unclosed', 'a*', 'NEAR(a b, 2)', 'subject:"x', "x' OR 1=1 --", 'x & y | !z', 'a:b:c', '(((', '\\']) {
        const r = await app().request('GET', '/v1/search', { key: user.key, query: { q } });
        expect([200, 422], `${q}: ${r.text}`).toContain(r.status);
        if (r.status === 200) expect(r.body.data.results).toEqual([]);
      }
    });
  },
  { CUBBY_SEARCH_EXTRACT_MAX_BYTES: String(MAX_BYTES), CUBBY_SEARCH_EXTRACT_TIMEOUT_MS: '20000' },
);
