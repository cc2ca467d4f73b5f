import fs from 'node:fs';
import { createRequire } from 'node:module';
import * as OTPAuth from 'otpauth';
import { describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { browserSuiteTitle, HAVE_CHROMIUM, screenshot, useChromium } from './browser.ts';
import { describeAccounts, linkIn, mailTo } from './account-helpers.ts';
import { WebClient } from './web-client.ts';

// The bad-input cases of accounts and sign-in in Chromium, each shown to the person with a clear
// message and changing nothing: sign-up by invitation only, an invitation for another address and
// used twice, a collaborator posting an admin form, a form without its CSRF token, the last owner,
// a TOTP code reused inside its window, a recovery code used twice, and password reset (the link
// used twice, and a link for a deleted login), and wrong passwords that slow one browser down but
// never lock the person out. Codes are computed here, on the test's clock.

const AXE = fs.readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const PASSWORD = 'a long test password';

async function expectAccessible(page: Page): Promise<void> {
  await page.evaluate(AXE);
  const violations = await page.evaluate(async () => {
    const r = await (globalThis as any).axe.run(document, { resultTypes: ['violations'] });
    return r.violations.map((v: any) => `${v.id}: ${v.help} (${v.nodes.map((n: any) => n.target.join(' ')).join(', ')})`);
  });
  expect(violations).toEqual([]);
}

async function signIn(page: Page, base: string, email: string, password = PASSWORD): Promise<void> {
  await page.goto(`${base}/users/sign_in`);
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForLoadState();
}

/**
 * Posts a form the page does not offer, as a hand-made request from that page would: with the
 * page's own CSRF token, or none. Resolves once the answer page has loaded.
 */
async function forge(page: Page, action: string, fields: Record<string, string>, withCsrf = true): Promise<void> {
  await Promise.all([
    page.waitForURL((u) => u.pathname === action),
    page.evaluate(
      ({ action, fields, withCsrf }) => {
        const form = document.createElement('form');
        form.method = 'post';
        form.action = action;
        const token = (document.querySelector('input[name="_csrf"]') as HTMLInputElement | null)?.value;
        for (const [name, value] of Object.entries({ ...fields, ...(withCsrf && token ? { _csrf: token } : {}) })) {
          const input = document.createElement('input');
          input.type = 'hidden';
          input.name = name;
          input.value = value;
          form.append(input);
        }
        document.body.append(form);
        form.submit();
      },
      { action, fields, withCsrf },
    ),
  ]);
}

const text = (page: Page) => page.locator('body').innerText();

describe.skipIf(!HAVE_CHROMIUM)(browserSuiteTitle('account bad input in a browser'), () => {
  describeAccounts('account bad input', (env) => {
    const browser = useChromium();

    it('invitations, roles, the last owner, a collaborator on an admin form and a missing CSRF token', async () => {
      const { app, sink } = env();
      const base = app.base;
      const owner = await app.user({ name: 'Olivia Owner' });
      const tag = owner.userId.slice(-6).toLowerCase();
      const bob = await app.user({ email: `bob-${tag}@example.com`, name: 'Bob Builder' });
      const eve = await app.user({ email: `eve-${tag}@example.com`, name: 'Eve' });
      const db = app.started.deps.db;
      const roleOf = async (userId: string) => (await db.selectFrom('memberships').select('role').where('account_id', '=', owner.accountId).where('user_id', '=', userId).executeTakeFirst())?.role;
      await browser().clearCookies();
      const page = await browser().newPage();
      try {
        // Sign-up is by invitation once the instance has people.
        await page.goto(`${base}/users/sign_up`);
        expect(await text(page)).toContain('by invitation');
        await expectAccessible(page);

        await signIn(page, base, owner.email);
        await page.goto(`${base}/account/members?account=${owner.accountId}`);
        await page.getByLabel('Email').fill(bob.email);
        await Promise.all([page.waitForURL(/done=invited/), page.getByRole('button', { name: 'Send invitation' }).click()]);
        const link = linkIn((await mailTo(sink, bob.email, /invited you/)).text, app, '/invitations/');

        // The only owner cannot demote themselves, even with a hand-made form.
        await forge(page, '/account/members/role', { account_id: owner.accountId, user_id: owner.userId, role: 'collaborator' });
        expect(await text(page)).toContain('An account keeps at least one owner');
        await expectAccessible(page);
        await screenshot(page, `last-owner-${app.kind}`);
        expect(await roleOf(owner.userId)).toBe('owner');
        // A form without its CSRF token does nothing.
        await page.goto(`${base}/account/members?account=${owner.accountId}`);
        await forge(page, '/account/members/remove', { account_id: owner.accountId, user_id: owner.userId }, false);
        expect(await text(page)).toContain('This form has expired');
        await expectAccessible(page);
        expect(await roleOf(owner.userId)).toBe('owner');

        // Eve opens Bob's invitation: refused, and she joins nothing.
        await browser().clearCookies();
        await signIn(page, base, eve.email);
        await page.goto(`${base}${link}`);
        await page.getByRole('button', { name: 'Accept invitation' }).click();
        await page.waitForLoadState();
        expect(await text(page)).toContain('another email address');
        await expectAccessible(page);
        expect(await roleOf(eve.userId)).toBeUndefined();

        // Bob accepts once; the link then says it was used.
        await browser().clearCookies();
        await signIn(page, base, bob.email);
        await page.goto(`${base}${link}`);
        await Promise.all([page.waitForURL(/\/account\/members/), page.getByRole('button', { name: 'Accept invitation' }).click()]);
        expect(await roleOf(bob.userId)).toBe('collaborator');
        // As a collaborator he is offered no admin form, and a hand-made one is refused.
        expect(await text(page)).toContain('Only owners and administrators can invite or change members.');
        await expect(page.getByRole('button', { name: 'Change role' }).count()).resolves.toBe(0);
        await forge(page, '/account/members/role', { account_id: owner.accountId, user_id: bob.userId, role: 'owner' });
        expect(await text(page)).toContain('Only an owner or administrator of the account can do this.');
        await screenshot(page, `collaborator-admin-form-${app.kind}`);
        expect(await roleOf(bob.userId)).toBe('collaborator');
        await page.goto(`${base}${link}`);
        expect(await text(page)).toContain('already used');
        await expectAccessible(page);

        // The owner makes Bob an administrator, then removes him.
        await browser().clearCookies();
        await signIn(page, base, owner.email);
        await page.goto(`${base}/account/members?account=${owner.accountId}`);
        await page.getByLabel(`Role for ${bob.email}`).selectOption('administrator');
        await Promise.all([page.waitForURL(/done=role/), page.getByRole('button', { name: 'Change role' }).click()]);
        expect(await roleOf(bob.userId)).toBe('administrator');
        await Promise.all([page.waitForURL(/done=removed/), page.getByRole('button', { name: 'Remove Bob Builder' }).click()]);
        expect(await text(page)).toContain('Member removed.');
        expect(await roleOf(bob.userId)).toBeUndefined();

        // Five wrong passwords for Eve from this browser stop it from trying her login…
        await browser().clearCookies();
        for (let i = 0; i < 5; i++) await signIn(page, base, eve.email, `wrong password ${i}`);
        await signIn(page, base, eve.email);
        expect(await text(page)).toContain('Too many failed sign-in attempts');
        await expectAccessible(page);
        await screenshot(page, `sign-in-throttled-${app.kind}`);
        // …but never lock Eve out: her right password from another address still signs her in.
        const elsewhere = new WebClient(base);
        expect((await elsewhere.signIn(eve.email, PASSWORD)).status).toBe(303);
      } finally {
        await page.close();
      }
    });

    it('two-factor: a code reused inside its window and a recovery code used twice; password reset links', async () => {
      const { app, sink, clock } = env();
      const base = app.base;
      const user = await app.user({ name: 'Tess Two-Factor' });
      await browser().clearCookies();
      const page = await browser().newPage();
      try {
        await signIn(page, base, user.email);
        await page.goto(`${base}/account/security`);
        await page.getByRole('button', { name: 'Set up two-factor sign-in' }).click();
        const secret = (await page.getByTestId('totp-secret').textContent())!.trim();
        const totp = new OTPAuth.TOTP({ secret: OTPAuth.Secret.fromBase32(secret), digits: 6, period: 30, algorithm: 'SHA1' });
        const first = totp.generate({ timestamp: clock.now().getTime() });
        await page.getByLabel('Six-digit code').fill(first);
        await page.getByRole('button', { name: 'Turn on two-factor' }).click();
        const codes = (await page.getByTestId('recovery-codes').textContent())!.trim().split('\n');

        // The code that turned it on, inside the same window: refused.
        await browser().clearCookies();
        await signIn(page, base, user.email);
        await page.waitForURL(/two_factor/);
        await page.getByLabel('Code').fill(first);
        await page.getByRole('button', { name: 'Sign in' }).click();
        await page.waitForLoadState();
        expect(await text(page)).toContain('already used');
        await expectAccessible(page);
        await screenshot(page, `totp-reused-${app.kind}`);
        // A recovery code signs in once…
        await page.getByLabel('Code').fill(codes[0]!);
        await Promise.all([page.waitForURL(`${base}/`), page.getByRole('button', { name: 'Sign in' }).click()]);
        // …and never again.
        await browser().clearCookies();
        await signIn(page, base, user.email);
        await page.waitForURL(/two_factor/);
        await page.getByLabel('Code').fill(codes[0]!);
        await page.getByRole('button', { name: 'Sign in' }).click();
        await page.waitForLoadState();
        expect(await text(page)).toContain('already used');
        clock.advance(30);
        await page.getByLabel('Code').fill(totp.generate({ timestamp: clock.now().getTime() }));
        await Promise.all([page.waitForURL(`${base}/`), page.getByRole('button', { name: 'Sign in' }).click()]);

        // Password reset, from the sign-in page: the link works once and ends every session.
        await browser().clearCookies();
        await page.goto(`${base}/users/sign_in`);
        await page.getByRole('link', { name: 'Forgot your password?' }).click();
        await page.getByLabel('Email').fill(user.email);
        await page.getByRole('button', { name: 'Send reset link' }).click();
        await page.waitForLoadState();
        expect(await text(page)).toContain('a reset link is on its way');
        await expectAccessible(page);
        const link = linkIn((await mailTo(sink, user.email, /Reset your Cubby password/)).text, app, '/users/password/edit');
        await page.goto(`${base}${link}`);
        await page.getByLabel('New password').fill('a fresh reset passphrase');
        await page.getByRole('button', { name: 'Set password and sign in again' }).click();
        await page.waitForLoadState();
        expect(await text(page)).toContain('Password changed');
        await page.goto(`${base}${link}`);
        expect(await text(page)).toContain('already used');
        await expectAccessible(page);

        // A reset link for a login deleted since.
        const gone = await app.user();
        const before = sink.messages.length;
        await page.goto(`${base}/users/password/new`);
        await page.getByLabel('Email').fill(gone.email);
        await page.getByRole('button', { name: 'Send reset link' }).click();
        await page.waitForLoadState();
        const orphan = linkIn((await mailTo(sink, gone.email, /Reset your Cubby password/, before)).text, app, '/users/password/edit');
        const db = app.started.deps.db;
        await db.deleteFrom('user_tokens').where('user_id', '=', gone.userId).execute();
        const keys = db.selectFrom('api_keys').select('id').where('user_id', '=', gone.userId);
        await db.deleteFrom('api_key_accounts').where('api_key_id', 'in', keys).execute();
        await db.deleteFrom('api_key_mailboxes').where('api_key_id', 'in', keys).execute();
        await db.deleteFrom('api_keys').where('user_id', '=', gone.userId).execute();
        await db.deleteFrom('memberships').where('user_id', '=', gone.userId).execute();
        await db.deleteFrom('users').where('id', '=', gone.userId).execute();
        const res = await page.goto(`${base}${orphan}`);
        expect(res!.status()).toBe(404);
        expect(await text(page)).toContain('not valid');
        await screenshot(page, `reset-deleted-user-${app.kind}`);

        // The new password signs in (two-factor still on).
        clock.advance(30);
        await signIn(page, base, user.email, 'a fresh reset passphrase');
        await page.waitForURL(/two_factor/);
        await page.getByLabel('Code').fill(totp.generate({ timestamp: clock.now().getTime() }));
        await Promise.all([page.waitForURL(`${base}/`), page.getByRole('button', { name: 'Sign in' }).click()]);
      } finally {
        await page.close();
      }
    });

    it('security page: a wrong current password changes nothing; sign out everywhere else ends the other sessions', async () => {
      const { app } = env();
      const base = app.base;
      const user = await app.user({ name: 'Sam Sessions' });
      const elsewhere = new WebClient(base);
      expect((await elsewhere.signIn(user.email, PASSWORD)).status).toBe(303);
      await browser().clearCookies();
      const page = await browser().newPage();
      try {
        await signIn(page, base, user.email);
        await page.goto(`${base}/account/security`);
        await expect(page.getByText('this browser').isVisible()).resolves.toBe(true);
        await page.getByLabel('Current password').fill('not my password');
        await page.getByLabel('New password').fill('another long passphrase');
        await page.getByRole('button', { name: 'Change password' }).click();
        await page.waitForLoadState();
        expect(await text(page)).toContain('Your current password is not correct');
        await expectAccessible(page);
        expect((await elsewhere.get('/account')).status).toBe(200);

        await page.goto(`${base}/account/security`);
        await Promise.all([page.waitForURL(/done=ended_all/), page.getByRole('button', { name: 'Sign out everywhere else' }).click()]);
        await expectAccessible(page);
        await screenshot(page, `sessions-ended-${app.kind}`);
        expect((await elsewhere.get('/account')).status).toBe(303);
        await page.goto(`${base}/account`);
        expect(new URL(page.url()).pathname).toBe('/account');
      } finally {
        await page.close();
      }
    });
  });
});
