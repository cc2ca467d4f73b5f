import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { browserSuiteTitle, HAVE_CHROMIUM, screenshot, useChromium } from './browser.ts';
import { describeEachDatabase } from './harness.ts';

// The dashboard in a real browser: Debian's chromium driven by playwright-core.

const TITLE = browserSuiteTitle('dashboard in a browser');

describe.skipIf(!HAVE_CHROMIUM)(TITLE, () => {
  describeEachDatabase('sign-up and API keys', (app) => {
    // One browser per database, with a fresh profile, closed before the app stops (an open
    // browser keeps idle connections to the server).
    const browser = useChromium();

    it('signs up, creates a key shown once, uses it on both surfaces, revokes it', async () => {
      const base = app().base;
      const page = await browser().newPage();
      try {
        const email = `browser-${randomBytes(5).toString('hex')}@example.com`;
        await page.goto(`${base}/users/sign_up`);
        await page.getByLabel('Email').fill(email);
        await page.getByLabel('Your name').fill('Grace Browser');
        await page.getByLabel('Account name').fill('Hopper Labs');
        await page.getByLabel('Password').fill('correct horse battery staple');
        await screenshot(page, `sign-up-${app().kind}`);
        await Promise.all([page.waitForURL(`${base}/`), page.getByRole('button', { name: 'Create account' }).click()]);
        await expect(page.getByRole('heading', { name: 'Mailboxes' }).isVisible()).resolves.toBe(true);
        await expect(page.getByText('Hopper Labs').first().isVisible()).resolves.toBe(true);

        await Promise.all([page.waitForURL(`${base}/settings/api_keys`), page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'API keys' }).click()]);
        await page.getByLabel('Label').fill('browser test key');
        await page.getByLabel('Scope').selectOption('mailbox_admin');
        await page.getByRole('button', { name: 'Create API key' }).click();
        const shown = page.getByTestId('new-key');
        await shown.waitFor();
        const token = (await shown.textContent())!.trim();
        expect(token).toMatch(/^cubby_[A-Za-z0-9]{40}$/);
        // Shown in the POST's response, never in a URL.
        expect(page.url()).toBe(`${base}/settings/api_keys`);
        await screenshot(page, `api-keys-${app().kind}`);

        const r = await app().request('GET', '/v1/status', { key: token });
        expect(r.status).toBe(200);
        const accountId = r.body.data.account.id as string;
        expect(r.body.data.account.name).toBe('Hopper Labs');
        expect(r.body.data.user.email).toBe(email);
        const a = await app().request('GET', '/api/v1/status', { key: token });
        expect(a.status).toBe(200);
        expect(a.body.data.account.id).toBe(accountId);

        // Reloading shows the key's hint, not the key.
        await page.goto(`${base}/settings/api_keys`);
        expect(await page.content()).not.toContain(token);
        const row = page.locator('tr', { hasText: 'browser test key' });
        await expect(row.getByText('active').isVisible()).resolves.toBe(true);
        await Promise.all([page.waitForURL(`${base}/settings/api_keys`), row.getByRole('button', { name: 'Revoke' }).click()]);
        await page.locator('tr', { hasText: 'browser test key' }).getByText('revoked').first().waitFor();

        const after = await app().request('GET', '/v1/status', { key: token });
        expect(after.status).toBe(401);
        expect(after.body.error.code).toBe('API_KEY_REVOKED');
        expect((await app().request('GET', '/api/v1/status', { key: token })).status).toBe(401);

        // Sign out from the header; the dashboard then asks to sign in.
        await Promise.all([page.waitForURL(`${base}/users/sign_in`), page.getByRole('button', { name: 'Sign out' }).click()]);
        await page.goto(`${base}/settings/api_keys`);
        expect(page.url()).toBe(`${base}/users/sign_in?next=%2Fsettings%2Fapi_keys`);
      } finally {
        await page.close();
      }
    });
  });
});
