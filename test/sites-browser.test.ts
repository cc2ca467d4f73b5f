import { describe, expect, it } from 'vitest';
import { browserSuiteTitle, HAVE_CHROMIUM, screenshot, useChromium } from './browser.ts';
import { describeEachDatabase } from './harness.ts';
import { mailboxWithAddress } from './smtp-helpers.ts';
import { latestEmailText, newBucket, publishAndWait, publisher, uploadFolder } from './sites-helpers.ts';

// Published sites in a real browser (Debian's chromium, which sends *.localhost to loopback).
const TITLE = browserSuiteTitle('published sites in a browser');

describe.skipIf(!HAVE_CHROMIUM)(TITLE, () => {
  describeEachDatabase('sites', (app) => {
    const browser = useChromium();
    const shot = async (page: any, name: string) => {
      await screenshot(page, `site-${name}-${app().kind}`);
    };

    it('a password site: wrong password, then the right one opens the page asked for', async () => {
      const u = await publisher(app());
      const bucket = await newBucket(app(), u.key, 'Board Papers');
      await uploadFolder(app(), u.key, bucket.id, { 'index.html': '<h1>Board home</h1>', 'minutes/june.html': '<h1>June minutes</h1>' });
      const p = await publishAndWait(app(), u.key, bucket.id, { access_mode: 'password' });
      const page = await browser().newPage();
      try {
        const res = await page.goto(`${p.public_url}/minutes/june.html`);
        expect(res?.status()).toBe(200);
        expect(res?.headers()['x-cubby-access']).toBe('password_required');
        await shot(page, 'password');
        await page.getByLabel('Password').fill('definitely-wrong');
        await page.getByRole('button', { name: 'Open site' }).click();
        await expect(page.getByRole('alert').textContent()).resolves.toContain('That password is not right.');
        await page.getByLabel('Password').fill(p.password);
        await Promise.all([page.waitForURL(`${p.public_url}/minutes/june.html`), page.getByRole('button', { name: 'Open site' }).click()]);
        await page.getByRole('heading', { name: 'June minutes' }).waitFor();
        // The cookie belongs to this site's host only, and the password never appears in a URL.
        const cookies = await browser().cookies(p.public_url);
        expect(cookies.map((c) => [c.name, c.domain, c.httpOnly])).toEqual([['cubby_site_access', new URL(p.public_url).hostname, true]]);
        expect(page.url()).not.toContain(p.password);
        await page.goto(p.public_url);
        await page.getByRole('heading', { name: 'Board home' }).waitFor();
      } finally {
        await page.close();
      }
    });

    it('a require-email site: the visitor gets a code by email and is let in', async () => {
      const u = await publisher(app());
      const bucket = await newBucket(app(), u.key, 'Members');
      await uploadFolder(app(), u.key, bucket.id, { 'index.html': '<h1>Members area</h1>' });
      const p = await publishAndWait(app(), u.key, bucket.id, { access_mode: 'require_email' });
      const visitor = await app().user();
      const inbox = await mailboxWithAddress(app(), visitor);
      const page = await browser().newPage();
      try {
        await page.goto(p.public_url);
        await page.getByLabel('Email address').fill(inbox.address);
        await page.getByRole('button', { name: 'Send code' }).click();
        await page.getByLabel('Code').waitFor();
        await shot(page, 'code');
        const mail = await latestEmailText(app(), visitor.key, inbox.id);
        const code = mail!.text.match(/\b(\d{6})\b/)![1]!;
        await page.getByLabel('Code').fill(code);
        await Promise.all([page.waitForURL(`${p.public_url}/`), page.getByRole('button', { name: 'Open site' }).click()]);
        await page.getByRole('heading', { name: 'Members area' }).waitFor();
      } finally {
        await page.close();
      }
    });

    it('an spa deep link loads the app shell, which routes on the client', async () => {
      const u = await publisher(app());
      const bucket = await newBucket(app(), u.key, 'Single Page');
      const shell = '<!doctype html><html><head><script src="/app.js" defer></script></head><body><h1 id="route">loading</h1></body></html>';
      await uploadFolder(app(), u.key, bucket.id, { 'index.html': shell, 'app.js': "document.getElementById('route').textContent = 'Route: ' + location.pathname;" });
      const p = await publishAndWait(app(), u.key, bucket.id, { site_mode: 'spa' });
      const page = await browser().newPage();
      try {
        const res = await page.goto(`${p.public_url}/projects/7/board`);
        expect(res?.status()).toBe(200);
        await page.getByRole('heading', { name: 'Route: /projects/7/board' }).waitFor();
        await shot(page, 'spa');
      } finally {
        await page.close();
      }
    });
  });
});
