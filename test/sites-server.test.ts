import { gunzipSync, brotliDecompressSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DATABASES, describeEachDatabase, startTestApp, type TestApp } from './harness.ts';
import { expectError } from './factories.ts';
import { newBucket, publish, publishAndWait, publisher, siteFetch, untilSettled, uploadFolder } from './sites-helpers.ts';

// The sites server over real HTTP: caching and ranges, encodings, 404s, spa fallback, robots,
// and the lifecycle of a site (unpublish then archive, previews and their expiry).

const BIG_TEXT = 'Lorem ipsum dolor sit amet, consectetur adipiscing elit. '.repeat(200);

describeEachDatabase('sites: serving', (app) => {
  let p: any;
  beforeAll(async () => {
    const u = await publisher(app());
    const bucket = await newBucket(app(), u.key, 'Served');
    await uploadFolder(app(), u.key, bucket.id, {
      'index.html': `<html><body>${BIG_TEXT}</body></html>`,
      'assets/app.3f2a1b9c.js': `console.log(${JSON.stringify(BIG_TEXT)});`,
      'assets/index-BxK3a9Zq.css': `body{}/*${BIG_TEXT}*/`,
      'data.bin': Buffer.from(Array.from({ length: 1000 }, (_, i) => i % 256)),
      '404.html': '<h1>Custom missing page</h1>',
    });
    p = await publishAndWait(app(), u.key, bucket.id);
  });

  it('ETag and conditional GET, HEAD, Range', async () => {
    const first = await siteFetch(`${p.public_url}/data.bin`);
    expect(first.status).toBe(200);
    expect(first.headers['accept-ranges']).toBe('bytes');
    expect(first.headers['content-length']).toBe('1000');
    const etag = first.headers.etag!;
    expect(etag).toMatch(/^"[0-9a-f]{40}"$/);
    const again = await siteFetch(`${p.public_url}/data.bin`, { headers: { 'if-none-match': etag } });
    expect(again.status).toBe(304);
    expect(again.body.length).toBe(0);
    const head = await siteFetch(`${p.public_url}/data.bin`, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(head.headers['content-length']).toBe('1000');
    const part = await siteFetch(`${p.public_url}/data.bin`, { headers: { range: 'bytes=10-19' } });
    expect(part.status).toBe(206);
    expect(part.headers['content-range']).toBe('bytes 10-19/1000');
    expect([...part.body]).toEqual(Array.from({ length: 10 }, (_, i) => 10 + i));
    expect((await siteFetch(`${p.public_url}/data.bin`, { headers: { range: 'bytes=-5' } })).body.length).toBe(5);
    const bad = await siteFetch(`${p.public_url}/data.bin`, { headers: { range: 'bytes=5000-' } });
    expect(bad.status).toBe(416);
    expect(bad.headers['content-range']).toBe('bytes */1000');
  });

  it('gzip and brotli variants made at build time; identity when not accepted', async () => {
    const br = await siteFetch(p.public_url, { headers: { 'accept-encoding': 'gzip, deflate, br' } });
    expect(br.headers['content-encoding']).toBe('br');
    expect(br.headers.vary).toBe('Accept-Encoding');
    expect(brotliDecompressSync(br.body).toString()).toContain('Lorem ipsum');
    const gz = await siteFetch(p.public_url, { headers: { 'accept-encoding': 'gzip' } });
    expect(gz.headers['content-encoding']).toBe('gzip');
    expect(gunzipSync(gz.body).toString()).toContain('Lorem ipsum');
    expect(gz.headers.etag).not.toBe(br.headers.etag);
    const plain = await siteFetch(p.public_url, { headers: { 'accept-encoding': 'br;q=0, identity' } });
    expect(plain.headers['content-encoding']).toBeUndefined();
    expect(plain.text).toContain('Lorem ipsum');
    // A 304 for a compressed representation.
    expect((await siteFetch(p.public_url, { headers: { 'accept-encoding': 'br', 'if-none-match': br.headers.etag! } })).status).toBe(304);
  });

  it('long-lived caching for hashed assets only; HTML is revalidated', async () => {
    expect((await siteFetch(`${p.public_url}/assets/app.3f2a1b9c.js`)).headers['cache-control']).toBe('public, max-age=31536000, immutable');
    expect((await siteFetch(`${p.public_url}/assets/index-BxK3a9Zq.css`)).headers['cache-control']).toBe('public, max-age=31536000, immutable');
    expect((await siteFetch(p.public_url)).headers['cache-control']).toBe('public, max-age=0, must-revalidate');
    expect((await siteFetch(`${p.public_url}/data.bin`)).headers['cache-control']).toBe('public, max-age=0, must-revalidate');
  });

  it('404: the site\'s own 404.html, with headers; unknown hosts and methods', async () => {
    const missing = await siteFetch(`${p.public_url}/nope/here`);
    expect(missing.status).toBe(404);
    expect(missing.text).toContain('Custom missing page');
    expect(missing.headers['x-content-type-options']).toBe('nosniff');
    const port = app().started.ports.sites;
    const unknown = await siteFetch(`http://no-such-site-here.localhost:${port}/`);
    expect(unknown.status).toBe(404);
    expect(unknown.headers['x-robots-tag']).toBe('noindex');
    expect((await siteFetch(`http://127.0.0.1:${port}/`)).status).toBe(404);
    expect((await siteFetch(p.public_url, { method: 'DELETE' })).status).toBe(405);
    expect((await siteFetch(`${p.public_url}/..%2f..%2fetc/passwd`)).status).toBe(400);
    // A permanent public site is indexable: no robots file of ours, no noindex.
    expect((await siteFetch(`${p.public_url}/robots.txt`)).status).toBe(404);
  });
});

describeEachDatabase('sites: spa, unpublish and archive', (app) => {
  it('spa: unknown routes fall back to the entry page; missing assets stay 404', async () => {
    const u = await publisher(app());
    const bucket = await newBucket(app(), u.key);
    await uploadFolder(app(), u.key, bucket.id, { 'index.html': '<div id="app">SPA shell</div>', 'main.js': 'x' });
    const p = await publishAndWait(app(), u.key, bucket.id, { site_mode: 'spa' });
    const deep = await siteFetch(`${p.public_url}/users/42/settings`);
    expect(deep.status).toBe(200);
    expect(deep.text).toContain('SPA shell');
    expect((await siteFetch(`${p.public_url}/missing.js`)).status).toBe(404);
    const staticSite = await publishAndWait(app(), u.key, bucket.id, { site_mode: 'static' });
    expect((await siteFetch(`${staticSite.public_url}/users/42/settings`)).status).toBe(404);
    // site_type website is accepted; retired modes are refused.
    expect((await app().request('POST', `/api/v1/buckets/${bucket.id}/publication`, { key: u.key, body: { site_type: 'website' } })).status).toBe(202);
    expectError(await app().request('POST', `/api/v1/buckets/${bucket.id}/publication`, { key: u.key, body: { site_type: 'app' } }), 'A', 422, 'INVALID_ARGUMENT');
  });

  it('unpublish: unpublishing then unpublished; the site answers 404 at once; archive waits for it', async () => {
    const u = await publisher(app());
    const bucket = await newBucket(app(), u.key);
    await uploadFolder(app(), u.key, bucket.id, { 'index.html': 'live' });
    const p = await publishAndWait(app(), u.key, bucket.id);
    expect((await siteFetch(p.public_url)).status).toBe(200);
    const read = await app().request('GET', `/api/v1/buckets/${bucket.id}`, { key: u.key });
    expect(read.body.data.bucket.archive).toMatchObject({ allowed: false, blocked_reason: 'website_published', required_action: 'unpublish_first' });
    const blocked = await app().request('POST', `/api/v1/buckets/${bucket.id}/archive`, { key: u.key, body: {} });
    expectError(blocked, 'A', 409, 'BUCKET_PUBLISHED');

    const del = await app().request('DELETE', `/api/v1/buckets/${bucket.id}/publication`, { key: u.key });
    expect(del.status, del.text).toBe(202);
    expect(del.body.data.publication).toMatchObject({ status: 'unpublishing', publish_state: 'unpublishing' });
    // The site stops answering with the request; the clean-up job may already have finished.
    expect((await siteFetch(p.public_url)).status).toBe(404);

    const done = await untilSettled(app(), u.key, p.id);
    expect(done).toMatchObject({ status: 'unpublished', publish_state: 'unpublished' });
    expect(done.unpublished_at).toBeTruthy();
    const after = await app().request('GET', `/api/v1/buckets/${bucket.id}`, { key: u.key });
    expect(after.body.data.bucket).toMatchObject({ published: false, public_url: null });
    const archived = await app().request('POST', `/api/v1/buckets/${bucket.id}/archive`, { key: u.key, body: {} });
    expect(archived.status, archived.text).toBe(200);
    expect(archived.body.data.bucket.archived).toBe(true);
    // An archived bucket cannot be published.
    expectError(await app().request('POST', `/api/v1/buckets/${bucket.id}/publication`, { key: u.key, body: {} }), 'A', 409, 'MAILBOX_ARCHIVED');
  });
});

for (const kind of DATABASES) {
  describe(`sites: previews and their expiry [${kind}]`, () => {
    let clock = Date.now();
    let app: TestApp;
    beforeAll(async () => {
      app = await startTestApp(kind, {}, { now: () => new Date(clock) });
    });
    afterAll(async () => {
      await app?.stop();
    });

    it('a preview is public, noindex, at preview-<slug>, expires 24 h after each run, and never touches the main site', async () => {
      const u = await publisher(app, 'free');
      const bucket = await newBucket(app, u.key, 'Preview Me');
      await uploadFolder(app, u.key, bucket.id, { 'index.html': 'version one' });
      const main = await publishAndWait(app, u.key, bucket.id, { slug_suggestions: ['preview-me', 'pv-site'] });
      expect(main.public_url).toContain('//pv-site.localhost:');

      await uploadFolder(app, u.key, bucket.id, { 'index.html': 'version two' });
      expectError(await app.request('POST', `/api/v1/buckets/${bucket.id}/publication/preview`, { key: u.key, body: { access_mode: 'password' } }), 'A', 422, 'INVALID_ARGUMENT');
      const queued = await publish(app, u.key, bucket.id, {}, true);
      expect(queued.public_url).toBe(main.public_url.replace('//pv-site.', '//preview-pv-site.'));
      expect(Date.parse(queued.expires_at) - clock).toBe(24 * 3600 * 1000);
      const preview = await untilSettled(app, u.key, queued.id);
      expect(preview).toMatchObject({ kind: 'preview', publish_state: 'ready', access_mode: 'public', noindex: true });
      const seen = await siteFetch(preview.public_url);
      expect(seen.text).toBe('version two');
      expect(seen.headers['x-robots-tag']).toBe('noindex');
      expect((await siteFetch(`${preview.public_url}/robots.txt`)).text).toBe('User-agent: *\nDisallow: /\n');
      // The main site still serves its own bundle and is indexable.
      const mainPage = await siteFetch(main.public_url);
      expect(mainPage.text).toBe('version one');
      expect(mainPage.headers['x-robots-tag']).toBeUndefined();
      // Previews do not count as live sites: the main publication is unchanged.
      const mainAgain = await app.request('GET', `/api/v1/publications/${main.id}`, { key: u.key });
      expect(mainAgain.body.data.publication).toMatchObject({ publish_state: 'ready', publish_completed_at: main.publish_completed_at });

      clock += 23 * 3600 * 1000;
      // Re-running opens a new window and keeps the slug.
      const rerun = await publishAndWait(app, u.key, bucket.id, {}, true);
      expect(rerun.id).toBe(preview.id);
      expect(rerun.public_url).toBe(preview.public_url);
      expect(Date.parse(rerun.expires_at)).toBe(clock + 24 * 3600 * 1000);
      clock += 2 * 3600 * 1000;
      expect((await siteFetch(preview.public_url)).status).toBe(200);
      // The worker's recurring sites.sweep follows the app's clock: past the preview's expiry it is
      // due within a second and could end the preview before the test's own sweep counts it.
      await app.started.deps.jobs.worker!.stop();
      clock += 23 * 3600 * 1000;
      expect((await siteFetch(preview.public_url)).status).toBe(404);
      expect((await app.request('GET', `/api/v1/publications/${preview.id}`, { key: u.key })).body.data.publication.expired).toBe(true);
      const { sweepSites } = await import('../src/sites/tasks.ts');
      expect((await sweepSites(app.started.deps)).expired).toBe(1);
      const swept = await app.request('GET', `/api/v1/publications/${preview.id}`, { key: u.key });
      expect(swept.body.data.publication).toMatchObject({ status: 'unpublished', publish_state: 'unpublished' });
      expect((await siteFetch(main.public_url)).text).toBe('version one');
    });
  });
}
