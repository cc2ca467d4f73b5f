import { describe, expect, it } from 'vitest';
import { browserSuiteTitle, HAVE_CHROMIUM, screenshot, useChromium } from './browser.ts';
import { describeEachDatabase } from './harness.ts';
import { inbox, receive } from './emails-helpers.ts';
import { labelNow } from './smtp-helpers.ts';
import { makePdf } from './search-documents.ts';

// The dashboard search in a real browser: a word only inside a PDF attached to an email finds the
// email and the file, from the home page's box and from the mailbox page's box.
const TITLE = browserSuiteTitle('search in a browser');

describe.skipIf(!HAVE_CHROMIUM)(TITLE, () => {
  describeEachDatabase('dashboard search', (app) => {
    const browser = useChromium();

    it('finds an email and its PDF by a word inside the PDF, and opens the email', async () => {
      const base = app().base;
      const user = await app().user({ name: 'Searcher' });
      const box = await inbox(app(), user);
      const secret = `zq${Math.random().toString(36).slice(2, 9)}`;
      const subject = 'Scanned <b>contract</b>';
      await receive(app(), box, { subject, text: 'attached', attachments: [{ filename: 'contract.pdf', content: makePdf(`Signed by ${secret} on Monday`), contentType: 'application/pdf' }] });
      await labelNow(app());

      const page = await browser().newPage();
      try {
        await page.goto(`${base}/users/sign_in`);
        await page.getByLabel('Email').fill(user.email);
        await page.getByLabel('Password').fill('a long test password');
        await Promise.all([page.waitForURL(`${base}/`), page.getByRole('button', { name: 'Sign in' }).click()]);

        await page.getByLabel('Search mail and files').fill(secret);
        await Promise.all([page.waitForURL(/\/search\?q=/), page.getByRole('button', { name: 'Search' }).click()]);
        const rows = page.locator('tbody tr');
        await expect(rows.count()).resolves.toBe(2);
        await expect(page.getByText(`Signed by ${secret} on Monday`).count()).resolves.toBe(2);
        await expect(page.getByRole('link', { name: 'contract.pdf' }).count()).resolves.toBe(1);
        await screenshot(page, `search-${app().kind}`);

        await Promise.all([page.waitForURL(/\/emails\/eml_/), page.getByRole('link', { name: subject }).click()]);
        await expect(page.getByRole('heading', { name: subject }).isVisible()).resolves.toBe(true);

        await page.goto(`${base}/mailboxes/${box.id}`);
        await page.getByLabel('Search this mailbox').fill(`${secret} -monday`);
        await Promise.all([page.waitForURL(/\/search\?q=/), page.getByRole('button', { name: 'Search' }).click()]);
        await expect(page.getByText('Nothing matches.').isVisible()).resolves.toBe(true);

        await page.goto(`${base}/search?q=${encodeURIComponent('-only')}`);
        await expect(page.getByRole('alert').textContent()).resolves.toContain('at least one word');
      } finally {
        await page.close();
      }
    });
  });
});
