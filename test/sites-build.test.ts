import { expect, it } from 'vitest';
import { describeEachDatabase } from './harness.ts';
import { dbOf } from './factories.ts';
import { mailboxWithAddress } from './smtp-helpers.ts';
import { insertEmailFile } from './upload-sessions-helpers.ts';
import { enablePublishing, insertFileRow, latestEmailText, newBucket, publishAndWait, publisher, siteFetch, uploadFolder } from './sites-helpers.ts';

// What a build puts in a site: exclusions, the home-page rules, auto-index pages and viewers,
// bundle reuse, and failures (publish_error plus the owner's notice).

async function site(app: () => any, files: Record<string, string | Buffer>, body: Record<string, unknown> = {}, bucketExtra: Record<string, unknown> = {}) {
  const u = await publisher(app());
  const bucket = await newBucket(app(), u.key, `Build ${Math.random().toString(36).slice(2, 8)}`, bucketExtra);
  await uploadFolder(app(), u.key, bucket.id, files);
  const p = await publishAndWait(app(), u.key, bucket.id, body);
  return { u, bucket, p };
}

describeEachDatabase('sites: builds', (app) => {
  it('excludes .workers/**, .env*, node_modules/**, lockfiles, executables and secrets, and received mail', async () => {
    const u = await publisher(app());
    const bucket = await newBucket(app(), u.key);
    // Types refused at upload may still be stored from before the rule (or by received mail): the build drops them again.
    for (const path of ['app/.env.local', 'bin/tool.exe', 'keys/id_rsa']) await insertFileRow(app(), bucket.id, u.accountId, path);
    await insertEmailFile(app(), bucket.id, u.accountId, '_email/2026/01/msg/message.json');
    await uploadFolder(app(), u.key, bucket.id, {
      'index.html': '<h1>home</h1>',
      'ok/page.html': '<p>kept</p>',
      '.workers/worker.js': 'secret worker',
      '.envrc': 'export X=1',
      'node_modules/lib/index.js': 'module',
      'deep/node_modules/x.js': 'module',
      'package-lock.json': '{}',
      'yarn.lock': '',
      'pnpm-lock.yaml': '',
      'tools/install.sh': '#!/bin/sh',
      'dist/setup.dmg': 'bin',
      'certs/server.crt': 'cert',
      '.git/config': '[core]',
      '.DS_Store': 'x',
    });
    const p = await publishAndWait(app(), u.key, bucket.id);
    expect(p.publish_state).toBe('ready');
    expect((await siteFetch(`${p.public_url}/ok/page.html`)).status).toBe(200);
    for (const path of ['.workers/worker.js', 'app/.env.local', '.envrc', 'node_modules/lib/index.js', 'deep/node_modules/x.js', 'package-lock.json', 'yarn.lock', 'pnpm-lock.yaml', 'tools/install.sh', 'dist/setup.dmg', 'certs/server.crt', '.git/config', '.DS_Store', 'bin/tool.exe', 'keys/id_rsa', '_email/2026/01/msg/message.json']) {
      expect((await siteFetch(`${p.public_url}/${path}`)).status, path).toBe(404);
    }
    const bundle = await dbOf(app()).selectFrom('site_bundles').selectAll().where('id', '=', (await dbOf(app()).selectFrom('publications').select('bundle_id').where('id', '=', p.id).executeTakeFirstOrThrow()).bundle_id!).executeTakeFirstOrThrow();
    expect(Number(bundle.excluded_count)).toBe(16);
    expect(bundle.home_kind).toBe('index');
  });

  it('home page: index.html, else index.htm, else a lone top-level HTML file', async () => {
    const a = await site(app, { 'index.html': '<h1>A</h1>', 'index.htm': '<h1>B</h1>' });
    expect((await siteFetch(a.p.public_url)).text).toContain('<h1>A</h1>');
    const b = await site(app, { 'index.htm': '<h1>htm home</h1>', 'about.html': 'x' });
    expect((await siteFetch(b.p.public_url)).text).toContain('htm home');
    const c = await site(app, { 'landing.html': '<h1>lone page</h1>', 'style.css': 'b{}', 'sub/other.html': 'nested' });
    const home = await siteFetch(c.p.public_url);
    expect(home.status).toBe(200);
    expect(home.text).toContain('lone page');
    // Folders with their own index answer at folder/ (and folder redirects there).
    const d = await site(app, { 'index.html': 'root', 'docs/index.html': '<p>docs home</p>' });
    const redirect = await siteFetch(`${d.p.public_url}/docs`);
    expect(redirect.status).toBe(301);
    expect(redirect.headers.location).toBe('/docs/');
    expect((await siteFetch(`${d.p.public_url}/docs/`)).text).toContain('docs home');
  });

  it('otherwise an auto-index page lists the files, with index.md (or README) rendered below; viewers for supported files', async () => {
    const { p } = await site(
      app,
      {
        'a.html': 'one',
        'b.html': 'two',
        'photo.png': Buffer.from('89504e470d0a1a0a', 'hex'),
        'report.pdf': '%PDF-1.4 fake',
        'notes.txt': 'plain <text> & more',
        'guide.md': '# Guide\n\nSome **bold** text.',
        'README.md': '# Readme title\n\n<script>alert(1)</script>\n\n[bad](javascript:alert(1))',
        'index.md': '# Index wins\n\nWelcome to *the* site.',
        'data/table.csv': 'a,b\n1,2',
        'archive.zip': 'PK',
      },
      {},
      { description: 'Quarterly <files>' },
    );
    const home = await siteFetch(p.public_url);
    expect(home.status).toBe(200);
    expect(home.headers['content-type']).toBe('text/html; charset=utf-8');
    for (const name of ['a.html', 'b.html', 'photo.png', 'report.pdf', 'notes.txt', 'archive.zip', 'data/']) expect(home.text).toContain(`>${name}<`);
    expect(home.text).toContain('href="photo.png?view"');
    expect(home.text).toContain('href="a.html"');
    expect(home.text).toContain('href="archive.zip"');
    // index.md is preferred over README; rendered Markdown, never raw HTML.
    expect(home.text).toContain('<h1>Index wins</h1>');
    expect(home.text).toContain('<em>the</em>');
    expect(home.text).not.toContain('Readme title');
    expect(home.text).toContain('Quarterly &lt;files&gt;');
    const folder = await siteFetch(`${p.public_url}/data/`);
    expect(folder.text).toContain('>table.csv<');

    const img = await siteFetch(`${p.public_url}/photo.png?view`);
    expect(img.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(img.text).toContain('<img class="view" src="photo.png"');
    expect((await siteFetch(`${p.public_url}/photo.png`)).headers['content-type']).toBe('image/png');
    expect((await siteFetch(`${p.public_url}/report.pdf?view`)).text).toContain('<iframe class="view" src="report.pdf"');
    expect((await siteFetch(`${p.public_url}/notes.txt?view`)).text).toContain('plain &lt;text&gt; &amp; more');
    const md = await siteFetch(`${p.public_url}/guide.md?view`);
    expect(md.text).toContain('<strong>bold</strong>');
  });

  it('README renders safely when there is no index.md; a template with every macro is used', async () => {
    const template = '<html><head><title>{{ title }}</title></head><body data-t="custom">{{account_logo}} {{account_name}} | {{description}} | {{theme_switch}} <main>{{  files  }}</main> {{unknown}}</body></html>';
    const { p } = await site(app, { 'x.txt': 'x', 'y.txt': 'y', 'README.md': '# Readme title\n\n<script>alert(1)</script>\n\n[bad](javascript:alert(1))', 'index.template.html': template }, {}, { description: 'About this' });
    const home = await siteFetch(p.public_url);
    expect(home.text).toContain('data-t="custom"');
    expect(home.text).toContain('<h1>Readme title</h1>');
    expect(home.text).not.toContain('<script>alert(1)</script>');
    expect(home.text).toContain('&lt;script&gt;');
    expect(home.text).not.toContain('href="javascript:');
    expect(home.text).toContain('About this');
    expect(home.text).toContain('class="theme-switch"');
    expect(home.text).toContain('class="account-logo"');
    expect(home.text).toContain('{{unknown}}');
    expect(home.text).not.toContain('index.template.html');
    expect((await siteFetch(`${p.public_url}/index.template.html`)).status).toBe(404);
  });

  it('a failing build sets publish_error and emails the owner; retry reuses the saved request', async () => {
    // The owner's address is a Cubby mailbox, so the notice can be read back through the API.
    const reader = await app().user();
    const inbox = await mailboxWithAddress(app(), reader);
    const owner = await app().user({ plan: 'paid', email: inbox.address });
    await enablePublishing(app(), owner.accountId);
    const bucket = await newBucket(app(), owner.key, 'Broken Site');
    await uploadFolder(app(), owner.key, bucket.id, { 'a.txt': 'a', 'b.txt': 'b', 'index.template.html': '<p>no listing macro</p>' });
    const failed = await publishAndWait(app(), owner.key, bucket.id, { site_mode: 'spa' });
    expect(failed).toMatchObject({ publish_state: 'failed', status: 'publishing', site_mode: 'spa' });
    expect(failed.publish_error).toContain('{{files}}');
    expect((await siteFetch(failed.public_url)).status).toBe(404);
    const mail = await latestEmailText(app(), reader.key, inbox.id);
    expect(mail?.subject).toBe('Publishing "Broken Site" failed');
    expect(mail?.text).toContain('{{files}}');

    const b = await app().request('GET', `/api/v1/buckets/${bucket.id}`, { key: owner.key });
    expect(b.body.data.bucket).toMatchObject({ published: false, public_url: null });

    await uploadFolder(app(), owner.key, bucket.id, { 'index.template.html': '<main>{{files}}</main>' });
    const retry = await app().request('POST', `/api/v1/buckets/${bucket.id}/publication/retry`, { key: owner.key, body: {} });
    expect(retry.status, retry.text).toBe(202);
    expect(retry.body.data.publication).toMatchObject({ publish_state: 'queued', site_mode: 'spa', publish_error: null });
    const { untilSettled } = await import('./sites-helpers.ts');
    const ready = await untilSettled(app(), owner.key, failed.id);
    expect(ready.publish_state).toBe('ready');
    expect((await siteFetch(ready.public_url)).text).toContain('<main>');
    const again = await app().request('POST', `/api/v1/buckets/${bucket.id}/publication/retry`, { key: owner.key, body: {} });
    expect(again.status).toBe(409);
    expect(again.body.error.code).toBe('PUBLICATION_NOT_RETRYABLE');
  });

  it('nothing to publish, or a missing root directory, fails the build with a clear error', async () => {
    const u = await publisher(app());
    const empty = await newBucket(app(), u.key);
    expect((await publishAndWait(app(), u.key, empty.id)).publish_error).toMatch(/no files/);
    const only = await newBucket(app(), u.key);
    await uploadFolder(app(), u.key, only.id, { 'node_modules/a.js': 'x' });
    expect((await publishAndWait(app(), u.key, only.id)).publish_error).toMatch(/all 1 files are excluded/);
    const rooted = await newBucket(app(), u.key);
    await uploadFolder(app(), u.key, rooted.id, { 'index.html': 'x' });
    expect((await publishAndWait(app(), u.key, rooted.id, { publication_root_directory: 'dist' })).publish_error).toMatch(/"dist" holds no files/);
  });

  it('publication_root_directory (field or metadata key) serves a folder; a settings-only change reuses the bundle', async () => {
    const u = await publisher(app());
    const bucket = await newBucket(app(), u.key, 'Rooted', { metadata: { publication_root_directory: 'site' } });
    await uploadFolder(app(), u.key, bucket.id, { 'site/index.html': '<h1>from site/</h1>', 'notes/private.txt': 'not served' });
    const p = await publishAndWait(app(), u.key, bucket.id);
    expect(p.publication_root_directory).toBe('site');
    expect((await siteFetch(p.public_url)).text).toContain('from site/');
    expect((await siteFetch(`${p.public_url}/notes/private.txt`)).status).toBe(404);
    const bundleOf = async () => (await dbOf(app()).selectFrom('publications').select('bundle_id').where('id', '=', p.id).executeTakeFirstOrThrow()).bundle_id;
    const first = await bundleOf();

    const spa = await publishAndWait(app(), u.key, bucket.id, { site_mode: 'spa' });
    expect(spa.site_mode).toBe('spa');
    expect(await bundleOf()).toBe(first);

    await uploadFolder(app(), u.key, bucket.id, { 'site/index.html': '<h1>changed</h1>' });
    await publishAndWait(app(), u.key, bucket.id);
    expect(await bundleOf()).not.toBe(first);
    expect((await siteFetch(p.public_url)).text).toContain('changed');
    // The old bundle's manifest is gone; its blobs are left to garbage collection.
    expect(await dbOf(app()).selectFrom('site_bundles').select('id').where('id', '=', first!).executeTakeFirst()).toBeUndefined();

    const whole = await publishAndWait(app(), u.key, bucket.id, { publication_root_directory: '' });
    expect(whole.publication_root_directory).toBe('');
    expect((await siteFetch(`${p.public_url}/notes/private.txt`)).status).toBe(200);
  });

  it('a sweeper recovers a build whose job is gone', async () => {
    const u = await publisher(app());
    const bucket = await newBucket(app(), u.key);
    await uploadFolder(app(), u.key, bucket.id, { 'index.html': 'swept' });
    const p = await publishAndWait(app(), u.key, bucket.id);
    const db = dbOf(app());
    // As if a worker died mid-build and its job was given up: processing, untouched for minutes, no live job.
    const row = await db.selectFrom('publications').selectAll().where('id', '=', p.id).executeTakeFirstOrThrow();
    await db.updateTable('jobs').set({ status: 'failed' }).where('id', '=', row.build_job_id!).execute();
    await db.updateTable('publications').set({ publish_state: 'processing', updated_at: new Date(Date.now() - 10 * 60_000).toISOString() }).where('id', '=', p.id).execute();
    const { sweepSites } = await import('../src/sites/tasks.ts');
    expect((await sweepSites(app().started.deps)).requeued).toBe(1);
    const { untilSettled } = await import('./sites-helpers.ts');
    const again = await untilSettled(app(), u.key, p.id);
    expect(again.publish_state).toBe('ready');
    expect(again.publish_completed_at > p.publish_completed_at).toBe(true);
    expect((await sweepSites(app().started.deps)).requeued).toBe(0);
  });

  it('blob garbage collection keeps what a bundle refers to and reclaims it after unpublishing', async () => {
    const u = await publisher(app());
    const bucket = await newBucket(app(), u.key);
    await uploadFolder(app(), u.key, bucket.id, { 'a.txt': 'alpha '.repeat(100), 'b.txt': 'beta' });
    const p = await publishAndWait(app(), u.key, bucket.id);
    const db = dbOf(app());
    const deps = app().started.deps;
    const bundleId = (await db.selectFrom('publications').select('bundle_id').where('id', '=', p.id).executeTakeFirstOrThrow()).bundle_id!;
    const generated = await db.selectFrom('site_files').select(['sha256', 'gzip_sha256', 'viewer_sha256']).where('bundle_id', '=', bundleId).execute();
    const listing = generated.find((g) => g.viewer_sha256 === null)!.sha256;
    const variant = generated.find((g) => g.gzip_sha256)!.gzip_sha256!;
    const { collectGarbageBlobs } = await import('../src/files/purge.service.ts');
    const later = new Date(Date.now() + 3 * 86_400_000);
    await collectGarbageBlobs(db, deps.blobs, later, 100_000);
    for (const sha of [listing, variant]) expect(await deps.blobs.exists(sha)).toBe(true);

    const del = await app().request('DELETE', `/api/v1/buckets/${bucket.id}/publication`, { key: u.key });
    expect(del.status).toBe(202);
    const { untilSettled } = await import('./sites-helpers.ts');
    expect((await untilSettled(app(), u.key, p.id)).status).toBe('unpublished');
    expect(await db.selectFrom('site_files').select('path').where('bundle_id', '=', bundleId).execute()).toEqual([]);
    await collectGarbageBlobs(db, deps.blobs, later, 100_000);
    for (const sha of [listing, variant]) expect(await deps.blobs.exists(sha)).toBe(false);
    // The bucket's own files are untouched.
    const file = await app().request('GET', `/api/v1/buckets/${bucket.id}/files/by_path`, { key: u.key, query: { path: 'a.txt' } });
    expect(file.status).toBeLessThan(400);
  });
});
