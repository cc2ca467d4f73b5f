import fs from 'node:fs';
import { createRequire } from 'node:module';
import * as OTPAuth from 'otpauth';
import { describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { browserSuiteTitle, HAVE_CHROMIUM, screenshot, useChromium } from './browser.ts';
import { describeAccounts, linkIn, mailTo } from './account-helpers.ts';

// The account pages in Chromium: the account overview, inviting someone who then joins through
// the emailed link, turning on two-factor sign-in and signing in with a code. Every page is
// checked with axe-core.

const AXE = fs.readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

async function expectAccessible(page: Page): Promise<void> {
  await page.evaluate(AXE);
  const violations = await page.evaluate(async () => {
    const r = await (globalThis as any).axe.run(document, { resultTypes: ['violations'] });
    return r.violations.map((v: any) => `${v.id}: ${v.help} (${v.nodes.map((n: any) => n.target.join(' ')).join(', ')})`);
  });
  expect(violations).toEqual([]);
}

describe.skipIf(!HAVE_CHROMIUM)(browserSuiteTitle('account pages in a browser'), () => {
  describeAccounts('accounts', (env) => {
    const browser = useChromium();

    it('account overview, invitation, joining, two-factor set-up and sign-in', async () => {
      const { app, sink, clock } = env();
      const base = app.base;
      const owner = await app.user({ name: 'Olivia Owner' });
      const page = await browser().newPage();
      try {
        await page.goto(`${base}/users/sign_in`);
        await page.getByLabel('Email').fill(owner.email);
        await page.getByLabel('Password').fill('a long test password');
        await Promise.all([page.waitForURL(`${base}/`), page.getByRole('button', { name: 'Sign in' }).click()]);

        await page.goto(`${base}/account`);
        await expect(page.getByRole('heading', { name: 'Usage' }).isVisible()).resolves.toBe(true);
        expect(await page.locator('meter').count()).toBeGreaterThan(3);
        await expectAccessible(page);
        await screenshot(page, `account-${app.kind}`);

        await Promise.all([page.waitForURL(/\/account\/members/), page.getByRole('link', { name: 'Members' }).click()]);
        await page.getByLabel('Email').fill('grace@example.com');
        await page.getByLabel('Role', { exact: true }).selectOption('administrator');
        await Promise.all([page.waitForURL(/done=invited/), page.getByRole('button', { name: 'Send invitation' }).click()]);
        await expect(page.getByText('Invitation sent.').isVisible()).resolves.toBe(true);
        await expect(page.getByRole('cell', { name: 'grace@example.com' }).isVisible()).resolves.toBe(true);
        await expectAccessible(page);
        await screenshot(page, `members-${app.kind}`);
        await Promise.all([page.waitForURL(/sign_in/), page.getByRole('button', { name: 'Sign out' }).click()]);

        const link = linkIn((await mailTo(sink, 'grace@example.com', /invited you/)).text, app, '/invitations/');
        await page.goto(`${base}${link}`);
        await expectAccessible(page);
        await Promise.all([page.waitForURL(/sign_up/), page.getByRole('link', { name: 'create your login' }).click()]);
        await page.getByLabel('Your name').fill('Grace Member');
        await page.getByLabel('Password').fill('correct horse battery staple');
        await expectAccessible(page);
        await Promise.all([page.waitForURL(/\/account\/members/), page.getByRole('button', { name: 'Create account' }).click()]);
        await expect(page.getByRole('cell', { name: /Olivia Owner/ }).isVisible()).resolves.toBe(true);

        await page.goto(`${base}/account/security`);
        await expectAccessible(page);
        await page.getByRole('button', { name: 'Set up two-factor sign-in' }).click();
        const secret = (await page.getByTestId('totp-secret').textContent())!.trim();
        await expect(page.getByRole('img', { name: 'QR code for your authenticator app' }).isVisible()).resolves.toBe(true);
        await expectAccessible(page);
        await screenshot(page, `totp-setup-${app.kind}`);
        const totp = new OTPAuth.TOTP({ secret: OTPAuth.Secret.fromBase32(secret) });
        await page.getByLabel('Six-digit code').fill(totp.generate({ timestamp: clock.now().getTime() }));
        await page.getByRole('button', { name: 'Turn on two-factor' }).click();
        const codes = (await page.getByTestId('recovery-codes').textContent())!.trim().split('\n');
        expect(codes).toHaveLength(10);
        await expectAccessible(page);
        await screenshot(page, `recovery-codes-${app.kind}`);

        await page.goto(`${base}/account/security`);
        await Promise.all([page.waitForURL(/sign_in/), page.getByRole('button', { name: 'Sign out' }).click()]);
        await page.getByLabel('Email').fill('grace@example.com');
        await page.getByLabel('Password').fill('correct horse battery staple');
        await Promise.all([page.waitForURL(/two_factor/), page.getByRole('button', { name: 'Sign in' }).click()]);
        await expectAccessible(page);
        clock.advance(30);
        await page.getByLabel('Code').fill(totp.generate({ timestamp: clock.now().getTime() }));
        await Promise.all([page.waitForURL(`${base}/`), page.getByRole('button', { name: 'Sign in' }).click()]);
        await page.goto(`${base}/account/security`);
        await expect(page.getByText('9 recovery codes left').isVisible()).resolves.toBe(false);
        await expect(page.getByText('10 recovery codes left', { exact: false }).isVisible()).resolves.toBe(true);
        await screenshot(page, `security-${app.kind}`);
      } finally {
        await page.close();
      }
    });
  });
});
