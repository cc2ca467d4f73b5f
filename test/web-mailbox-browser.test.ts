import { describe, expect, it } from 'vitest';
import { browserSuiteTitle, HAVE_CHROMIUM, screenshot, useChromium } from './browser.ts';
import { describeEachDatabase } from './harness.ts';
import { inbox, receive } from './emails-helpers.ts';

// The mailbox and email pages in a real browser (Debian's chromium, as test/web-browser.test.ts):
// hostile mail runs nothing, and the read button works.
const TITLE = browserSuiteTitle('mailbox pages in a browser');

describe.skipIf(!HAVE_CHROMIUM)(TITLE, () => {
  describeEachDatabase('mailbox and email pages', (app) => {
    const browser = useChromium();

    it('goes from the dashboard to an email, runs none of its markup, and marks it read', async () => {
      const base = app().base;
      const user = await app().user({ name: 'Browser Reader' });
      const box = await inbox(app(), user);
      const subject = 'Hi <img src=x onerror=alert(1)>';
      await receive(app(), box, { subject, text: 'Line one\n<script>alert(2)</script>', html: '<script>alert(3)</script><b>bold</b>' });

      const page = await browser().newPage();
      const dialogs: string[] = [];
      page.on('dialog', (d) => {
        dialogs.push(d.message());
        void d.dismiss();
      });
      try {
        await page.goto(`${base}/users/sign_in`);
        await page.getByLabel('Email').fill(user.email);
        await page.getByLabel('Password').fill('a long test password');
        await Promise.all([page.waitForURL(`${base}/`), page.getByRole('button', { name: 'Sign in' }).click()]);

        const mailboxTitle = (await app().request('GET', `/v1/mailboxes/${box.id}`, { key: user.key })).body.data.mailbox.title as string;
        await Promise.all([page.waitForURL(`${base}/mailboxes/${box.id}`), page.getByRole('link', { name: mailboxTitle }).click()]);
        await screenshot(page, `mailbox-${app().kind}`);
        await Promise.all([page.waitForURL(/\/emails\/eml_/), page.getByRole('link', { name: subject }).click()]);
        await expect(page.getByRole('heading', { name: subject }).isVisible()).resolves.toBe(true);
        // The HTML part is shown in a sandboxed frame; its script never runs (no dialog below).
        await expect(page.frameLocator('iframe.mail-html').locator('b').textContent()).resolves.toBe('bold');
        await page.getByRole('link', { name: 'Text', exact: true }).click();
        await page.locator('pre.mail').waitFor();
        expect((await page.locator('pre.mail').textContent())?.trimEnd()).toBe('Line one\n<script>alert(2)</script>');
        expect(await page.locator('img').count()).toBe(0);
        await screenshot(page, `email-${app().kind}`);

        await page.getByRole('button', { name: 'Mark as read' }).click();
        await page.getByRole('button', { name: 'Mark as unread' }).waitFor();
        const after = await app().request('GET', `/v1/mailboxes/${box.id}`, { key: user.key });
        expect(after.body.data.mailbox.email.unread_count).toBe(0);
        expect(dialogs).toEqual([]);
      } finally {
        await page.close();
      }
    });
  });
});
