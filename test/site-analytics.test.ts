import { durableGate } from './durable-gate.ts';
import { sql } from 'kysely';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.ts';
import { createApp } from '../src/app.ts';
import { DATABASES, describeEachDatabase, startTestApp, type TestApp } from './harness.ts';
import { dbOf, expectError } from './factories.ts';
import { mcpUrl } from './agent-helpers.ts';
import { newBucket, publishAndWait, publisher, siteFetch, uploadFolder } from './sites-helpers.ts';
import { emptyZone } from './harness.ts';
import { purgeSiteAnalytics } from '../src/sites/analytics/store.ts';
import { writeCountryDb } from './geoip-fixture.ts';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

// Site analytics end to end: visits over real HTTP to the sites server, counted in memory, written
// by a flush (awaited here; in production on a timer and at shutdown), read through the API and
// the MCP tool. The timer is set to an hour so that only the flushes a test asks for happen.

const ENV = { CUBBY_SITE_ANALYTICS_FLUSH_MS: '3600000', CUBBY_TRUST_PROXY_HOPS: '1' };
const CHROME = 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36 analytics-test';
const FIREFOX = 'Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0 analytics-test';
const IP_A = '203.0.113.77';

const visit = (url: string, ip: string, ua: string, extra: Record<string, string> = {}) => siteFetch(url, { headers: { 'x-forwarded-for': ip, 'user-agent': ua, ...extra } });

async function connect(app: TestApp, token: string): Promise<Client> {
  const client = new Client({ name: 'cubby-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(mcpUrl(app)), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
  return client;
}

/** A publisher with a published one-page site (its page says the title). */
async function onePageSite(app: TestApp, title: string, body: Record<string, unknown> = {}) {
  const u = await publisher(app);
  const bucket = await newBucket(app, u.key, title);
  await uploadFolder(app, u.key, bucket.id, { 'index.html': `<html><body>${title}</body></html>` });
  return { u, site: await publishAndWait(app, u.key, bucket.id, body) };
}

/** Every row of every table, as text: what a database dump would show. */
async function dumpDatabase(app: TestApp): Promise<string> {
  const db = dbOf(app);
  // Postgres lists every schema's tables; this app's are those of its own (search_path) schema.
  const tables = await db.introspection.getTables();
  const own = tables.some((t) => t.schema) ? (await sql<{ s: string }>`select current_schema() as s`.execute(db)).rows[0]!.s : undefined;
  const out: string[] = [];
  const mine = tables.filter((t) => t.schema === own);
  if (mine.length < 10) throw new Error(`only ${mine.length} tables found in schema ${own}`);
  for (const t of mine) out.push(JSON.stringify(await db.selectFrom(t.name as any).selectAll().execute()));
  return out.join('\n');
}

describeEachDatabase(
  'site analytics',
  (app) => {
    let user: Awaited<ReturnType<typeof publisher>>;
    let site: any;
    beforeAll(async () => {
      user = await publisher(app());
      const bucket = await newBucket(app(), user.key, 'Counted');
      await uploadFolder(app(), user.key, bucket.id, {
        'index.html': '<html><body><h1>Home</h1></body></html>',
        'about.html': '<html><body>About</body></html>',
        'style.css': 'body { color: black }',
      });
      site = await publishAndWait(app(), user.key, bucket.id);
      expect(site.publish_state).toBe('ready');
    });

    const analytics = (query: Record<string, string> = {}, key = user.key) => app().request('GET', `/api/v1/publications/${site.id}/analytics`, { key, query: { granularity: 'hour', ...query } });

    it('counts page views, unique visitors, referrers, paths, status codes and bytes; the API and the MCP tool show them', async () => {
      expect((await visit(`${site.public_url}/`, IP_A, CHROME, { referer: 'https://news.example.com/post/1?utm=x' })).status).toBe(200);
      // The same person again (same IP and browser): a second view, still one visitor.
      expect((await visit(`${site.public_url}/about.html`, IP_A, CHROME, { referer: `${site.public_url}/` })).status).toBe(200);
      // An asset and a missing page: requests and status codes, not page views.
      const css = await visit(`${site.public_url}/style.css`, IP_A, CHROME);
      expect(css.status).toBe(200);
      expect((await visit(`${site.public_url}/nope.html`, IP_A, CHROME)).status).toBe(404);
      // Same address, another browser: a second visitor.
      expect((await visit(`${site.public_url}/`, IP_A, FIREFOX)).status).toBe(200);
      // A robot: a request, not a view.
      expect((await visit(`${site.public_url}/`, '198.51.100.9', 'Googlebot/2.1 (+http://www.google.com/bot.html)')).status).toBe(200);
      await app().started.flushSiteAnalytics();

      const res = await analytics();
      expect(res.status, res.text).toBe(200);
      const a = res.body.data.analytics;
      expect(a).toMatchObject({ publication_id: site.id, granularity: 'hour', countries: [], countries_enabled: false });
      expect(a.totals).toMatchObject({ views: 3, visitors: 2, requests: 6 });
      expect(a.totals.bytes).toBeGreaterThan(css.body.length);
      expect(a.top_paths).toEqual([
        { value: '/', count: 2 },
        { value: '/about.html', count: 1 },
      ]);
      // Host only; the site's own pages are not referrers.
      expect(a.top_referrers).toEqual([{ value: 'news.example.com', count: 1 }]);
      expect(a.status_codes).toEqual([
        { value: '200', count: 5 },
        { value: '404', count: 1 },
      ]);
      const current = a.series.find((p: any) => p.views > 0);
      expect(current).toMatchObject({ views: 3, visitors: 2, requests: 6 });
      expect(a.series.length).toBe(24 * 7);

      const daily = (await analytics({ granularity: 'day' })).body.data.analytics;
      expect(daily.series.length).toBe(7);
      expect(daily.series.at(-1)).toMatchObject({ views: 3, visitors: 2 });

      const client = await connect(app(), user.key);
      try {
        const tools = await client.listTools();
        const tool = tools.tools.find((t) => t.name === 'bucket_analytics')!;
        expect(tool.annotations).toMatchObject({ readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false });
        const r: any = await client.callTool({ name: 'bucket_analytics', arguments: { bucket_id: site.bucket_id, granularity: 'day' } });
        expect(r.isError, r.content?.[0]?.text).toBeFalsy();
        expect(r.structuredContent.analytics.totals).toMatchObject({ views: 3, visitors: 2, requests: 6 });
        expect(r.structuredContent.analytics.top_paths[0]).toEqual({ value: '/', count: 2 });
        const none: any = await client.callTool({ name: 'bucket_analytics', arguments: { bucket_id: site.bucket_id, preview: true } });
        expect(none.isError).toBe(true);
        expect(none.structuredContent.error.code).toBe('PUBLICATION_NOT_FOUND');
      } finally {
        await client.close();
      }
    });

    it('stores no raw IP address or user agent anywhere in the database', async () => {
      await visit(`${site.public_url}/`, IP_A, CHROME);
      await app().started.flushSiteAnalytics();
      const seen = await dbOf(app()).selectFrom('site_analytics_seen').selectAll().where('publication_id', '=', site.id).execute();
      expect(seen.length).toBeGreaterThan(0);
      const dump = await dumpDatabase(app());
      expect(dump).toContain(site.id);
      for (const raw of [IP_A, CHROME, FIREFOX, 'analytics-test', 'Googlebot']) expect(dump).not.toContain(raw);
    });

    it('refuses bad ranges and granularities with catalogue codes; a foreign publication is 404', async () => {
      expectError(await analytics({ granularity: 'week' }), 'A', 422, 'ANALYTICS_GRANULARITY_INVALID');
      expectError(await analytics({ from: '2026-11-20', to: '2026-11-10' }), 'A', 422, 'ANALYTICS_RANGE_INVALID');
      expectError(await analytics({ from: 'yesterday' }), 'A', 422, 'ANALYTICS_RANGE_INVALID');
      // Local times without a zone are ambiguous: refused rather than guessed.
      expectError(await analytics({ from: '2026-11-20T10:00:00' }), 'A', 422, 'ANALYTICS_RANGE_INVALID');
      const long = await analytics({ from: '2026-01-01', to: '2026-03-01', granularity: 'hour' });
      expectError(long, 'A', 422, 'ANALYTICS_RANGE_INVALID');
      expect(long.body.error.message).toContain('31 days');
      expect((await analytics({ from: '2026-01-01', to: '2026-03-01', granularity: 'day' })).status).toBe(200);
      const stranger = await app().user();
      expectError(await analytics({}, stranger.key), 'A', 404, 'PUBLICATION_NOT_FOUND');
      expectError(await app().request('GET', '/api/v1/publications/pub_nope/analytics', { key: user.key }), 'A', 404, 'PUBLICATION_NOT_FOUND');
    });

    it('aligns the range to whole buckets: from down, to up', async () => {
      const a = (await analytics({ from: '2026-11-20T10:30:00Z', to: '2026-11-20T12:10:00Z' })).body.data.analytics;
      expect(a.from).toBe('2026-11-20T10:00:00.000Z');
      expect(a.to).toBe('2026-11-20T13:00:00.000Z');
      expect(a.series.map((p: any) => p.start)).toEqual(['2026-11-20T10:00:00.000Z', '2026-11-20T11:00:00.000Z', '2026-11-20T12:00:00.000Z']);
    });

    it('retention: rows older than the period go, and visitor hashes and salts of past days', async () => {
      const db = dbOf(app());
      // In the past: the purge must not touch the salts and counts the other tests are using.
      const now = new Date('2020-06-15T12:00:00.000Z');
      const pub = 'pub_retention0000000000000000';
      const hour = (daysAgo: number) => new Date(now.getTime() - daysAgo * 86_400_000).toISOString().slice(0, 13) + ':00:00.000Z';
      for (const d of [91, 89]) {
        await db.insertInto('site_analytics_hours').values({ publication_id: pub, hour: hour(d), requests: 1, views: 1, visitors: 1, bytes: 1 }).execute();
        await db.insertInto('site_analytics_counts').values({ publication_id: pub, hour: hour(d), dimension: 'path', value: '/', count: 1 }).execute();
        await db.insertInto('site_analytics_days').values({ publication_id: pub, day: hour(d).slice(0, 10), visitors: 1 }).execute();
      }
      for (const d of [2, 1, 0]) {
        await db.insertInto('site_analytics_seen').values({ publication_id: pub, period: hour(d).slice(0, 10), visitor: `v${d}` }).execute();
        await db.insertInto('site_analytics_seen').values({ publication_id: pub, period: hour(d).slice(0, 13), visitor: `v${d}` }).execute();
        await db.insertInto('site_analytics_salts').values({ day: `2020-06-${15 - d}`, salt: `s${d}`, created_at: now.toISOString() }).onConflict((oc) => oc.doNothing()).execute();
      }
      await purgeSiteAnalytics(db, now, 90);
      const left = async (t: 'site_analytics_hours' | 'site_analytics_counts') => (await db.selectFrom(t).select('hour').where('publication_id', '=', pub).execute()).map((r) => r.hour);
      expect(await left('site_analytics_hours')).toEqual([hour(89)]);
      expect(await left('site_analytics_counts')).toEqual([hour(89)]);
      expect((await db.selectFrom('site_analytics_days').select('day').where('publication_id', '=', pub).execute()).map((r) => r.day)).toEqual([hour(89).slice(0, 10)]);
      // Yesterday's hashes stay one more day (a flush may still be on its way); older ones go.
      expect((await db.selectFrom('site_analytics_seen').select('visitor').where('publication_id', '=', pub).execute()).map((r) => r.visitor).sort()).toEqual(['v0', 'v0', 'v1', 'v1']);
      expect((await db.selectFrom('site_analytics_salts').select('day').where('day', 'like', '2020-%').execute()).map((r) => r.day)).toEqual(['2020-06-15']);
    });

    it('another sites node shares the day salt (one visitor on both is one) and its stop writes every count', async () => {
      const { u, site: p } = await onePageSite(app(), 'Two nodes');
      // A second process on the same database serving sites only; its timer never fires.
      const node = createApp(loadConfig({ ...app().env, CUBBY_ROLES: 'sites', CUBBY_SITES_PORT: '0' }), { resolver: emptyZone });
      const started = await node.start();
      const otherOrigin = p.public_url.replace(/:\d+$/, `:${started.ports.sites}`);
      try {
        for (let i = 0; i < 20; i++) expect((await visit(`${otherOrigin}/`, IP_A, CHROME)).status).toBe(200);
        expect((await visit(`${otherOrigin}/`, '192.0.2.10', FIREFOX)).status).toBe(200);
        expect((await visit(`${p.public_url}/`, IP_A, CHROME)).status).toBe(200);
        await app().started.flushSiteAnalytics();
      } finally {
        // Nothing was flushed by the second node before this: stop() must write it all.
        await node.stop();
      }
      const a = (await app().request('GET', `/api/v1/publications/${p.id}/analytics`, { key: u.key, query: { granularity: 'hour' } })).body.data.analytics;
      expect(a.totals).toMatchObject({ views: 22, visitors: 2, requests: 22 });
      expect(a.series.find((s: any) => s.views > 0)).toMatchObject({ views: 22, visitors: 2 });
    });
  },
  ENV,
);

// Countries only with a local GeoIP file (here a tiny one made by the test).
const geoDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cubby-geoip-'));
const GEO_ENV = { ...ENV, CUBBY_GEOIP_DB: writeCountryDb(geoDir, { [IP_A]: 'NL', '192.0.2.10': 'JP' }) };

describeEachDatabase(
  'site analytics: countries from a local GeoIP database',
  (app) => {
    it('counts page views by country; unknown addresses have none', async () => {
      const { u, site: p } = await onePageSite(app(), 'Countries');
      await visit(`${p.public_url}/`, IP_A, CHROME);
      await visit(`${p.public_url}/`, IP_A, FIREFOX);
      await visit(`${p.public_url}/`, '192.0.2.10', CHROME);
      await visit(`${p.public_url}/`, '198.51.100.200', CHROME);
      await app().started.flushSiteAnalytics();
      const a = (await app().request('GET', `/api/v1/publications/${p.id}/analytics`, { key: u.key })).body.data.analytics;
      expect(a.countries_enabled).toBe(true);
      expect(a.totals).toMatchObject({ views: 4, visitors: 4 });
      expect(a.countries).toEqual([
        { value: 'NL', count: 2 },
        { value: 'JP', count: 1 },
      ]);
    });
  },
  GEO_ENV,
);

describeEachDatabase(
  'site analytics: a configured GeoIP file that cannot be read',
  (app) => {
    it('stops a sites node from starting instead of counting without countries', async () => {
      const bad = path.join(geoDir, 'not-a-database.mmdb');
      fs.writeFileSync(bad, 'this is not a MaxMind database');
      const node = createApp(loadConfig({ ...app().env, CUBBY_ROLES: 'sites', CUBBY_SITES_PORT: '0', CUBBY_GEOIP_DB: bad }), { resolver: emptyZone });
      await expect(node.start()).rejects.toThrow(/CUBBY_GEOIP_DB: .* is not a readable MaxMind database/);
      await node.stop();
    });
  },
  ENV,
  { only: ['sqlite'] },
);

// On a set clock. The salt rotates with the UTC day: the same person is a new visitor tomorrow, and
// yesterday's salt is gone from the database (so yesterday's hashes can no longer be recomputed
// from anyone). The path cap is per hour.
for (const kind of DATABASES) {
  describe(`site analytics on a set clock [${kind}]`, () => {
    let clock = Date.parse('2026-11-20T23:50:00.000Z');
    let app: TestApp;
    beforeAll(async () => {
      app = await startTestApp(kind, ENV, { now: () => new Date(clock) });
    });
    afterAll(async () => app?.stop());

    it('the same visitor counts again the next day; the old salt is deleted', async () => {
      const { u, site: p } = await onePageSite(app, 'Daily');
      const db = dbOf(app);
      const saltOf = async (day: string) => (await db.selectFrom('site_analytics_salts').select('salt').where('day', '=', day).executeTakeFirst())?.salt;
      const first = await saltOf('2026-11-20');
      expect(first).toBeTruthy();
      expect(await saltOf('2026-11-21')).toBeTruthy();
      await visit(`${p.public_url}/`, IP_A, CHROME);
      await visit(`${p.public_url}/`, IP_A, CHROME);
      await app.started.flushSiteAnalytics();
      clock = Date.parse('2026-11-21T00:10:00.000Z');
      await visit(`${p.public_url}/`, IP_A, CHROME);
      // The first flush after midnight made the next day's salt and dropped the old one.
      await app.started.flushSiteAnalytics();
      expect(await saltOf('2026-11-20')).toBeUndefined();
      expect(await saltOf('2026-11-22')).toBeTruthy();
      const a = (await app.request('GET', `/api/v1/publications/${p.id}/analytics`, { key: u.key, query: { from: '2026-11-20', to: '2026-11-22' } })).body.data.analytics;
      expect(a.series).toEqual([
        { start: '2026-11-20T00:00:00.000Z', views: 2, visitors: 1, requests: 2, bytes: expect.any(Number) },
        { start: '2026-11-21T00:00:00.000Z', views: 1, visitors: 1, requests: 1, bytes: expect.any(Number) },
      ]);
      expect(a.totals.visitors).toBe(2);
      // Two different hashes for one person on two days: nothing links them.
      const seen = await db.selectFrom('site_analytics_seen').select(['period', 'visitor']).where('publication_id', '=', p.id).where('period', 'in', ['2026-11-20', '2026-11-21']).execute();
      expect(seen).toHaveLength(2);
      expect(seen[0]!.visitor).not.toBe(seen[1]!.visitor);
    });

    it('keeps at most 100 paths per hour; the rest count under (other)', async () => {
      // Within one hour of the set clock: on the real one, an hour starting mid-test splits the paths.
      clock = Date.parse('2026-11-21T10:20:00.000Z');
      const { u, site: spa } = await onePageSite(app, 'Many routes', { site_mode: 'spa' });
      for (let i = 0; i < 105; i++) expect((await visit(`${spa.public_url}/route-${i}`, IP_A, CHROME)).status).toBe(200);
      await app.started.flushSiteAnalytics();
      // A second flush with new paths must not grow the hour past the cap either.
      for (let i = 105; i < 110; i++) await visit(`${spa.public_url}/route-${i}`, IP_A, CHROME);
      await app.started.flushSiteAnalytics();
      const rows = await dbOf(app).selectFrom('site_analytics_counts').select(['value', 'count']).where('publication_id', '=', spa.id).where('dimension', '=', 'path').execute();
      expect(rows.length).toBe(101);
      expect(rows.find((r) => r.value === '(other)')!.count).toBe(10);
      const a = (await app.request('GET', `/api/v1/publications/${spa.id}/analytics`, { key: u.key })).body.data.analytics;
      expect(a.totals).toMatchObject({ views: 110, visitors: 1 });
      expect(a.top_paths[0]).toEqual({ value: '(other)', count: 10 });
    });
  });
}

// A flush waits for the disk off the event loop (src/db/durable-commit.ts): while its sync is slow,
// the sites server goes on answering, and the counts are already readable. The app's
// `beforeDurable` hook stands for the slow sync (awaited before a commit is made durable); here it
// holds the flush's commit until the test lets it go.
for (const kind of DATABASES) {
  describe(`site analytics: a flush waiting for a slow disk sync [${kind}]`, () => {
    let app: TestApp;
    const gate = durableGate();
    beforeAll(async () => {
      app = await startTestApp(kind, ENV, { beforeDurable: gate.beforeDurable });
    });
    afterAll(async () => app?.stop());

    it('serves pages while the flush waits for its sync; the flush resolves once the sync is done', async () => {
      const { u, site: p } = await onePageSite(app, 'Slow disk');
      expect((await visit(`${p.public_url}/`, IP_A, CHROME)).status).toBe(200);

      const held = gate.hold();
      let flushed = false;
      const flush = app.started.flushSiteAnalytics().then(() => (flushed = true));
      // Committed, and now waiting for the (held) sync.
      await held.entered;

      for (let i = 0; i < 3; i++) expect((await visit(`${p.public_url}/`, '192.0.2.10', FIREFOX)).status).toBe(200);
      const during = (await app.request('GET', `/api/v1/publications/${p.id}/analytics`, { key: u.key, query: { granularity: 'hour' } })).body.data.analytics;
      expect(during.totals).toMatchObject({ views: 1, visitors: 1 });
      expect(flushed).toBe(false);

      held.release();
      await flush;
      // The views served meanwhile are written by the next flush.
      await app.started.flushSiteAnalytics();
      const after = (await app.request('GET', `/api/v1/publications/${p.id}/analytics`, { key: u.key, query: { granularity: 'hour' } })).body.data.analytics;
      expect(after.totals).toMatchObject({ views: 4, visitors: 2, requests: 4 });
    });
  });
}
