import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DATABASES, type TestApp } from './harness.ts';
import { startClockApp, testClock } from './agent-helpers.ts';
import { newBucket, publishAndWait, publisher, siteFetch, uploadFolder } from './sites-helpers.ts';

// A renamed slug answers 301 to the same path on the current address for 30 days, for the main
// site and its preview host; a slug another bucket takes since serves that bucket.

for (const kind of DATABASES) {
  describe(`renamed site slugs redirect [${kind}]`, () => {
    const clock = testClock();
    let app: TestApp;
    beforeAll(async () => {
      app = await startClockApp(kind, clock);
    });
    afterAll(async () => app?.stop());

    it('301 to the current address with path and query, then 404 after 30 days; a new owner of the slug wins', async () => {
      const u = await publisher(app);
      const a = await newBucket(app, u.key, 'Gamma');
      const b = await newBucket(app, u.key, 'Delta');
      await uploadFolder(app, u.key, a.id, { 'index.html': 'gamma', 'docs/page.html': 'gamma page' });
      await uploadFolder(app, u.key, b.id, { 'index.html': 'delta' });
      const tag = Math.random().toString(36).slice(2, 7);
      const [s1, s2, s3] = [`gamma-${tag}`, `gamma-two-${tag}`, `gamma-three-${tag}`];
      const pa = await publishAndWait(app, u.key, a.id, { slug_suggestions: [s1] });
      expect(pa.public_slug).toBe(s1);
      await publishAndWait(app, u.key, b.id);
      const rename = async (id: string, public_slug: string) => {
        const r = await app.request('PATCH', `/api/v1/buckets/${id}/custom_domains/public_slug`, { key: u.key, body: { public_slug } });
        expect(r.status, r.text).toBe(200);
        return r.body.data.public_url as string;
      };
      const oldUrl = pa.public_url as string;
      const newUrl = await rename(a.id, s2);

      const moved = await siteFetch(`${oldUrl}/docs/page.html?x=1&y=%20`);
      expect(moved.status).toBe(301);
      expect(moved.headers.location).toBe(`${newUrl}/docs/page.html?x=1&y=%20`);
      expect((await siteFetch(moved.headers.location as string)).text).toBe('gamma page');
      expect((await siteFetch(oldUrl, { method: 'HEAD' })).status).toBe(301);
      // The preview host of the old slug points at the preview host of the new one.
      const preview = await siteFetch(oldUrl.replace(`//${s1}.`, `//preview-${s1}.`));
      expect(preview.status).toBe(301);
      expect(preview.headers.location).toBe(`${newUrl.replace(`//${s2}.`, `//preview-${s2}.`)}/`);

      // Another bucket takes the old slug: it serves that bucket, no redirect.
      await rename(b.id, s1);
      const taken = await siteFetch(oldUrl);
      expect(taken.status).toBe(200);
      expect(taken.text).toBe('delta');

      // A second rename: the last slug redirects too, until 30 days have passed.
      const third = await rename(a.id, s3);
      expect((await siteFetch(newUrl)).headers.location).toBe(`${third}/`);
      clock.advance(29 * 86_400);
      expect((await siteFetch(newUrl)).status).toBe(301);
      clock.advance(2 * 86_400);
      expect((await siteFetch(newUrl)).status).toBe(404);
      expect((await siteFetch(third)).text).toBe('gamma');
    });
  });
}
