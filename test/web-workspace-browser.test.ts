import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { sendMail } from './smtp-helpers.ts';
import { uploadFile } from './files-helpers.ts';
import { enablePublishing, publisher } from './sites-helpers.ts';
import { browserSuiteTitle, HAVE_CHROMIUM, useChromium } from './browser.ts';
import { describeEachDatabase } from './harness.ts';
import { expectAccessible, overflowsSideways, shoot, signIn } from './workspace-helpers.ts';

// The dashboard as a workspace, driven in Chromium as a person would: create a mailbox, get mail,
// read it safely, reply, archive. Every page visited is checked with axe-core and photographed
// (test/artifacts/), and again at 390 px wide, where nothing may overflow sideways.

const TITLE = browserSuiteTitle('dashboard workspace in a browser');
// A 1×1 PNG.
const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==', 'base64');

describe.skipIf(!HAVE_CHROMIUM)(TITLE, () => {
  // One Chromium for both databases' journeys (each test opens its own page and signs in afresh).
  const browser = useChromium();
  describeEachDatabase('workspace journey', (app) => {
    const visited: string[] = [];
    // A stand-in for a sender's tracking server: counts fetches of its image.
    let remoteHits = 0;
    let remoteUrl = '';
    const remote = http.createServer((_req, res) => {
      remoteHits++;
      res.writeHead(200, { 'content-type': 'image/gif' }).end(Buffer.from('R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7', 'base64'));
    });
    beforeAll(async () => {
      await new Promise<void>((resolve) => remote.listen(0, '127.0.0.1', resolve));
      remoteUrl = `http://127.0.0.1:${(remote.address() as AddressInfo).port}`;
    });
    afterAll(async () => {
      remote.closeAllConnections();
      await new Promise((resolve) => remote.close(resolve));
    });

    /** Axe, a screenshot, then the same page at 390 px: nothing may overflow sideways. */
    async function look(page: Page, name: string) {
      await expectAccessible(page);
      await shoot(page, `${name}-${app().kind}`);
      visited.push(new URL(page.url()).pathname + new URL(page.url()).search);
      const size = page.viewportSize();
      await page.setViewportSize({ width: 390, height: 844 });
      try {
        expect(await overflowsSideways(page), `${name} at 390 px`).toMatchObject({ overflow: false });
        await shoot(page, `narrow-${name}-${app().kind}`);
      } finally {
        if (size) await page.setViewportSize(size);
      }
    }

    it('creates a mailbox from the home page and finds it by search', async () => {
      const base = app().base;
      const user = await app().user({ name: 'Ada Workspace' });
      const page = await browser().newPage();
      page.setDefaultTimeout(8000);
      try {
        await signIn(page, base, user.email);
        await expect(page.getByRole('heading', { name: 'Mailboxes' }).isVisible()).resolves.toBe(true);
        await look(page, 'home-empty');
        await Promise.all([page.waitForURL(`${base}/mailboxes/new`), page.getByRole('link', { name: 'New mailbox' }).click()]);
        await look(page, 'mailbox-new');
        await page.getByRole('textbox', { name: /^Title/ }).fill('Invoices');
        await Promise.all([page.waitForURL(/\/mailboxes\/bkt_\w+\?done=created$/), page.getByRole('button', { name: 'Create mailbox' }).click()]);
        await look(page, 'mailbox-created');

        // The same title again is refused in words, on the form.
        await page.goto(`${base}/mailboxes/new`);
        await page.getByRole('textbox', { name: /^Title/ }).fill('invoices');
        await page.getByRole('button', { name: 'Create mailbox' }).click();
        await expect(page.getByRole('alert').textContent()).resolves.toMatch(/already has this title/);

        await page.goto(`${base}/`);
        await page.getByLabel('Search mailboxes by title or address').fill('invoi');
        await page.keyboard.press('Enter');
        await page.waitForURL(/q=invoi/);
        await expect(page.locator('ul.rows > li').count()).resolves.toBe(1);
        await look(page, 'home');
      } finally {
        await page.close();
      }
    });

    it('receives HTML mail that runs nothing and loads nothing remote until asked, then replies to another own mailbox', { timeout: 90_000 }, async () => {
      const base = app().base;
      const user = await app().user({ name: 'Mail Reader' });
      const page = await browser().newPage();
      page.setDefaultTimeout(8000);
      const dialogs: string[] = [];
      page.on('dialog', (d) => {
        dialogs.push(d.message());
        void d.dismiss();
      });
      try {
        await signIn(page, base, user.email);
        for (const title of ['Support', 'Team']) {
          await page.goto(`${base}/mailboxes/new`);
          await page.getByRole('textbox', { name: /^Title/ }).fill(title);
          await Promise.all([page.waitForURL(/done=created$/), page.getByRole('button', { name: 'Create mailbox' }).click()]);
        }
        const team = { path: new URL(page.url()).pathname, address: (await page.locator('.addr code').first().textContent())!.trim() };
        await page.goto(`${base}/?q=support`);
        await Promise.all([page.waitForURL(/\/mailboxes\/bkt_\w+$/), page.getByRole('link', { name: 'Support' }).click()]);
        const support = { path: new URL(page.url()).pathname, address: (await page.locator('.addr code').first().textContent())!.trim() };

        await page.locator('ul.rows[data-live-state=open]').waitFor({ state: 'attached' });
        const r = await sendMail(app(), {
          from: 'Partner <partner@example.net>',
          to: support.address,
          subject: 'Quarterly report',
          text: 'Plain text version',
          attachments: [{ filename: 'chart.png', contentType: 'image/png', content: PNG }],
          html: `<h2>Report</h2><p>Para with <a href="https://example.org/report">link</a> and <b>bold</b>.</p>
<img src="data:image/gif;base64,R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7" alt="inline">
<img src="${remoteUrl}/pixel.gif" alt="remote pixel"><img src=x onerror="alert('onerror')"><script>alert('script')</script>`,
        });
        expect(r.rejected).toEqual([]);
        // It appears live, without a reload, and the tab title counts the unread mail.
        const row = page.locator('ul.rows > li', { hasText: 'Quarterly report' });
        await row.waitFor({ timeout: 5000 });
        await expect.poll(() => page.title()).toMatch(/^\(1\) Support/);
        await expect(row.getAttribute('class')).resolves.toContain('unread');
        await look(page, 'mailbox');

        await Promise.all([page.waitForURL(/\/emails\/eml_/), row.getByRole('link').click()]);
        const frame = page.locator('iframe.mail-html');
        await expect(frame.getAttribute('sandbox')).resolves.toBe('allow-popups allow-popups-to-escape-sandbox');
        const body = page.frameLocator('iframe.mail-html');
        await expect(body.getByRole('link', { name: 'link' }).getAttribute('target')).resolves.toBe('_blank');
        await expect(body.getByRole('link', { name: 'link' }).getAttribute('rel')).resolves.toContain('noopener');
        await expect(body.getByRole('img', { name: 'inline' }).isVisible()).resolves.toBe(true);
        // The image attachment has a preview, served from our origin and sandboxed.
        await expect(page.getByRole('img', { name: 'chart.png' }).evaluate((img: HTMLImageElement) => img.complete && img.naturalWidth)).resolves.toBe(1);
        await look(page, 'email');
        // Dark mode follows the system setting, and stays legible.
        await page.emulateMedia({ colorScheme: 'dark' });
        await expectAccessible(page);
        await shoot(page, `email-dark-${app().kind}`);
        await page.goBack();
        await expectAccessible(page);
        await shoot(page, `mailbox-dark-${app().kind}`);
        await page.goForward();
        await page.emulateMedia({ colorScheme: 'light' });
        expect(remoteHits).toBe(0);
        await Promise.all([page.waitForURL(/remote=1/), page.getByRole('link', { name: 'Load remote content' }).click()]);
        await expect.poll(() => remoteHits).toBe(1);
        for (const view of ['Text', 'Headers', 'Source']) {
          await page.getByRole('link', { name: view, exact: true }).click();
          await page.locator(`.tabs a[aria-current=page]`, { hasText: view }).waitFor();
          await look(page, `email-${view.toLowerCase()}`);
        }
        await expect(page.locator('pre.source').textContent()).resolves.toContain('Subject: Quarterly report');
        expect(dialogs).toEqual([]);

        // A reply to an outside sender of a free account is refused in words; to another own mailbox it goes.
        await page.getByRole('link', { name: 'Reply', exact: true }).click();
        await page.getByRole('textbox', { name: /^To/ }).fill('partner@example.net');
        await page.getByRole('button', { name: 'Send' }).click();
        await expect(page.getByRole('alert').first().textContent()).resolves.toMatch(/partner@example.net/);
        await look(page, 'compose-refused');
        await page.getByRole('textbox', { name: /^To/ }).fill(team.address);
        await Promise.all([page.waitForURL(/done=sent$/), page.getByRole('button', { name: 'Send' }).click()]);
        await look(page, 'sent');
        await expect.poll(async () => {
          await page.goto(`${base}${team.path}`);
          return page.locator('ul.rows > li', { hasText: 'Re: Quarterly report' }).count();
        }, { timeout: 15_000 }).toBe(1);
        await look(page, 'team-mailbox');

        // Forward carries the original's attachment (ticked by default) to the other mailbox.
        await page.goto(`${base}${support.path}`);
        await Promise.all([page.waitForURL(/\/emails\/eml_/), page.locator('ul.rows > li', { hasText: 'Quarterly report', hasNotText: 'Re: Quarterly' }).getByRole('link').click()]);
        await Promise.all([page.waitForURL(/compose\?forward=/), page.getByRole('link', { name: 'Forward', exact: true }).click()]);
        await expect(page.getByRole('checkbox', { name: /chart\.png/ }).isChecked()).resolves.toBe(true);
        await page.getByRole('textbox', { name: /^To/ }).fill(team.address);
        await look(page, 'compose-forward');
        await Promise.all([page.waitForURL(/done=sent$/), page.getByRole('button', { name: 'Send' }).click()]);
        await expect.poll(async () => {
          await page.goto(`${base}${team.path}`);
          return page.locator('ul.rows > li', { hasText: 'Fwd: Quarterly report' }).count();
        }, { timeout: 15_000 }).toBe(1);
        await Promise.all([page.waitForURL(/\/emails\/eml_/), page.locator('ul.rows > li', { hasText: 'Fwd: Quarterly report' }).getByRole('link').click()]);
        await expect.poll(() => page.getByRole('img', { name: 'chart.png' }).evaluate((img: HTMLImageElement) => img.complete && img.naturalWidth)).toBe(1);
        await page.goto(`${base}/`);
        await look(page, 'home-busy');
        // The other sections of the navigation bar keep the layout, also at 390 px.
        for (const section of ['API keys', 'Connections']) {
          await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: section }).click();
          await page.getByRole('heading', { name: section }).first().waitFor();
          await expect(page.getByRole('navigation', { name: 'Main' }).locator('a[aria-current=page]').textContent()).resolves.toBe(section);
          await look(page, section.toLowerCase().replace(' ', '-'));
        }
      } finally {
        await page.close();
      }
    });

    it('uploads a folder of 50 files and dropped files with progress, then browses, previews, renames and restores a version', { timeout: 120_000 }, async () => {
      const base = app().base;
      const user = await app().user({ name: 'File Keeper' });
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cubby-upload-'));
      const folder = path.join(dir, 'reports');
      fs.mkdirSync(folder);
      for (let i = 1; i <= 50; i++) fs.writeFileSync(path.join(folder, `report-${String(i).padStart(2, '0')}.txt`), `Report ${i}\nline two\n`);
      const page = await browser().newPage();
      page.setDefaultTimeout(15_000);
      try {
        await signIn(page, base, user.email);
        await page.goto(`${base}/mailboxes/new`);
        await page.getByRole('textbox', { name: /^Title/ }).fill('Archive room');
        await Promise.all([page.waitForURL(/done=created$/), page.getByRole('button', { name: 'Create mailbox' }).click()]);
        const box = new URL(page.url()).pathname;
        await page.getByRole('link', { name: 'Files', exact: true }).click();
        await page.waitForURL(`${base}${box}/files`);
        await look(page, 'files-empty');

        await page.locator('#pick-folder').setInputFiles(folder);
        await page.locator('[data-upload][data-finished=ok]').waitFor({ timeout: 60_000 });
        await expect(page.locator('[data-files] progress').count()).resolves.toBe(50);
        await shoot(page, `files-uploaded-progress-${app().kind}`);
        await page.waitForLoadState('load');
        await page.goto(`${base}${box}/files`);

        // Drag and drop two files onto the drop zone.
        await page.evaluate(() => {
          const dt = new DataTransfer();
          dt.items.add(new File(['# Notes\n\nFirst **draft**.\n'], 'notes.md', { type: 'text/markdown' }));
          dt.items.add(new File([new Uint8Array([137, 80, 78, 71])], 'tiny.bin'));
          document.querySelector('[data-dropzone]')!.dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
        });
        await page.locator('[data-upload][data-finished=ok]').waitFor();
        await page.goto(`${base}${box}/files`);
        await expect(page.getByRole('link', { name: 'reports/' }).isVisible()).resolves.toBe(true);
        await look(page, 'files');
        await Promise.all([page.waitForURL(/path=reports$/), page.getByRole('link', { name: 'reports/' }).click()]);
        await expect(page.locator('ul.rows > li').count()).resolves.toBe(50);
        await page.getByRole('link', { name: 'Size ↑' }).or(page.getByRole('link', { name: 'Size' })).first().click();
        await page.waitForURL(/sort=size/);
        await look(page, 'files-folder');

        // Preview markdown, append (a new version), see the diff, restore the first version.
        await page.goto(`${base}${box}/files`);
        await page.getByRole('link', { name: 'notes.md' }).click();
        await expect(page.locator('.markdown strong').textContent()).resolves.toBe('draft');
        await page.getByLabel('Append text').fill('Second line.');
        await Promise.all([page.waitForURL(/done=appended/), page.getByRole('button', { name: 'Append' }).click()]);
        await page.getByRole('link', { name: 'Diff' }).first().click();
        await expect(page.locator('pre.diff .add').textContent()).resolves.toContain('Second line.');
        await look(page, 'file-diff');
        await Promise.all([page.waitForURL(/done=restored/), page.getByRole('button', { name: 'Restore' }).first().click()]);
        await expect(page.locator('.markdown').textContent()).resolves.not.toContain('Second line.');
        await page.getByLabel('Rename').fill('notes-v1.md');
        await Promise.all([page.waitForURL(/done=moved/), page.getByRole('button', { name: 'Rename' }).click()]);
        await expect(page.getByRole('heading', { name: 'notes-v1.md' }).isVisible()).resolves.toBe(true);
        await look(page, 'file');

        // _email/ is read-only: no change controls on a stored message file.
        await page.goto(`${base}${box}/files?path=_email`);
        await expect(page.getByRole('note').textContent()).resolves.toContain('read-only');
      } finally {
        await page.close();
        fs.rmSync(dir, { recursive: true, force: true });
      }
    });

    it('says why publishing is off, then publishes with a password and opens the site', { timeout: 120_000 }, async () => {
      const base = app().base;
      const user = await publisher(app(), 'paid');
      await enablePublishing(app(), user.accountId, false);
      const page = await browser().newPage();
      page.setDefaultTimeout(15_000);
      try {
        await signIn(page, base, user.email);
        await page.goto(`${base}/mailboxes/new`);
        await page.getByRole('textbox', { name: /^Title/ }).fill('Board site');
        await Promise.all([page.waitForURL(/done=created$/), page.getByRole('button', { name: 'Create mailbox' }).click()]);
        const box = new URL(page.url()).pathname;
        const id = box.split('/').pop()!;
        expect((await uploadFile(app(), user.key, id, 'public/index.html', '<h1>Board home</h1>')).status).toBe(201);
        await page.getByRole('link', { name: 'Site', exact: true }).click();
        await expect(page.getByRole('note').first().textContent()).resolves.toContain('Publishing websites is off');
        await look(page, 'site-off');

        await enablePublishing(app(), user.accountId, true);
        await page.reload();
        await page.getByLabel('Root folder').selectOption('public');
        await page.getByLabel('Password', { exact: true }).check();
        await Promise.all([page.waitForURL(`${base}${box}/site`), page.getByRole('button', { name: 'Publish', exact: true }).click()]);
        await page.getByRole('status').filter({ hasText: 'Live' }).waitFor({ timeout: 60_000 });
        await page.getByText('Reveal').click();
        const password = (await page.getByTestId('site-password').textContent())!.trim();
        expect(password.length).toBeGreaterThanOrEqual(8);
        await look(page, 'site');
        const url = (await page.locator('.addr code').nth(1).textContent())!.trim();

        // The site name field checks availability as the person types; a bad name says why.
        await page.getByLabel('Site name').fill('Bad Name!');
        await expect.poll(() => page.locator('#slug-status').textContent()).toMatch(/lower-case|letters|must|character/i);
        await page.getByLabel('Site name').fill(`board-${Date.now().toString(36)}`);
        await expect.poll(() => page.locator('#slug-status').textContent()).toBe('Available.');

        const visitor = await browser().newPage();
        try {
          await visitor.goto(url);
          await visitor.getByLabel('Password').fill(password);
          await visitor.getByRole('button', { name: 'Open site' }).click();
          await visitor.getByRole('heading', { name: 'Board home' }).waitFor();
        } finally {
          await visitor.close();
        }
      } finally {
        await page.close();
      }
    });

    it('checked every page it looked at in a 390 px wide window', () => {
      expect(visited.length).toBeGreaterThanOrEqual(12);
    });
  });
});
