// Publishing the benchmark site (bench/sites.ts, bench/sites-instructions.ts): a bucket with the given
// files, uploaded through an upload session and published as a public static site with slug `127`.
import { createHash } from 'node:crypto';
import type { client } from './lib.ts';
import { send } from './lib.ts';

const md5 = (b: Buffer) => createHash('md5').update(b).digest('base64');
const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

/** Uploads the files through an upload session and publishes them; resolves with the site URL. */
export async function publishSite(api: ReturnType<typeof client>, files: Record<string, Buffer>): Promise<string> {
  const bucket = (await api('POST', '/api/v1/buckets', { bucket: { title: `bench site ${Date.now()}` } })).data.bucket;
  const base = `/api/v1/buckets/${bucket.id}/upload_sessions`;
  const session = (await api('POST', base, { expected_file_count: Object.keys(files).length, delete_missing: false })).data.upload_session;
  const entries = Object.entries(files);
  const declared = await api('POST', `${base}/${session.id}/uploads`, {
    files: entries.map(([p, b]) => ({ path: p, name: p, byte_size: b.length, content_type: p.endsWith('.html') ? 'text/html' : 'application/octet-stream', checksum: md5(b), sha256: sha256(b) })),
  });
  for (const u of declared.data.uploads) {
    const res = await send('PUT', u.upload.url, u.upload.headers, entries[u.input_index]![1]);
    if (res.status !== 200) throw new Error(`PUT ${res.status} ${res.text}`);
  }
  await api('POST', `${base}/${session.id}/finalize_batch`, { limit: 12 });
  while ((await api('POST', `${base}/${session.id}/finalize`, { complete: true })).data.finalize_pending);
  let p = (await api('POST', `/api/v1/buckets/${bucket.id}/publication`, { site_mode: 'static', access_mode: 'public', slug_suggestions: ['127'] })).data.publication;
  if (p.public_slug !== '127') throw new Error(`slug 127 was not free: ${p.public_slug}`);
  // The CLI polls every 2 s; a bench may poll faster.
  while (p.publish_state === 'queued' || p.publish_state === 'processing') {
    await new Promise((r) => setTimeout(r, 100));
    p = (await api('GET', `/api/v1/publications/${p.id}`)).data.publication;
  }
  if (p.publish_state !== 'ready') throw new Error(`build ${p.publish_state}: ${p.publish_error}`);
  return `${p.public_url}/`;
}

