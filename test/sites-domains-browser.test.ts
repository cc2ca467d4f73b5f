import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { browserSuiteTitle, HAVE_CHROMIUM, useChromium } from './browser.ts';
import { DATABASES, startTestApp, type TestApp } from './harness.ts';
import { startTestZone, type TestZone } from './dns-zone.ts';
import { expectAccessible, shoot, signIn } from './workspace-helpers.ts';
import { newBucket, publishAndWait, publisher, siteFetch, uploadFolder } from './sites-helpers.ts';
import { WebClient } from './web-client.ts';

// The "Custom domains" card of the dashboard's site page, in Chromium: add a domain, read the
// DNS records from the table, publish them, verify, see the site on its host, remove it.

describe.skipIf(!HAVE_CHROMIUM)(browserSuiteTitle('custom site domains in the dashboard'), () => {
  for (const kind of DATABASES) {
    describe(`[${kind}]`, () => {
      let zone: TestZone;
      let app: TestApp;
      beforeAll(async () => {
        zone = await startTestZone();
        app = await startTestApp(kind, {}, { resolver: zone.resolver });
      });
      afterAll(async () => {
        await app?.stop();
        await zone?.close();
      });
      const browser = useChromium();

      it('add, read the records table, verify, remove', async () => {
        const root = `web-${kind}.test`;
        zone.addZone(root);
        const host = `www.${root}`;
        const u = await publisher(app);
        const bucket = await newBucket(app, u.key, 'Garden Club');
        await uploadFolder(app, u.key, bucket.id, { 'index.html': '<h1>Garden Club</h1>' });
        await publishAndWait(app, u.key, bucket.id);
        const page = await browser().newPage();
        try {
          await signIn(page, app.base, u.email);
          await page.goto(`${app.base}/mailboxes/${bucket.id}/site`);
          await page.getByLabel('Domain').fill(`WWW.${root}.`);
          await Promise.all([page.waitForURL(`${app.base}/mailboxes/${bucket.id}/site`), page.getByRole('button', { name: 'Add domain' }).click()]);
          const card = page.locator('[data-testid="site-domain"]');
          await expect(card.getByRole('heading', { name: host }).count()).resolves.toBe(1);
          await expect(card.getByRole('status').first().textContent()).resolves.toBe('Waiting for DNS');
          const rows = await card.locator('tbody tr').allTextContents();
          expect(rows).toHaveLength(2);
          expect(rows[0]).toContain('_cubby-verification.www');
          expect(rows[1]).toMatch(/^CNAMEwwwlocalhost/);
          await expectAccessible(page);
          await shoot(page, `site-domains-pending-${kind}`);

          // Publish what the table says, then Verify.
          const txt = (await card.locator('tbody tr').first().locator('td').nth(2).textContent())!;
          zone.txt(`_cubby-verification.${host}`, txt);
          zone.cname(host, 'localhost');
          await Promise.all([page.waitForURL(`${app.base}/mailboxes/${bucket.id}/site`), card.getByRole('button', { name: 'Verify' }).click()]);
          await expect(page.locator('[data-testid="site-domain"]').getByRole('status').first().textContent()).resolves.toBe('Connected');
          await expect(page.locator('[data-testid="site-domain"] tbody tr td:last-child').allTextContents()).resolves.toEqual(['found', 'found']);
          await expectAccessible(page);
          await shoot(page, `site-domains-verified-${kind}`);
          expect((await siteFetch(`http://${host}:${app.started.ports.sites}/`)).text).toBe('<h1>Garden Club</h1>');

          await Promise.all([page.waitForURL(`${app.base}/mailboxes/${bucket.id}/site`), page.getByRole('button', { name: 'Remove' }).click()]);
          await expect(page.locator('[data-testid="site-domain"]').count()).resolves.toBe(0);
          expect((await siteFetch(`http://${host}:${app.started.ports.sites}/`)).status).toBe(404);
        } finally {
          await page.close();
        }
      });

      it('refusals show on the page; posts without the CSRF token change nothing', async () => {
        const u = await publisher(app);
        const bucket = await newBucket(app, u.key);
        const c = new WebClient(app.base);
        expect((await c.signIn(u.email, 'a long test password')).status).toBe(303);
        const bad = await c.submit(`/mailboxes/${bucket.id}/site`, `/mailboxes/${bucket.id}/site/domain-add`, { hostname: 'www.example.org:8080' });
        expect(bad.status).toBe(422);
        expect(bad.text).toContain('must not carry a port');
        const forged = await c.request('POST', `/mailboxes/${bucket.id}/site/domain-add`, { hostname: 'www.example.org' });
        expect(forged.status).toBe(403);
        expect((await app.request('GET', `/api/v1/buckets/${bucket.id}/custom_domains`, { key: u.key })).body.data.domains).toEqual([]);
      });
    });
  }
});
