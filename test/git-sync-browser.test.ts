import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { browserSuiteTitle, HAVE_CHROMIUM, useChromium } from './browser.ts';
import { describeEachDatabase } from './harness.ts';
import { makeCert, type TestCert } from './webhook-receiver.ts';
import { GitServer } from './git-server.ts';
import { newBucket } from './sites-helpers.ts';
import { expectAccessible, shoot, signIn } from './workspace-helpers.ts';

// The git sync page of the dashboard (the bucket's github_sync_setup.settings_url) in Chromium:
// connect a repository served by the test's git server, see the webhook secret once, the state
// after the sync, sync again, disconnect.

const TITLE = browserSuiteTitle('git sync in a browser');
let cert: TestCert;
let server: GitServer;
const env: Record<string, string> = {};

describe.skipIf(!HAVE_CHROMIUM)(TITLE, () => {
  beforeAll(async () => {
    cert = await makeCert();
    server = new GitServer(cert);
    await server.start();
    Object.assign(env, { CUBBY_GIT_ALLOW_PRIVATE: 'true', CUBBY_GIT_CA_FILE: cert.certFile });
  });
  afterAll(async () => {
    await server?.stop();
  });

  describeEachDatabase(
    'git sync page',
    (app) => {
      const browser = useChromium();

      it('connects, shows the secret once and the synced state, syncs again and disconnects', async () => {
        const u = await app().user();
        const bucket = await newBucket(app(), u.key, 'Docs site');
        const name = `web-${app().kind}-${Date.now().toString(36)}`;
        const repo = await server.repo(name);
        const commit = await repo.commit({ 'index.html': '<h1>Docs</h1>', 'guide/intro.md': '# Intro' });
        const settingsUrl = (await app().request('GET', `/api/v1/buckets/${bucket.id}`, { key: u.key })).body.data.bucket.github_sync_setup.settings_url;
        expect(settingsUrl).toBe(`${app().base}/mailboxes/${bucket.id}/git`);

        const page = await browser().newPage();
        try {
          await signIn(page, app().base, u.email);
          await page.goto(settingsUrl);
          await page.getByText('This mailbox is not connected to a git repository.').waitFor();
          await expectAccessible(page);
          await page.getByLabel('Repository URL').fill(server.url(name));
          await page.getByLabel('Rebuild the website after every sync').check();
          await shoot(page, `git-sync-connect-${app().kind}`);
          await page.getByRole('button', { name: 'Connect and sync' }).click();
          const secret = (await page.getByTestId('git-webhook-secret').textContent())!.trim();
          expect(secret).toMatch(/^gitwh_/);
          expect(page.url()).not.toContain(secret);

          await app().started.deps.jobs.worker!.drain();
          await page.goto(settingsUrl);
          await page.getByRole('status').filter({ hasText: 'In sync' }).waitFor();
          await expect(page.getByText(commit.slice(0, 12)).isVisible()).resolves.toBe(true);
          expect(await page.content()).not.toContain(secret);
          await expectAccessible(page);
          await shoot(page, `git-sync-state-${app().kind}`);

          await repo.commit({ 'guide/intro.md': null, 'guide/next.md': '# Next' });
          await Promise.all([page.waitForURL(settingsUrl), page.getByRole('button', { name: 'Sync now' }).click()]);
          await app().started.deps.jobs.worker!.drain();
          const files = (await app().request('GET', `/api/v1/buckets/${bucket.id}/files`, { key: u.key })).body.data.files.map((f: { path: string }) => f.path).sort();
          expect(files).toEqual(['guide/next.md', 'index.html']);

          await Promise.all([page.waitForURL(settingsUrl), page.getByRole('button', { name: 'Disconnect' }).click()]);
          await page.getByText('This mailbox is not connected to a git repository.').waitFor();
        } finally {
          await page.close();
        }
      });
    },
    env,
  );
});
