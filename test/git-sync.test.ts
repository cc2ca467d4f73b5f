import { createHmac, randomBytes } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DATABASES, startTestApp, type TestApp } from './harness.ts';
import { makeCert, type TestCert } from './webhook-receiver.ts';
import { GitServer } from './git-server.ts';
import { dbOf } from './factories.ts';
import { insertEmailFile } from './upload-sessions-helpers.ts';
import { newBucket, publishAndWait, publisher, siteFetch, uploadFolder } from './sites-helpers.ts';
import { runSync, scheduleSyncs } from '../src/gitsync/sync.ts';
import { RetryJobAt } from '../src/jobs/worker.ts';
import { Cubby } from '../packages/sdk/src/node.ts';

// Git sync end to end: a real git smart-HTTP server (git http-backend behind HTTPS) the test
// pushes commits to; the app pulls them with isomorphic-git on connect, on POST …/sync, on a
// signed push webhook and on its schedule. Every sync that changes files is one mailbox version.

let cert: TestCert;
let server: GitServer;
const env: Record<string, string> = {};
const clock = { offsetMs: 0 };

beforeAll(async () => {
  cert = await makeCert();
  server = new GitServer(cert);
  await server.start();
  Object.assign(env, {
    CUBBY_GIT_ALLOW_PRIVATE: 'true',
    CUBBY_GIT_CA_FILE: cert.certFile,
    CUBBY_GIT_MAX_FILES: '20',
    CUBBY_GIT_MAX_FILE_BYTES: '10000',
    CUBBY_GIT_MAX_REPO_BYTES: '100000',
  });
});
afterAll(async () => {
  await server?.stop();
});

let repoCount = 0;
const repoName = () => `repo${repoCount++}-${randomBytes(3).toString('hex')}`;

async function drain(app: TestApp) {
  await app.started.deps.jobs.worker!.drain();
}

async function state(app: TestApp, key: string, bucketId: string) {
  const res = await app.request('GET', `/api/v1/buckets/${bucketId}/github_sync`, { key });
  expect(res.status, res.text).toBe(200);
  return res.body.data;
}

async function connect(app: TestApp, key: string, bucketId: string, body: Record<string, unknown>, status = 201) {
  const res = await app.request('PUT', `/api/v1/buckets/${bucketId}/github_sync`, { key, body });
  expect(res.status, res.text).toBe(status);
  return res.body.data;
}

async function syncNow(app: TestApp, key: string, bucketId: string) {
  const res = await app.request('POST', `/api/v1/buckets/${bucketId}/github_sync/sync`, { key, body: {} });
  expect(res.status, res.text).toBe(202);
  expect(res.body.data.github_sync.sync_state).toBe('queued');
  await drain(app);
  return (await state(app, key, bucketId)).github_sync;
}

/** Live files of the bucket: path → content. */
async function tree(app: TestApp, bucketId: string): Promise<Record<string, string>> {
  const rows = await dbOf(app)
    .selectFrom('files')
    .innerJoin('file_versions', 'file_versions.id', 'files.current_version_id')
    .select(['files.live_path', 'file_versions.sha256'])
    .where('files.mailbox_id', '=', bucketId)
    .where('files.live_path', 'is not', null)
    .execute();
  const out: Record<string, string> = {};
  for (const r of rows) {
    if (r.live_path!.startsWith('_email/')) {
      out[r.live_path!] = '(email)';
      continue;
    }
    const chunks: Buffer[] = [];
    for await (const c of await app.started.deps.blobs.read(r.sha256!)) chunks.push(c as Buffer);
    out[r.live_path!] = Buffer.concat(chunks).toString('utf8');
  }
  return out;
}

async function versionNumber(app: TestApp, key: string, bucketId: string): Promise<number> {
  const res = await app.request('GET', `/api/v1/buckets/${bucketId}`, { key });
  expect(res.status, res.text).toBe(200);
  return res.body.data.bucket.version_number;
}

function sign(secret: string, body: string, kind: 'github' | 'gitea'): Record<string, string> {
  const hex = createHmac('sha256', secret).update(body).digest('hex');
  return kind === 'github' ? { 'x-hub-signature-256': `sha256=${hex}`, 'x-github-event': 'push' } : { 'x-gitea-signature': hex, 'x-gitea-event': 'push' };
}

/** describeEachDatabase with the suite's clock (the schedule test moves it forward). */
function describeGit(name: string, body: (app: () => TestApp) => void) {
  for (const kind of DATABASES) {
    // Each test runs several syncs, and drain() also waits for the text extraction of every file
    // written: more than the default 30 s when the machine is loaded.
    describe(`${name} [${kind}]`, { timeout: 120_000 }, () => {
      let current: TestApp | undefined;
      beforeAll(async () => {
        current = await startTestApp(kind, env, { now: () => new Date(Date.now() + clock.offsetMs) });
      });
      afterEach(() => current?.assertContract());
      afterAll(async () => {
        await current?.stop();
      });
      body(() => current!);
    });
  }
}

describeGit('git sync', (app) => {
    it('connects, pulls the branch as one version, then adds, changes and deletes as one version per sync; _email/ and other files untouched', async () => {
      const u = await app().user();
      const bucket = await newBucket(app(), u.key);
      await insertEmailFile(app(), bucket.id, u.accountId, '_email/2026/11/msg1/message.json');
      await uploadFolder(app(), u.key, bucket.id, { 'notes/mine.txt': 'uploaded by a person' });
      const name = repoName();
      const repo = await server.repo(name);
      const c1 = await repo.commit({ 'index.html': '<h1>v1</h1>', 'docs/a.md': 'a1', 'docs/b.md': 'b1', '_email/evil.json': 'x', '.env': 'SECRET=1' }, 'first');

      const before = await versionNumber(app(), u.key, bucket.id);
      const connected = await connect(app(), u.key, bucket.id, { repository_url: server.url(name), branch: 'main' });
      expect(connected.webhook_secret).toMatch(/^gitwh_/);
      expect(connected.github_sync).toMatchObject({ branch: 'main', sync_state: 'queued', token_configured: false, auto_publish: false, error: null });
      await drain(app());
      const s1 = (await state(app(), u.key, bucket.id)).github_sync;
      expect(s1).toMatchObject({ sync_state: 'synced', last_commit: c1, last_trigger: 'connect', error: null, synced_files_count: 3 });
      expect(s1.skipped_files).toEqual(expect.arrayContaining([{ path: '_email/evil.json', reason: 'email_area' }, { path: '.env', reason: 'forbidden_type' }]));
      expect(await versionNumber(app(), u.key, bucket.id)).toBe(before + 1);
      expect(await tree(app(), bucket.id)).toEqual({ 'index.html': '<h1>v1</h1>', 'docs/a.md': 'a1', 'docs/b.md': 'b1', 'notes/mine.txt': 'uploaded by a person', '_email/2026/11/msg1/message.json': '(email)' });

      // The bucket shows the connection in brief.
      const b = await app().request('GET', `/api/v1/buckets/${bucket.id}`, { key: u.key });
      expect(b.body.data.bucket.github_sync).toMatchObject({ repository_url: connected.github_sync.repository_url, branch: 'main', sync_state: 'synced', last_commit: c1, auto_publish: false, error: null });
      expect(b.body.data.bucket.github_sync_setup).toEqual({ eligible: true, settings_url: expect.stringContaining(bucket.id), blocked_reason: null });

      // Add, change and delete in one push: one new version.
      const c2 = await repo.commit({ 'docs/c.md': 'c1', 'docs/a.md': 'a2', 'docs/b.md': null }, 'second');
      const s2 = await syncNow(app(), u.key, bucket.id);
      expect(s2).toMatchObject({ sync_state: 'synced', last_commit: c2, last_trigger: 'manual', synced_files_count: 3 });
      expect(await versionNumber(app(), u.key, bucket.id)).toBe(before + 2);
      expect(await tree(app(), bucket.id)).toEqual({ 'index.html': '<h1>v1</h1>', 'docs/a.md': 'a2', 'docs/c.md': 'c1', 'notes/mine.txt': 'uploaded by a person', '_email/2026/11/msg1/message.json': '(email)' });
      const version = await dbOf(app()).selectFrom('mailbox_versions').selectAll().where('id', '=', s2.last_version_id).executeTakeFirstOrThrow();
      expect(version).toMatchObject({ action: 'git.sync', files_changed: 3 });
      const written = await dbOf(app()).selectFrom('file_versions').select(['path', 'deleted', 'created_by_system']).where('mailbox_version_id', '=', s2.last_version_id).orderBy('path').execute();
      expect(written.map((w) => [w.path, Number(w.deleted)])).toEqual([['docs/a.md', 0], ['docs/b.md', 1], ['docs/c.md', 0]]);

      // Nothing new: no version.
      const s3 = await syncNow(app(), u.key, bucket.id);
      expect(s3.sync_state).toBe('synced');
      expect(await versionNumber(app(), u.key, bucket.id)).toBe(before + 2);

      // A file the person changed in the bucket is put back to the repository's content on the next sync.
      await uploadFolder(app(), u.key, bucket.id, { 'docs/a.md': 'edited here' });
      await syncNow(app(), u.key, bucket.id);
      expect((await tree(app(), bucket.id))['docs/a.md']).toBe('a2');
    });

    it('syncs a subdirectory as the bucket root', async () => {
      const u = await app().user();
      const bucket = await newBucket(app(), u.key);
      const name = repoName();
      const repo = await server.repo(name);
      await repo.commit({ 'README.md': 'top', 'site/index.html': 'site home', 'site/css/s.css': 'body{}' });
      // Through the SDK, as an integration would.
      const cubby = new Cubby({ baseUrl: app().base, apiKey: u.key });
      const connected = await cubby.gitSync.connect(bucket.id, { repository_url: server.url(name), subdirectory: '/site/' });
      expect(connected.webhook_secret).toMatch(/^gitwh_/);
      await drain(app());
      expect((await cubby.gitSync.get(bucket.id)).github_sync).toMatchObject({ subdirectory: 'site', sync_state: 'synced' });
      expect((await cubby.gitSync.sync(bucket.id)).sync_state).toBe('queued');
      await drain(app());
      expect(await tree(app(), bucket.id)).toEqual({ 'index.html': 'site home', 'css/s.css': 'body{}' });
    });

    it('push webhook: a GitHub or Gitea signature queues a sync; a missing or wrong one changes nothing', async () => {
      const u = await app().user();
      const bucket = await newBucket(app(), u.key);
      const name = repoName();
      const repo = await server.repo(name);
      await repo.commit({ 'a.txt': '1' });
      const { webhook_secret: secret, github_sync } = await connect(app(), u.key, bucket.id, { repository_url: server.url(name) });
      expect(github_sync.webhook_url).toBe(`${app().base}/hooks/git/${bucket.id}`);
      await drain(app());
      const v1 = await versionNumber(app(), u.key, bucket.id);

      const c2 = await repo.commit({ 'a.txt': '2' });
      const body = JSON.stringify({ ref: 'refs/heads/main', after: c2 });
      const hook = `/hooks/git/${bucket.id}`;
      for (const headers of [{}, { 'x-hub-signature-256': `sha256=${'0'.repeat(64)}` }, sign('gitwh_wrong', body, 'github'), sign(secret, `${body} `, 'gitea'), { 'x-hub-signature-256': 'md5=abc' }]) {
        const bad = await app().request('POST', hook, { rawBody: body, headers: { 'content-type': 'application/json', ...headers } });
        expect(bad.status, bad.text).toBe(401);
        expect(bad.body.error.code).toBe('GIT_WEBHOOK_SIGNATURE_INVALID');
      }
      await drain(app());
      expect(await versionNumber(app(), u.key, bucket.id)).toBe(v1);
      expect((await state(app(), u.key, bucket.id)).github_sync.sync_state).toBe('synced');

      const ok = await app().request('POST', hook, { rawBody: body, headers: { 'content-type': 'application/json', ...sign(secret, body, 'github') } });
      expect(ok.status, ok.text).toBe(202);
      expect(ok.body.data).toEqual({ queued: true, reason: null });
      await drain(app());
      expect((await state(app(), u.key, bucket.id)).github_sync).toMatchObject({ sync_state: 'synced', last_commit: c2, last_trigger: 'webhook' });
      expect((await tree(app(), bucket.id))['a.txt']).toBe('2');

      // Gitea's header, form-less JSON as Gitea sends it.
      const c3 = await repo.commit({ 'b.txt': 'new' });
      const giteaBody = JSON.stringify({ ref: 'refs/heads/main', after: c3, repository: { full_name: 'x/y' } });
      const gitea = await app().request('POST', hook, { rawBody: giteaBody, headers: { 'content-type': 'application/json', ...sign(secret, giteaBody, 'gitea') } });
      expect(gitea.status, gitea.text).toBe(202);
      await drain(app());
      expect((await state(app(), u.key, bucket.id)).github_sync.last_commit).toBe(c3);
      expect(await versionNumber(app(), u.key, bucket.id)).toBe(v1 + 2);

      // A push to another branch and a ping are acknowledged without a sync.
      const other = JSON.stringify({ ref: 'refs/heads/feature' });
      const skip = await app().request('POST', hook, { rawBody: other, headers: { 'content-type': 'application/json', ...sign(secret, other, 'github') } });
      expect(skip.status).toBe(200);
      expect(skip.body.data).toEqual({ queued: false, reason: 'other_branch' });
      const ping = await app().request('POST', hook, { rawBody: '{"zen":"x"}', headers: { 'content-type': 'application/json', ...sign(secret, '{"zen":"x"}', 'github'), 'x-github-event': 'ping' } });
      expect(ping.body.data).toEqual({ queued: false, reason: 'ping' });

      // Rotating the secret retires the old one.
      const rotated = await connect(app(), u.key, bucket.id, { repository_url: server.url(name), rotate_webhook_secret: true }, 200);
      expect(rotated.webhook_secret).toMatch(/^gitwh_/);
      expect(rotated.webhook_secret).not.toBe(secret);
      const stale = await app().request('POST', hook, { rawBody: body, headers: { 'content-type': 'application/json', ...sign(secret, body, 'github') } });
      expect(stale.status).toBe(401);
      await drain(app());

      // Unknown and disconnected buckets: 404.
      const unknown = await app().request('POST', '/hooks/git/bkt_doesnotexist', { rawBody: body, headers: { 'content-type': 'application/json', ...sign(secret, body, 'github') } });
      expect(unknown.status).toBe(404);
      expect(unknown.body.error.code).toBe('GIT_SYNC_NOT_CONNECTED');
    });

    it('auto_publish rebuilds the website after a sync, and the change shows on the site', async () => {
      const u = await publisher(app());
      const bucket = await newBucket(app(), u.key);
      const name = repoName();
      const repo = await server.repo(name);
      await repo.commit({ 'index.html': '<h1>first</h1>' });
      await connect(app(), u.key, bucket.id, { repository_url: server.url(name), auto_publish: true });
      await drain(app());
      const pub = await publishAndWait(app(), u.key, bucket.id);
      expect(pub.publish_state).toBe('ready');
      expect((await siteFetch(pub.public_url)).text).toContain('<h1>first</h1>');

      await repo.commit({ 'index.html': '<h1>second</h1>' });
      const s = await syncNow(app(), u.key, bucket.id);
      expect(s).toMatchObject({ sync_state: 'synced', auto_publish: true });
      await drain(app());
      const after = await app().request('GET', `/api/v1/publications/${pub.id}`, { key: u.key });
      expect(after.body.data.publication.publish_state).toBe('ready');
      expect((await siteFetch(pub.public_url)).text).toContain('<h1>second</h1>');
    });

    it('records a bad token, a missing branch or folder as the error state and changes nothing', async () => {
      const u = await app().user();
      const bucket = await newBucket(app(), u.key);
      const name = repoName();
      const repo = await server.repo(name);
      await repo.commit({ 'a.txt': 'ok' });
      server.token = 'right-token';
      try {
        await connect(app(), u.key, bucket.id, { repository_url: server.url(name), token: 'wrong-token' });
        await drain(app());
        const s1 = (await state(app(), u.key, bucket.id)).github_sync;
        expect(s1).toMatchObject({ sync_state: 'failed', token_configured: true, last_commit: null, error: { code: 'GIT_AUTH_FAILED' } });
        expect(s1.last_checked_at).not.toBeNull();
        expect(await tree(app(), bucket.id)).toEqual({});
        const b = await app().request('GET', `/api/v1/buckets/${bucket.id}`, { key: u.key });
        expect(b.body.data.bucket.github_sync).toMatchObject({ sync_state: 'failed', error: { code: 'GIT_AUTH_FAILED' } });

        await connect(app(), u.key, bucket.id, { repository_url: server.url(name), token: 'right-token' }, 200);
        await drain(app());
        expect((await state(app(), u.key, bucket.id)).github_sync).toMatchObject({ sync_state: 'synced', error: null });
        expect(await tree(app(), bucket.id)).toEqual({ 'a.txt': 'ok' });
        // The token is stored encrypted, never in the clear.
        const row = await dbOf(app()).selectFrom('git_syncs').selectAll().where('mailbox_id', '=', bucket.id).executeTakeFirstOrThrow();
        expect(JSON.stringify(row)).not.toContain('right-token');
        expect((await state(app(), u.key, bucket.id)).github_sync.token).toBeUndefined();
        // Reconnecting without a token keeps it for the same origin, and drops it for another one:
        // a stored token never goes to a host it was not given for.
        await connect(app(), u.key, bucket.id, { repository_url: server.url(name) }, 200);
        expect((await state(app(), u.key, bucket.id)).github_sync.token_configured).toBe(true);
        const elsewhere = new URL(server.url(name));
        elsewhere.port = String(Number(elsewhere.port) === 1 ? 2 : 1);
        await drain(app());
        await connect(app(), u.key, bucket.id, { repository_url: elsewhere.toString() }, 200);
        expect((await state(app(), u.key, bucket.id)).github_sync.token_configured).toBe(false);
        await drain(app());
        await connect(app(), u.key, bucket.id, { repository_url: server.url(name) }, 200);
        await drain(app());
        // Back on the first origin, the dropped token is not back: the server asks for one again.
        expect((await state(app(), u.key, bucket.id)).github_sync).toMatchObject({ sync_state: 'failed', token_configured: false, error: { code: 'GIT_AUTH_FAILED' } });
      } finally {
        server.token = null;
      }
      const v = await versionNumber(app(), u.key, bucket.id);

      await connect(app(), u.key, bucket.id, { repository_url: server.url(name), branch: 'nope' }, 200);
      await drain(app());
      expect((await state(app(), u.key, bucket.id)).github_sync).toMatchObject({ sync_state: 'failed', branch: 'nope', error: { code: 'GIT_BRANCH_NOT_FOUND' } });

      await connect(app(), u.key, bucket.id, { repository_url: server.url(name), branch: 'main', subdirectory: 'missing' }, 200);
      await drain(app());
      expect((await state(app(), u.key, bucket.id)).github_sync).toMatchObject({ sync_state: 'failed', error: { code: 'GIT_SUBDIRECTORY_NOT_FOUND' } });

      await connect(app(), u.key, bucket.id, { repository_url: `https://127.0.0.1:${server.port}/no-such-repo.git`, subdirectory: '' }, 200);
      await drain(app());
      expect((await state(app(), u.key, bucket.id)).github_sync).toMatchObject({ sync_state: 'failed', error: { code: 'GIT_REPOSITORY_NOT_FOUND' } });

      // A renamed repository answers with a redirect: not followed, and the message says what to do.
      server.redirects[`${name}-old`] = name;
      await connect(app(), u.key, bucket.id, { repository_url: server.url(`${name}-old`) }, 200);
      await drain(app());
      const moved = (await state(app(), u.key, bucket.id)).github_sync;
      expect(moved).toMatchObject({ sync_state: 'failed', error: { code: 'GIT_REPOSITORY_NOT_FOUND' } });
      expect(moved.error.message).toContain('redirect');
      expect(await versionNumber(app(), u.key, bucket.id)).toBe(v);
      expect(await tree(app(), bucket.id)).toEqual({ 'a.txt': 'ok' });
    });

    it('refuses repositories over the limits with their codes, the bucket unchanged', async () => {
      const u = await app().user();
      const bucket = await newBucket(app(), u.key);
      const cases: [Record<string, string | Buffer>, string][] = [
        [Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`f${i}.txt`, `file ${i}`])), 'GIT_TOO_MANY_FILES'],
        [{ 'big.bin': randomBytes(20_000) }, 'GIT_FILE_TOO_LARGE'],
        // 15 incompressible files of 9 000 bytes: each within the file limit, the download over 100 000 bytes.
        [Object.fromEntries(Array.from({ length: 15 }, (_, i) => [`r${i}.bin`, randomBytes(9_000)])), 'GIT_REPOSITORY_TOO_LARGE'],
      ];
      for (const [files, code] of cases) {
        const name = repoName();
        const repo = await server.repo(name);
        await repo.commit(files);
        await connect(app(), u.key, bucket.id, { repository_url: server.url(name) }, (await state(app(), u.key, bucket.id)).github_sync ? 200 : 201);
        await drain(app());
        expect((await state(app(), u.key, bucket.id)).github_sync, code).toMatchObject({ sync_state: 'failed', error: { code } });
        expect(await tree(app(), bucket.id)).toEqual({});
      }
    });

    it('the schedule checks connections due and pulls new commits', async () => {
      const u = await app().user();
      const bucket = await newBucket(app(), u.key);
      const name = repoName();
      const repo = await server.repo(name);
      await repo.commit({ 'a.txt': '1' });
      await connect(app(), u.key, bucket.id, { repository_url: server.url(name) });
      await drain(app());
      const c2 = await repo.commit({ 'a.txt': '2' });
      // Not due yet: nothing queued for this bucket.
      await scheduleSyncs(app().started.deps);
      await drain(app());
      expect((await state(app(), u.key, bucket.id)).github_sync.last_commit).not.toBe(c2);
      clock.offsetMs += 16 * 60_000;
      await scheduleSyncs(app().started.deps);
      await drain(app());
      expect((await state(app(), u.key, bucket.id)).github_sync).toMatchObject({ sync_state: 'synced', last_commit: c2, last_trigger: 'schedule' });
      expect((await tree(app(), bucket.id))['a.txt']).toBe('2');
    });

    it('two syncs of one bucket at once make one version; the later one is told to run again', async () => {
      const u = await app().user();
      const bucket = await newBucket(app(), u.key);
      const name = repoName();
      const repo = await server.repo(name);
      await repo.commit({ 'a.txt': '1' });
      await connect(app(), u.key, bucket.id, { repository_url: server.url(name), branch: 'nope' });
      await drain(app()); // fails: no such branch; the bucket holds nothing yet
      await dbOf(app()).updateTable('git_syncs').set({ branch: 'main' }).where('mailbox_id', '=', bucket.id).execute();
      const before = await versionNumber(app(), u.key, bucket.id);
      const results = await Promise.allSettled([runSync(app().started.deps, { bucket_id: bucket.id, trigger: 'manual' }), runSync(app().started.deps, { bucket_id: bucket.id, trigger: 'manual' })]);
      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
      const rejected = results.find((r) => r.status === 'rejected') as PromiseRejectedResult;
      expect(rejected.reason).toBeInstanceOf(RetryJobAt);
      expect(await versionNumber(app(), u.key, bucket.id)).toBe(before + 1);
      expect(await tree(app(), bucket.id)).toEqual({ 'a.txt': '1' });
    });

    it('tenancy, permissions, archive and disconnect', async () => {
      const owner = await app().user();
      const other = await app().user();
      const bucket = await newBucket(app(), owner.key);
      const name = repoName();
      const repo = await server.repo(name);
      await repo.commit({ 'a.txt': '1' });
      // Another account's bucket does not exist for this caller.
      for (const [method, path, body] of [
        ['GET', `/api/v1/buckets/${bucket.id}/github_sync`, undefined],
        ['PUT', `/api/v1/buckets/${bucket.id}/github_sync`, { repository_url: server.url(name) }],
        ['POST', `/api/v1/buckets/${bucket.id}/github_sync/sync`, {}],
        ['DELETE', `/api/v1/buckets/${bucket.id}/github_sync`, undefined],
      ] as const) {
        const res = await app().request(method, path, { key: other.key, body });
        expect(res.status, `${method} ${path}`).toBe(404);
        expect(res.body.error.code).toBe('BUCKET_NOT_FOUND');
      }
      expect((await state(app(), owner.key, bucket.id)).github_sync).toBeNull();
      const notConnected = await app().request('POST', `/api/v1/buckets/${bucket.id}/github_sync/sync`, { key: owner.key, body: {} });
      expect(notConnected.status).toBe(404);
      expect(notConnected.body.error.code).toBe('GIT_SYNC_NOT_CONNECTED');

      // Connecting stores a token: admin permission; a write key may sync.
      const writer = await app().key(owner, { scope: 'mailbox_write' });
      const denied = await app().request('PUT', `/api/v1/buckets/${bucket.id}/github_sync`, { key: writer, body: { repository_url: server.url(name) } });
      expect(denied.status).toBe(403);
      expect(denied.body.error.code).toBe('PERMISSION_DENIED');
      await connect(app(), owner.key, bucket.id, { repository_url: server.url(name) });
      await drain(app());
      const byWriter = await app().request('POST', `/api/v1/buckets/${bucket.id}/github_sync/sync`, { key: writer, body: {} });
      expect(byWriter.status).toBe(202);
      await drain(app());

      // Bad connection fields.
      for (const [body, code] of [
        [{ repository_url: 'http://127.0.0.1/x.git' }, 'INVALID_GIT_REPOSITORY_URL'],
        [{ repository_url: 'https://user:pw@127.0.0.1/x.git' }, 'INVALID_GIT_REPOSITORY_URL'],
        [{ repository_url: 'https://127.0.0.1/x.git?token=1' }, 'INVALID_GIT_REPOSITORY_URL'],
        [{ repository_url: server.url(name), branch: '../main' }, 'INVALID_ARGUMENT'],
        [{ repository_url: server.url(name), subdirectory: 'a/../b' }, 'INVALID_ARGUMENT'],
        [{ repository_url: server.url(name), token: 'has space' }, 'INVALID_ARGUMENT'],
      ] as const) {
        const res = await app().request('PUT', `/api/v1/buckets/${bucket.id}/github_sync`, { key: owner.key, body });
        expect(res.status, JSON.stringify(body)).toBe(422);
        expect(res.body.error.code).toBe(code);
      }
      expect((await state(app(), owner.key, bucket.id)).github_sync.repository_url).toBe(server.url(name));

      // Archived: setup blocked, syncs refused.
      const arch = await app().request('POST', `/api/v1/buckets/${bucket.id}/archive`, { key: owner.key, body: {} });
      expect(arch.status, arch.text).toBe(200);
      expect(arch.body.data.bucket.github_sync_setup).toMatchObject({ eligible: false, blocked_reason: 'bucket_archived' });
      const archivedSync = await app().request('POST', `/api/v1/buckets/${bucket.id}/github_sync/sync`, { key: owner.key, body: {} });
      expect(archivedSync.status).toBe(409);
      expect(archivedSync.body.error.code).toBe('MAILBOX_ARCHIVED');
      expect((await app().request('POST', `/api/v1/buckets/${bucket.id}/unarchive`, { key: owner.key, body: {} })).status).toBe(200);

      // Disconnect: files stay, the bucket shows no connection.
      const del = await app().request('DELETE', `/api/v1/buckets/${bucket.id}/github_sync`, { key: owner.key });
      expect(del.status, del.text).toBe(200);
      expect(del.body.data).toEqual({ deleted: true, id: bucket.id });
      const b = await app().request('GET', `/api/v1/buckets/${bucket.id}`, { key: owner.key });
      expect(b.body.data.bucket.github_sync).toBeNull();
      expect(await tree(app(), bucket.id)).toEqual({ 'a.txt': '1' });
      const again = await app().request('DELETE', `/api/v1/buckets/${bucket.id}/github_sync`, { key: owner.key });
      expect(again.body.error.code).toBe('GIT_SYNC_NOT_CONNECTED');
    });
});

for (const kind of DATABASES) {
  describe(`git sync without private hosts [${kind}]`, () => {
    let app: TestApp;
    beforeAll(async () => {
      app = await startTestApp(kind);
    });
    afterAll(async () => {
      await app?.stop();
    });

    it('refuses repository URLs on private addresses (the webhook SSRF rules) and reports the feature on', async () => {
      const u = await app.user();
      const bucket = await newBucket(app, u.key);
      for (const url of ['https://127.0.0.1/x.git', 'https://10.1.2.3/x.git', 'https://[::1]/x.git', 'https://169.254.169.254/latest.git']) {
        const res = await app.request('PUT', `/api/v1/buckets/${bucket.id}/github_sync`, { key: u.key, body: { repository_url: url } });
        expect(res.status, url).toBe(422);
        expect(res.body.error.code).toBe('INVALID_GIT_REPOSITORY_URL');
      }
      expect((await app.request('GET', `/api/v1/buckets/${bucket.id}/github_sync`, { key: u.key })).body.data.github_sync).toBeNull();
      const status = await app.request('GET', '/api/v1/status', { key: u.key });
      expect(status.body.data.features.github_sync).toBe(true);
    });

    it('CUBBY_GIT_SYNC=false: the setup says feature_disabled and connecting is refused', async () => {
      const off = await startTestApp(kind, { CUBBY_GIT_SYNC: 'false' });
      try {
        const u = await off.user();
        const bucket = await newBucket(off, u.key);
        const b = await off.request('GET', `/api/v1/buckets/${bucket.id}`, { key: u.key });
        expect(b.body.data.bucket.github_sync_setup).toMatchObject({ eligible: false, blocked_reason: 'feature_disabled' });
        const res = await off.request('PUT', `/api/v1/buckets/${bucket.id}/github_sync`, { key: u.key, body: { repository_url: 'https://git.example.org/x.git' } });
        expect(res.status).toBe(403);
        expect(res.body.error.code).toBe('GIT_SYNC_DISABLED');
        expect((await off.request('GET', '/api/v1/status', { key: u.key })).body.data.features.github_sync).toBe(false);
      } finally {
        await off.stop();
      }
    });
  });
}
