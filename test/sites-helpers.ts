import http from 'node:http';
import { createHash } from 'node:crypto';
import { expect } from 'vitest';
import type { TestApp, TestUser } from './harness.ts';
import { dbOf } from './factories.ts';
import { putBytes, sessionsOf } from './upload-sessions-helpers.ts';

// Publishing as the CLI does it: a bucket, a folder uploaded through a surface A upload session,
// POST …/publication, then GET /api/v1/publications/{id} until ready or failed. Sites are fetched
// over real HTTP from 127.0.0.1 with the site's Host header (Node does not resolve *.localhost).

export async function enablePublishing(app: TestApp, accountId: string, enabled = true) {
  await dbOf(app).updateTable('accounts').set({ website_publishing_enabled: enabled ? 1 : 0 }).where('id', '=', accountId).execute();
}

export async function publisher(app: TestApp, plan: 'free' | 'paid' = 'paid'): Promise<TestUser> {
  const u = await app.user({ plan });
  await enablePublishing(app, u.accountId);
  return u;
}

export async function newBucket(app: TestApp, key: string, title = `site ${Math.random().toString(36).slice(2, 8)}`, extra: Record<string, unknown> = {}) {
  const res = await app.request('POST', '/api/v1/buckets', { key, body: { bucket: { title, ...extra } } });
  expect(res.status, res.text).toBe(201);
  return res.body.data.bucket as { id: string; title: string };
}

function describeFile(path: string, bytes: Buffer) {
  return {
    path,
    name: path.split('/').pop(),
    byte_size: bytes.length,
    content_type: 'application/octet-stream',
    checksum: createHash('md5').update(bytes).digest('base64'),
    sha256: createHash('sha256').update(bytes).digest('hex'),
  };
}

/** Uploads a folder through one upload session: batches of 12, exact headers, finalize until done. */
export async function uploadFolder(app: TestApp, key: string, bucketId: string, files: Record<string, string | Buffer>, opts: { deleteMissing?: boolean } = {}) {
  const s = sessionsOf(app, 'A', key, bucketId);
  const entries = Object.entries(files).map(([p, c]) => [p, Buffer.isBuffer(c) ? c : Buffer.from(c)] as const);
  const start = await s.create({ expected_file_count: entries.length, delete_missing: opts.deleteMissing ?? false });
  expect(start.status, start.text).toBe(201);
  const id = s.data(start).session.id;
  for (let i = 0; i < entries.length; i += 12) {
    const batch = entries.slice(i, i + 12);
    const res = await s.uploads(id, batch.map(([p, b]) => describeFile(p, b)));
    expect(res.status, res.text).toBe(201);
    for (const u of res.body.data.uploads) await putBytes(u.upload, batch[u.input_index]![1] as any);
    const fb = await s.batch(id, 12);
    expect(fb.status, fb.text).toBe(200);
  }
  for (let n = 0; n < 20; n++) {
    const fin = await s.finalize(id, true);
    expect([200, 202], fin.text).toContain(fin.status);
    if (!fin.body.data.finalize_pending) return;
  }
  throw new Error('finalize never finished');
}

export async function publish(app: TestApp, key: string, bucketId: string, body: Record<string, unknown> = {}, preview = false) {
  const res = await app.request('POST', `/api/v1/buckets/${bucketId}/publication${preview ? '/preview' : ''}`, { key, body });
  expect(res.status, res.text).toBe(202);
  return res.body.data.publication;
}

/** Polls the publication as the CLI does, letting the worker run between reads instead of sleeping. */
export async function untilSettled(app: TestApp, key: string, publicationId: string) {
  for (let n = 0; n < 50; n++) {
    const res = await app.request('GET', `/api/v1/publications/${publicationId}`, { key });
    expect(res.status, res.text).toBe(200);
    const p = res.body.data.publication;
    if (!['queued', 'processing', 'unpublishing'].includes(p.publish_state)) return p;
    await app.started.deps.jobs.worker!.drain();
  }
  throw new Error('publication never settled');
}

export async function publishAndWait(app: TestApp, key: string, bucketId: string, body: Record<string, unknown> = {}, preview = false) {
  const p = await publish(app, key, bucketId, body, preview);
  return untilSettled(app, key, p.id);
}

export interface SiteResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
  text: string;
}

type SiteRequest = { method?: string; headers?: Record<string, string>; body?: string };

/** GET (or another method) of a site URL, connecting to 127.0.0.1 with the URL's Host header. */
export function siteFetch(url: string, opts: SiteRequest = {}): Promise<SiteResponse> {
  const u = new URL(url);
  return siteFetchRaw(u.origin, `${u.pathname}${u.search}`, opts);
}

/** The same with the request path sent exactly as given (no URL normalisation: for traversal tests). */
export function siteFetchRaw(origin: string, rawPath: string, opts: SiteRequest = {}): Promise<SiteResponse> {
  const u = new URL(origin);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: Number(u.port), path: rawPath, method: opts.method ?? 'GET', headers: { host: u.host, ...opts.headers }, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const body = Buffer.concat(chunks);
        resolve({ status: res.statusCode!, headers: res.headers, body, text: body.toString('utf8') });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    if (opts.body !== undefined) req.write(opts.body);
    req.end();
  });
}

export function form(values: Record<string, string>): { headers: Record<string, string>; body: string } {
  return { headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams(values).toString() };
}

/** The text of the newest email received by a Cubby mailbox (after the worker delivered it). */
export async function latestEmailText(app: TestApp, key: string, mailboxId: string): Promise<{ subject: string; text: string } | null> {
  await app.started.deps.jobs.worker!.drain();
  const list = await app.request('GET', `/v1/mailboxes/${mailboxId}/emails`, { key, query: { order: 'desc', limit: 1 } });
  expect(list.status, list.text).toBe(200);
  const first = list.body.data.emails[0];
  if (!first) return null;
  const detail = await app.request('GET', `/v1/mailboxes/${mailboxId}/emails/${first.id}`, { key });
  expect(detail.status, detail.text).toBe(200);
  return { subject: detail.body.data.email.subject, text: detail.body.data.email.body_text ?? '' };
}

/** A stored file the upload API would refuse today (written straight to the database). */
export async function insertFileRow(app: TestApp, mailboxId: string, accountId: string, path: string) {
  const { insertEmailFile } = await import('./upload-sessions-helpers.ts');
  await insertEmailFile(app, mailboxId, accountId, path);
}
