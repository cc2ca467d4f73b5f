import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Page, Route } from 'playwright-core';
import { browserSuiteTitle, HAVE_CHROMIUM, useChromium } from './browser.ts';
import { describeEachDatabase, type TestApp } from './harness.ts';
import { expectAccessible, overflowsSideways, shoot, signIn } from './workspace-helpers.ts';

// Uploads on the files page go through an upload session: a folder of 50 files dragged onto the
// drop zone (a real drag through the DevTools protocol, so the browser reads the folder itself)
// is one session and one mailbox version; a reload midway, then the same folder dropped again,
// sends only the files the session lacks (counted on the server); a batch upload held by the API
// is explained; a stale session is told.

const TITLE = browserSuiteTitle('dashboard uploads through upload sessions');

function makeFolder(count: number): { dir: string; folder: string } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cubby-drop-'));
  const folder = path.join(dir, 'reports');
  fs.mkdirSync(folder);
  fs.mkdirSync(path.join(folder, 'q1'));
  for (let i = 1; i <= count; i++) {
    const name = i % 10 === 0 ? path.join('q1', `summary-${i}.txt`) : `report-${String(i).padStart(2, '0')}.txt`;
    fs.writeFileSync(path.join(folder, name), `Report ${i}\n${'line\n'.repeat(i * 40)}`);
  }
  return { dir, folder };
}

/** Drags a folder from disk onto the drop zone, as a person does from a file manager. */
async function dragFolder(page: Page, folder: string): Promise<void> {
  const zone = await page.locator('[data-dropzone]').boundingBox();
  const x = zone!.x + zone!.width / 2;
  const y = zone!.y + zone!.height / 2;
  const cdp = await page.context().newCDPSession(page);
  const data = { items: [], files: [folder], dragOperationsMask: 1 };
  try {
    for (const type of ['dragEnter', 'dragOver', 'drop'] as const) await cdp.send('Input.dispatchDragEvent', { type, x, y, data });
  } finally {
    await cdp.detach();
  }
}

async function newMailbox(page: Page, base: string, title: string): Promise<{ path: string; id: string }> {
  await page.goto(`${base}/mailboxes/new`);
  await page.getByRole('textbox', { name: /^Title/ }).fill(title);
  await Promise.all([page.waitForURL(/done=created$/), page.getByRole('button', { name: 'Create mailbox' }).click()]);
  const p = new URL(page.url()).pathname;
  return { path: p, id: p.split('/').pop()! };
}

async function sessionsOf(app: TestApp, mailboxId: string) {
  return app.started.deps.db.selectFrom('upload_sessions').selectAll().where('mailbox_id', '=', mailboxId).orderBy('created_at').execute();
}

/** Direct uploads made for a session: one per file whose bytes reached the server. */
async function bytesReceived(app: TestApp, sessionId: string): Promise<number> {
  const r = await app.started.deps.db.selectFrom('direct_uploads').select((eb) => eb.fn.countAll<number>().as('n')).where('upload_session_id', '=', sessionId).executeTakeFirstOrThrow();
  return Number(r.n);
}

async function uploadVersions(app: TestApp, mailboxId: string) {
  return app.started.deps.db.selectFrom('mailbox_versions').selectAll().where('mailbox_id', '=', mailboxId).where('action', 'like', 'upload_session.%').execute();
}

describe.skipIf(!HAVE_CHROMIUM)(TITLE, () => {
  describeEachDatabase('upload sessions in the browser', (app) => {
    const browser = useChromium();

    async function look(page: Page, name: string) {
      await expectAccessible(page);
      await shoot(page, `${name}-${app().kind}`);
      const size = page.viewportSize();
      await page.setViewportSize({ width: 390, height: 844 });
      try {
        expect(await overflowsSideways(page), `${name} at 390 px`).toMatchObject({ overflow: false });
      } finally {
        if (size) await page.setViewportSize(size);
      }
    }

    it('a dragged folder of 50 files is one session and one version, with progress per file and overall', { timeout: 120_000 }, async () => {
      const base = app().base;
      const user = await app().user({ name: 'Folder Dropper' });
      const { dir, folder } = makeFolder(50);
      const page = await browser().newPage();
      page.setDefaultTimeout(20_000);
      try {
        await signIn(page, base, user.email);
        const box = await newMailbox(page, base, 'Drop box');
        await page.goto(`${base}${box.path}/files`);
        await page.locator('[data-upload][data-ready]').waitFor({ state: 'attached' });
        const versionBefore = (await app().started.deps.db.selectFrom('mailboxes').select('version_number').where('id', '=', box.id).executeTakeFirstOrThrow()).version_number;

        await dragFolder(page, folder);
        await page.locator('[data-upload][data-finished=ok]').waitFor({ timeout: 90_000 });
        await expect(page.locator('[data-files] progress').count()).resolves.toBe(50);
        await expect(page.locator('[data-files] li[data-state=sent]').count()).resolves.toBe(50);
        await expect(page.locator('[data-overall]').evaluate((p: HTMLProgressElement) => p.value)).resolves.toBe(1);
        await expect(page.locator('[data-overall-text]').textContent()).resolves.toBe('50 of 50 files uploaded in one version.');
        // The listing shows the new folder without a reload, the progress still in view.
        await expect(page.locator('#listing').getByRole('link', { name: 'reports/' }).isVisible()).resolves.toBe(true);
        await look(page, 'files-after-upload');

        const sessions = await sessionsOf(app(), box.id);
        expect(sessions).toHaveLength(1);
        expect(sessions[0]).toMatchObject({ status: 'finalized', created_by_user_id: user.userId });
        expect(await bytesReceived(app(), sessions[0]!.id)).toBe(50);
        const versions = await uploadVersions(app(), box.id);
        expect(versions).toHaveLength(1);
        expect(versions[0]).toMatchObject({ id: sessions[0]!.target_mailbox_version_id, action: 'upload_session.finalize', files_changed: 50 });
        const m = await app().started.deps.db.selectFrom('mailboxes').select(['version_number', 'lock_kind']).where('id', '=', box.id).executeTakeFirstOrThrow();
        expect(Number(m.version_number)).toBe(Number(versionBefore) + 1);
        expect(m.lock_kind).toBeNull();
        // The folder structure came along: reports/ with its q1/ subfolder.
        const files = await app().started.deps.db.selectFrom('files').select('path').where('mailbox_id', '=', box.id).where('deleted_at', 'is', null).execute();
        expect(files.filter((f) => f.path.startsWith('reports/'))).toHaveLength(50);
        expect(files.filter((f) => f.path.startsWith('reports/q1/'))).toHaveLength(5);
        await expect(page.evaluate(() => Object.keys(localStorage).filter((k) => k.startsWith('cubby.upload.')))).resolves.toEqual([]);
      } finally {
        await page.close();
        fs.rmSync(dir, { recursive: true, force: true });
      }
    });

    it('resumes after a reload midway: the same folder dropped again sends only what the session lacks', { timeout: 150_000 }, async () => {
      const base = app().base;
      const user = await app().user({ name: 'Interrupted Uploader' });
      const { dir, folder } = makeFolder(50);
      const page = await browser().newPage();
      page.setDefaultTimeout(20_000);
      try {
        await signIn(page, base, user.email);
        const box = await newMailbox(page, base, 'Resume box');
        await page.goto(`${base}${box.path}/files`);
        await page.locator('[data-upload][data-ready]').waitFor({ state: 'attached' });

        // Let 20 files through, then hold every further file in the browser (it never reaches
        // the server) and reload: the batch is interrupted midway.
        const held: Route[] = [];
        let passed = 0;
        const bytesRoute = /\/files\/sessions\/bus_\w+\/files\?/;
        await page.route(bytesRoute, (route) => {
          if (passed < 20) {
            passed++;
            return route.continue();
          }
          held.push(route);
          return undefined;
        });
        await dragFolder(page, folder);
        await page.waitForFunction(() => document.querySelectorAll('[data-files] li[data-state=sent]').length === 20);
        await shoot(page, `files-upload-midway-${app().kind}`);
        const [session] = await sessionsOf(app(), box.id);
        expect(session).toMatchObject({ status: 'pending' });
        expect(await bytesReceived(app(), session!.id)).toBe(20);
        // The held ones never reached the server; the reload drops them.
        for (const r of held) await r.abort();
        await page.unroute(bytesRoute);
        await page.reload();

        // The page tells of the interrupted batch and how to go on. (A held request may still
        // reach the server as the page goes away; what counts below is what the server has.)
        await page.locator('[data-resume]:not([hidden])').waitFor();
        const told = Number((await page.locator('[data-resume-text]').textContent())!.match(/interrupted after (\d+) of 50 files.*already sent are skipped/)![1]);
        expect(told).toBeGreaterThanOrEqual(20);
        expect(told).toBeLessThan(50);
        await look(page, 'files-upload-interrupted');

        const sentAfterReload: string[] = [];
        page.on('request', (r) => {
          if (bytesRoute.test(r.url())) sentAfterReload.push(new URL(r.url()).searchParams.get('path')!);
        });
        await dragFolder(page, folder);
        await page.locator('[data-upload][data-finished=ok]').waitFor({ timeout: 90_000 });
        const kept = await page.locator('[data-files] li[data-state=kept]').count();
        expect(kept).toBeGreaterThanOrEqual(told);
        await expect(page.locator('[data-files] li[data-state=sent]').count()).resolves.toBe(50 - kept);
        expect(sentAfterReload).toHaveLength(50 - kept);
        expect(new Set(sentAfterReload).size).toBe(50 - kept);

        // On the server: the same session, each file's bytes received exactly once (so none of
        // those kept was sent again), one version.
        const sessions = await sessionsOf(app(), box.id);
        expect(sessions).toHaveLength(1);
        expect(sessions[0]).toMatchObject({ id: session!.id, status: 'finalized' });
        expect(await bytesReceived(app(), session!.id)).toBe(50);
        const superseded = await app().started.deps.db.selectFrom('upload_session_files').select('path').where('session_id', '=', session!.id).where('status', '=', 'superseded').execute();
        expect(superseded).toEqual([]);
        const versions = await uploadVersions(app(), box.id);
        expect(versions).toHaveLength(1);
        expect(versions[0]).toMatchObject({ files_changed: 50 });
        const live = await app().started.deps.db.selectFrom('files').select((eb) => eb.fn.countAll<number>().as('n')).where('mailbox_id', '=', box.id).where('path', 'like', 'reports/%').where('deleted_at', 'is', null).executeTakeFirstOrThrow();
        expect(Number(live.n)).toBe(50);
      } finally {
        await page.close();
        fs.rmSync(dir, { recursive: true, force: true });
      }
    });

    it('explains a mailbox held by another batch upload, and an interrupted batch that expired', { timeout: 90_000 }, async () => {
      const base = app().base;
      const user = await app().user({ name: 'Locked Out' });
      const page = await browser().newPage();
      page.setDefaultTimeout(20_000);
      try {
        await signIn(page, base, user.email);
        const box = await newMailbox(page, base, 'Busy box');
        // A batch upload started through the API holds the mailbox.
        const api = await app().request('POST', `/v1/mailboxes/${box.id}/upload_sessions`, { key: user.key, body: {} });
        expect(api.status, api.text).toBe(201);
        await page.goto(`${base}${box.path}/files`);
        await page.locator('[data-upload][data-ready]').waitFor({ state: 'attached' });
        await page.locator('#pick-files').setInputFiles({ name: 'a.txt', mimeType: 'text/plain', buffer: Buffer.from('a') });
        await page.locator('[data-upload][data-finished=refused]').waitFor();
        await expect(page.locator('[data-upload-message]').textContent()).resolves.toMatch(/Another batch upload holds this mailbox.*Try again once it is finished/);
        await look(page, 'files-upload-locked');
        const apiSession = api.body.data.mailbox_upload_session.id as string;
        const cancel = await app().request('POST', `/v1/mailboxes/${box.id}/upload_sessions/${apiSession}/finalize`, { key: user.key, body: { complete: false } });
        expect(cancel.status, cancel.text).toBe(200);

        // A batch of this browser that was left unfinished and has since expired.
        await page.route(/\/files\/sessions\/bus_\w+\/files\?/, (route) => route.abort());
        await page.locator('#pick-files').setInputFiles({ name: 'b.txt', mimeType: 'text/plain', buffer: Buffer.from('b') });
        await page.locator('[data-upload][data-finished=with-errors]').waitFor();
        await page.unroute(/\/files\/sessions\/bus_\w+\/files\?/);
        const [, mine] = await sessionsOf(app(), box.id);
        const past = new Date(Date.now() - 7 * 3600_000).toISOString();
        await app().started.deps.db.updateTable('upload_sessions').set({ uploads_expire_at: past, updated_at: past }).where('id', '=', mine!.id).execute();
        await page.reload();
        await page.locator('[data-upload-message]:not([hidden])').waitFor();
        await expect(page.locator('[data-upload-message]').textContent()).resolves.toMatch(/expired: the files it had not saved were discarded/);
        // The next drop starts a new session.
        await page.locator('#pick-files').setInputFiles({ name: 'b.txt', mimeType: 'text/plain', buffer: Buffer.from('b') });
        await page.locator('[data-upload][data-finished=ok]').waitFor();
        const all = await sessionsOf(app(), box.id);
        expect(all.map((s) => s.status)).toEqual(['failed', 'expired', 'finalized']);
      } finally {
        await page.close();
      }
    });
  });
});
