import { execFile } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { expect, it } from 'vitest';
import { describeEachDatabase } from './harness.ts';
import { expectError } from './factories.ts';
import { newBucket, publish, publishAndWait, publisher, siteFetch, untilSettled, uploadFolder } from './sites-helpers.ts';

// Publishing as the existing CLI does it, and the publication API around it.

describeEachDatabase('sites: publication API', (app) => {
  it('the CLI flow: upload a folder through an upload session, publish, poll until ready, fetch public_url', async () => {
    const u = await publisher(app());
    const bucket = await newBucket(app(), u.key, 'Launch Notes');
    await uploadFolder(app(), u.key, bucket.id, {
      'index.html': '<!doctype html><title>Launch</title><h1>Hello from Cubby</h1><link rel="stylesheet" href="style.css">',
      'style.css': 'body { color: #123456; }\n'.repeat(40),
      'img/logo.png': Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex'),
    });
    const queued = await publish(app(), u.key, bucket.id, { site_mode: 'static', access_mode: 'public', slug_suggestions: ['launch-notes'] });
    expect(queued).toMatchObject({ bucket_id: bucket.id, status: 'publishing', publish_state: 'queued', publish_pending: true, public_slug: 'launch-notes', site_mode: 'static', access_mode: 'public', expires_at: null, publish_error: null });
    expect(queued.id).toMatch(/^pub_[A-Za-z0-9]+$/);
    expect(queued.public_url).toBe(`http://launch-notes.localhost:${app().started.ports.sites}`);
    // Not served before the build is ready.
    expect((await siteFetch(queued.public_url)).status).toBe(404);

    const ready = await untilSettled(app(), u.key, queued.id);
    expect(ready).toMatchObject({ status: 'published', publish_state: 'ready', publish_pending: false, publish_error: null });
    expect(ready.publish_completed_at).toBeTruthy();
    expect(ready.share_text).toContain(queued.public_url);

    const home = await siteFetch(ready.public_url);
    expect(home.status).toBe(200);
    expect(home.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(home.text).toContain('Hello from Cubby');
    expect(home.headers['x-content-type-options']).toBe('nosniff');
    expect(home.headers['referrer-policy']).toBe('strict-origin-when-cross-origin');
    expect(home.headers['x-robots-tag']).toBeUndefined();
    const css = await siteFetch(`${ready.public_url}/style.css`);
    expect(css.headers['content-type']).toBe('text/css; charset=utf-8');
    const png = await siteFetch(`${ready.public_url}/img/logo.png`);
    expect(png.headers['content-type']).toBe('image/png');

    const b = await app().request('GET', `/api/v1/buckets/${bucket.id}`, { key: u.key });
    expect(b.body.data.bucket).toMatchObject({ published: true, public_url: ready.public_url });
    const list = await app().request('GET', '/api/v1/publications', { key: u.key });
    expect(list.body.data.publications.map((p: any) => p.id)).toContain(ready.id);
  });

  it('new accounts have publishing disabled: WEBSITE_PUBLISHING_DISABLED, not an upgrade prompt', async () => {
    const u = await app().user({ plan: 'paid' });
    const bucket = await newBucket(app(), u.key);
    const status = await app().request('GET', '/api/v1/status', { key: u.key });
    expect(status.body.data.features.website_publishing).toBe(false);
    const res = await app().request('POST', `/api/v1/buckets/${bucket.id}/publication`, { key: u.key, body: {} });
    expectError(res, 'A', 403, 'WEBSITE_PUBLISHING_DISABLED');
    expect(res.body.error.upgrade_url).toBeUndefined();
  });

  it('the operator command `cubby admin set-publishing` switches publishing on and off (off takes the sites down)', async () => {
    const u = await app().user({ plan: 'paid' });
    const bucket = await newBucket(app(), u.key);
    await uploadFolder(app(), u.key, bucket.id, { 'index.html': 'switched' });
    const run = (enabled: string) =>
      new Promise<{ code: number; out: any }>((resolve) => {
        const env = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? os.tmpdir(), ...app().env };
        execFile(process.execPath, [path.resolve(import.meta.dirname, '../bin/cubby.js'), 'admin', 'set-publishing', '--account', u.accountId, '--enabled', enabled], { env, timeout: 60_000 }, (err, stdout) =>
          resolve({ code: err ? 1 : 0, out: stdout.trim() ? JSON.parse(stdout.trim().split('\n').pop()!) : null }),
        );
      });
    const on = await run('true');
    expect(on).toEqual({ code: 0, out: { id: u.accountId, website_publishing_enabled: true } });
    expect((await app().request('GET', '/api/v1/status', { key: u.key })).body.data.features.website_publishing).toBe(true);
    const p = await publishAndWait(app(), u.key, bucket.id);
    expect((await siteFetch(p.public_url)).status).toBe(200);
    expect((await run('false')).out.website_publishing_enabled).toBe(false);
    // Another process changed it: this server notices within its one-second cache.
    let status = 200;
    for (let i = 0; i < 100 && status === 200; i++) {
      await new Promise((r) => setTimeout(r, 50));
      status = (await siteFetch(p.public_url)).status;
    }
    expect(status).toBe(404);
    expect((await run('maybe')).code).toBe(1);
  }, 180_000);
});
