import { describe, expect, it } from 'vitest';
import { browserSuiteTitle, HAVE_CHROMIUM, useChromium } from './browser.ts';
import { describeEachDatabase } from './harness.ts';
import { dbOf } from './factories.ts';
import { newBucket, publishAndWait, publisher, siteFetch, uploadFolder } from './sites-helpers.ts';
import { expectAccessible, overflowsSideways, shoot, signIn } from './workspace-helpers.ts';

// The site page's Visits card in Chromium: the chart (uPlot, served from our origin under the
// dashboard's CSP), the totals and top tables, the table when the chart script does not run,
// axe-core, and no sideways overflow at 390 px. Screenshots land in test/artifacts/.

const TITLE = browserSuiteTitle('site analytics in the dashboard');
const DAY = 86_400_000;

describe.skipIf(!HAVE_CHROMIUM)(TITLE, () => {
  describeEachDatabase(
    'site visits',
    (app) => {
      const browser = useChromium();

      it('shows a chart of views and visitors, top pages and referrers; the table stands in without the script', { timeout: 120_000 }, async () => {
        const u = await publisher(app());
        const bucket = await newBucket(app(), u.key, 'Field Notes');
        await uploadFolder(app(), u.key, bucket.id, { 'index.html': '<h1>Field notes</h1>', 'posts/moths.html': '<h1>Moths</h1>', 'posts/ferns-of-the-north-west-with-a-rather-long-name.html': '<h1>Ferns</h1>' });
        const p = await publishAndWait(app(), u.key, bucket.id);
        // Earlier days, as the flushes of past days left them (the chart needs a history to show).
        const db = dbOf(app());
        const today = Date.now() - (Date.now() % DAY);
        for (let d = 6; d >= 1; d--) {
          const day = new Date(today - d * DAY).toISOString();
          const views = [12, 18, 9, 25, 31, 22][6 - d]!;
          await db.insertInto('site_analytics_hours').values({ publication_id: p.id, hour: day.replace('T00', 'T09'), requests: views * 3, views, visitors: Math.ceil(views / 2), bytes: views * 40_000 }).execute();
          await db.insertInto('site_analytics_days').values({ publication_id: p.id, day: day.slice(0, 10), visitors: Math.ceil(views / 2) }).execute();
        }
        // Today: real visits through the sites server.
        const agents = ['Mozilla/5.0 Firefox/133.0', 'Mozilla/5.0 Chrome/131.0', 'Mozilla/5.0 Safari/605.1'];
        for (const [i, ua] of agents.entries()) {
          await siteFetch(`${p.public_url}/`, { headers: { 'user-agent': ua, referer: i === 0 ? 'https://news.example.com/item?id=1' : 'https://mastodon.example/@ada' } });
          await siteFetch(`${p.public_url}/posts/moths.html`, { headers: { 'user-agent': ua } });
        }
        await siteFetch(`${p.public_url}/posts/ferns-of-the-north-west-with-a-rather-long-name.html`, { headers: { 'user-agent': agents[0]! } });
        await app().started.flushSiteAnalytics();

        const page = await browser().newPage();
        page.setDefaultTimeout(8000);
        try {
          await signIn(page, app().base, u.email);
          await page.goto(`${app().base}/mailboxes/${bucket.id}/site`);
          await page.locator('#visits .uplot canvas').first().waitFor();
          await expect(page.getByTestId('visits-views').textContent()).resolves.toBe(String(12 + 18 + 9 + 25 + 31 + 22 + 7));
          await expect(page.getByTestId('visits-visitors').textContent()).resolves.toBe(String(6 + 9 + 5 + 13 + 16 + 11 + 3));
          const pages = page.getByRole('table', { name: 'Top pages' });
          await expect(pages.getByRole('row').nth(1).textContent()).resolves.toMatch(/^\/\s*3$/);
          await expect(page.getByRole('table', { name: 'Referrers' }).textContent()).resolves.toContain('mastodon.example');
          // The numbers stay reachable behind a disclosure once the chart is drawn.
          await page.getByText('Numbers', { exact: true }).click();
          await expectAccessible(page);
          await shoot(page, `site-visits-${app().kind}`);
          await page.setViewportSize({ width: 390, height: 844 });
          await page.waitForFunction(() => (document.querySelector('#visits .uplot') as HTMLElement).offsetWidth <= 390);
          expect(await overflowsSideways(page)).toMatchObject({ overflow: false });
          await shoot(page, `narrow-site-visits-${app().kind}`);
          await page.setViewportSize({ width: 1280, height: 720 });

          // Hourly: a link, no script needed.
          await Promise.all([page.waitForURL(/range=48h/), page.getByRole('link', { name: '48 hours' }).click()]);
          await expect(page.locator('#visits figcaption').textContent()).resolves.toContain('per hour');
        } finally {
          await page.close();
        }

        // Without the chart script the table is the chart, in full view.
        const plain = await browser().newPage();
        try {
          await plain.route('**/assets/site-chart.js*', (route) => route.abort());
          await plain.goto(`${app().base}/mailboxes/${bucket.id}/site`);
          const table = plain.locator('#visits [data-chart-table] table');
          await expect(table.isVisible()).resolves.toBe(true);
          expect(await plain.locator('#visits .uplot').count()).toBe(0);
          await expect(table.locator('tbody tr').last().textContent()).resolves.toMatch(/7\s*3$/);
          await expectAccessible(plain);
        } finally {
          await plain.close();
        }
      });
    },
    { CUBBY_SITE_ANALYTICS_FLUSH_MS: '3600000' },
  );
});
