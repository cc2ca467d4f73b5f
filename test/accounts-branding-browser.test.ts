import fs from 'node:fs';
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { browserSuiteTitle, HAVE_CHROMIUM, screenshot, useChromium } from './browser.ts';
import { describeAccounts, linkIn, mailTo } from './account-helpers.ts';
import { HOSTILE_SVG, pngImage } from './image-fixtures.ts';
import { enablePublishing, newBucket, publishAndWait, untilSettled, uploadFolder } from './sites-helpers.ts';

// Branding and client-account members in Chromium: an agency owner gives a client account a logo
// (an SVG is refused), invites someone from the client's members page, and a published file
// listing shows the logo, rendered from the site's own origin. Every page is checked with axe-core.

const AXE = fs.readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

async function expectAccessible(page: Page): Promise<void> {
  await page.evaluate(AXE);
  const violations = await page.evaluate(async () => {
    const r = await (globalThis as any).axe.run(document, { resultTypes: ['violations'] });
    return r.violations.map((v: any) => `${v.id}: ${v.help} (${v.nodes.map((n: any) => n.target.join(' ')).join(', ')})`);
  });
  expect(violations).toEqual([]);
}

async function signIn(page: Page, base: string, email: string): Promise<void> {
  await page.goto(`${base}/users/sign_in`);
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill('a long test password');
  await Promise.all([page.waitForURL(`${base}/`), page.getByRole('button', { name: 'Sign in' }).click()]);
}

/** The rendered width of an image (0 when the browser could not decode it). */
const naturalWidth = (page: Page, selector: string) => page.locator(selector).first().evaluate((img: HTMLImageElement) => (img.complete ? img.naturalWidth : 0));

describe.skipIf(!HAVE_CHROMIUM)(browserSuiteTitle('branding and client members in a browser'), () => {
  describeAccounts('branding', (env) => {
    const browser = useChromium();

    it('an agency owner brands a client account and invites someone into it', async () => {
      const { app, sink } = env();
      const base = app.base;
      const owner = await app.user({ plan: 'agency', name: 'Agency Owner' });
      await browser().clearCookies();
      const page = await browser().newPage();
      try {
        await signIn(page, base, owner.email);
        await page.goto(`${base}/account?account=${owner.accountId}`);
        await page.getByLabel('New client account name').fill('Acme Corp');
        await Promise.all([page.waitForURL(/done=client_created/), page.getByRole('button', { name: 'Create client account' }).click()]);
        const clientId = new URL(page.url()).searchParams.get('account')!;

        // An SVG with a script is refused, whatever it is called.
        await page.getByLabel('Upload a logo').setInputFiles({ name: 'logo.png', mimeType: 'image/png', buffer: HOSTILE_SVG });
        await Promise.all([page.waitForURL(`${base}/account/logo`), page.getByRole('button', { name: 'Upload logo' }).click()]);
        await expect(page.getByText('SVG is not accepted').isVisible()).resolves.toBe(true);
        await expectAccessible(page);
        await page.getByRole('link', { name: 'Back to the account' }).click();

        await page.getByLabel('Upload a logo').setInputFiles({ name: 'acme.png', mimeType: 'image/png', buffer: pngImage(64, 64, [220, 120, 20]) });
        await Promise.all([page.waitForURL(/done=logo/), page.getByRole('button', { name: 'Upload logo' }).click()]);
        await expect(page.getByText('Logo saved.').isVisible()).resolves.toBe(true);
        const preview = page.getByRole('img', { name: 'Logo of Acme Corp' });
        await expect(preview.isVisible()).resolves.toBe(true);
        expect(await naturalWidth(page, 'img.logo-preview')).toBe(64);
        await expect(page.getByLabel('Replace the logo').isVisible()).resolves.toBe(true);
        await expectAccessible(page);
        await screenshot(page, `client-logo-${app.kind}`);

        // Members of the client account: the agency owner invites from here.
        await Promise.all([page.waitForURL(/\/account\/members/), page.getByRole('link', { name: 'Members' }).click()]);
        expect(new URL(page.url()).searchParams.get('account')).toBe(clientId);
        await expect(page.getByRole('heading', { name: 'Members of Acme Corp' }).isVisible()).resolves.toBe(true);
        await page.getByLabel('Email').fill('client.person@example.com');
        await Promise.all([page.waitForURL(/done=invited/), page.getByRole('button', { name: 'Send invitation' }).click()]);
        await expect(page.getByRole('cell', { name: 'client.person@example.com' }).isVisible()).resolves.toBe(true);
        await expectAccessible(page);
        await screenshot(page, `client-members-${app.kind}`);
        const link = linkIn((await mailTo(sink, 'client.person@example.com', /invited you to Acme Corp/)).text, app, '/invitations/');
        expect(link).toMatch(/^\/invitations\/[A-Za-z0-9]{43}$/);

        // Remove the logo again.
        await page.goto(`${base}/account?account=${clientId}`);
        await Promise.all([page.waitForURL(/done=logo_removed/), page.getByRole('button', { name: 'Remove logo' }).click()]);
        await expect(page.getByText('No logo: published listings show the initial.').isVisible()).resolves.toBe(true);
      } finally {
        await page.close();
      }
    });

    it('a published file listing shows the account logo from the site’s origin', async () => {
      const { app } = env();
      const base = app.base;
      const owner = await app.user({ plan: 'paid', name: 'Site Owner' });
      await enablePublishing(app, owner.accountId);
      const bucket = await newBucket(app, owner.key, 'Press kit');
      await uploadFolder(app, owner.key, bucket.id, { 'about.txt': 'About us', 'photos/readme.md': '# Photos' });
      const p = await publishAndWait(app, owner.key, bucket.id);
      await browser().clearCookies();
      const page = await browser().newPage();
      try {
        await signIn(page, base, owner.email);
        await page.goto(`${base}/account?account=${owner.accountId}`);
        await page.getByLabel('Upload a logo').setInputFiles({ name: 'logo.png', mimeType: 'image/png', buffer: pngImage(48, 48, [30, 140, 90]) });
        await Promise.all([page.waitForURL(/done=logo/), page.getByRole('button', { name: 'Upload logo' }).click()]);
        expect((await untilSettled(app, owner.key, p.id)).publish_state).toBe('ready');

        await page.goto(p.public_url);
        const logo = page.locator('img.account-logo');
        await expect(logo.getAttribute('src')).resolves.toBe('/.cubby/account-logo.png');
        expect(await naturalWidth(page, 'img.account-logo')).toBe(48);
        expect(new URL(await logo.evaluate((img: HTMLImageElement) => img.currentSrc)).origin).toBe(new URL(p.public_url).origin);
        await screenshot(page, `site-logo-${app.kind}`);
        await page.goto(`${p.public_url}/photos/`);
        expect(await naturalWidth(page, 'img.account-logo')).toBe(48);
      } finally {
        await page.close();
      }
    });
  });
});
