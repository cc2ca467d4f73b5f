import fs from 'node:fs';
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import { browserSuiteTitle, HAVE_CHROMIUM, screenshot, useChromium } from './browser.ts';
import { describeEachDatabase } from './harness.ts';

// The API reference at /docs/api: Redoc's standalone bundle served from the npm package (no
// CDN, no other origin), rendering each surface's OpenAPI document in a real browser.

const require = createRequire(import.meta.url);

describeEachDatabase(
  'API reference page',
  (app) => {
    it('serves the page without a key, and the viewer from the installed package', async () => {
      const res = await fetch(`${app().base}/docs/api`);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^text\/html/);
      expect(res.headers.get('content-security-policy')).toContain("script-src 'self'");
      const html = await res.text();
      expect(html).toContain('spec-url="/v1/openapi.json"');
      expect(html).toContain('<script src="/docs/api/redoc.standalone.js"></script>');
      expect(html).not.toMatch(/https?:\/\/(?!cubby)/); // nothing from another origin
      const a = await (await fetch(`${app().base}/docs/api?surface=a`)).text();
      expect(a).toContain('spec-url="/api/v1/openapi.json"');

      const js = await fetch(`${app().base}/docs/api/redoc.standalone.js`);
      expect(js.status).toBe(200);
      expect(js.headers.get('content-type')).toMatch(/^text\/javascript/);
      const body = Buffer.from(await js.arrayBuffer());
      expect(body.equals(fs.readFileSync(require.resolve('redoc/bundles/redoc.standalone.js')))).toBe(true);
    });
  },
  {},
  { only: ['sqlite'] },
);

describe.skipIf(!HAVE_CHROMIUM)(browserSuiteTitle('API reference in a browser'), () => {
  describeEachDatabase(
    'API reference',
    (app) => {
      const browser = useChromium();

      for (const [surface, heading, operation, field] of [
        ['r', 'Cubby API (surface R)', 'List mailboxes (newest first) with counts', 'mailboxes'],
        ['a', 'Cubby API (surface A)', 'Publish the bucket as a website (202; poll the publication until ready or failed)', 'publication'],
      ] as const) {
        it(`renders the surface ${surface.toUpperCase()} document with its operations, responses and schemas`, async () => {
          const page = await browser().newPage();
          const foreign: string[] = [];
          const errors: string[] = [];
          // Redoc's footer asks for a logo from its CDN; the page's CSP refuses it, so nothing is fetched from another origin.
          page.on('response', (r) => {
            const u = new URL(r.url());
            if (!['blob:', 'data:'].includes(u.protocol) && u.origin !== new URL(app().base).origin) foreign.push(r.url());
          });
          page.on('pageerror', (e) => errors.push(String(e)));
          try {
            await page.setViewportSize({ width: 1280, height: 900 });
            const res = await page.goto(`${app().base}/docs/api?surface=${surface}`);
            expect(res?.status()).toBe(200);
            await page.getByRole('heading', { name: heading }).first().waitFor({ timeout: 30_000 });
            // the operation, its response body's fields, and its error responses with their codes
            const op = page.getByRole('heading', { name: operation });
            await op.waitFor({ timeout: 10_000 });
            await op.scrollIntoViewIfNeeded();
            await page.getByText(field, { exact: true }).first().waitFor({ state: 'attached' });
            await page.getByText(/Error codes: `?[A-Z_]+/).first().waitFor({ state: 'attached' });
            await screenshot(page, `api-docs-${surface}`);
            expect(foreign).toEqual([]);
            expect(errors).toEqual([]);
          } finally {
            await page.close();
          }
          // Redoc lays out the whole document (about a hundred operations) before it shows anything.
        }, 120_000);
      }
    },
    {},
    { only: ['sqlite'] },
  );
});
