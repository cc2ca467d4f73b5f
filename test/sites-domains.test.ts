import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DATABASES, startTestApp, type TestApp } from './harness.ts';
import { startTestZone, type TestZone } from './dns-zone.ts';
import { form, newBucket, publishAndWait, publisher, siteFetch, uploadFolder } from './sites-helpers.ts';

// Custom domains of sites end to end: a real name server (dns2) inside the test holds the records
// the owner publishes; the sites server is asked over real HTTP with the custom Host header.

let serial = 0;
const B = (id: string) => `/api/v1/buckets/${id}/custom_domains`;

function cookieOf(res: { headers: Record<string, any> }): string {
  const set = res.headers['set-cookie'];
  return (Array.isArray(set) ? set[0] : String(set)).split(';')[0]!;
}

for (const kind of DATABASES) {
  describe(`custom site domains [${kind}]`, () => {
    let zone: TestZone;
    let app: TestApp;
    beforeAll(async () => {
      zone = await startTestZone();
      app = await startTestApp(kind, { CUBBY_SITES_ADDRESSES: '127.0.0.1,::1', CUBBY_MAIL_DOMAIN: 'mail.cubby.test' }, { resolver: zone.resolver });
    });
    afterAll(async () => {
      await app?.stop();
      await zone?.close();
    });

    /** A published site and a fresh zone `s<n>-<db>.test` for it. */
    async function site(files: Record<string, string> = { 'index.html': 'home', 'docs/page.html': 'page' }, body: Record<string, unknown> = {}) {
      const root = `s${serial++}-${kind}.test`;
      zone.addZone(root);
      const u = await publisher(app);
      const bucket = await newBucket(app, u.key);
      await uploadFolder(app, u.key, bucket.id, files);
      const p = await publishAndWait(app, u.key, bucket.id, body);
      expect(p.publish_state, JSON.stringify(p)).toBe('ready');
      return { u, bucket, p, root };
    }

    const port = () => app.started.ports.sites!;
    const publishRecords = (d: any, which: 'ownership' | 'routing' | 'both' = 'both') => {
      for (const r of d.dns_records) {
        if (which !== 'both' && r.purpose !== which) continue;
        if (r.type === 'TXT') zone.txt(r.name, r.value);
        if (r.type === 'CNAME') zone.cname(r.name, r.value);
        if (r.type === 'A') zone.a(r.name, r.value);
        if (r.type === 'AAAA') zone.aaaa(r.name, r.value);
      }
    };

    it('pending until DNS proves ownership and routing; then the site answers on its Host, the slug URL redirects there, removal stops it', async () => {
      const { u, bucket, p, root } = await site();
      const host = `www.${root}`;
      const add = await app.request('POST', B(bucket.id), { key: u.key, body: { hostname: `WWW.${root.toUpperCase()}.` } });
      expect(add.status, add.text).toBe(201);
      const d = add.body.data.domain;
      expect(d).toMatchObject({ hostname: host, status: 'pending', primary: true, serving: false, url: `http://${host}:${port()}` });
      expect(d.error.code).toBe('ownership_record_missing');
      expect(d.dns_records.map((r: any) => [r.type, r.name, r.relative_name, r.status])).toEqual([
        ['TXT', `_cubby-verification.${host}`, '_cubby-verification.www', 'missing'],
        ['CNAME', host, 'www', 'missing'],
      ]);
      expect(d.dns_records[1].value).toBe('localhost');
      // Adding it again answers the same domain.
      const again = await app.request('POST', B(bucket.id), { key: u.key, body: { hostname: host } });
      expect(again.status).toBe(200);
      expect(again.body.data.domain.id).toBe(d.id);

      // Before verification the host answers a clear 404 and never a site.
      const before = await siteFetch(`http://${host}:${port()}/`);
      expect(before.status).toBe(404);
      expect(before.text).toContain('Domain not connected');
      expect((await siteFetch(`${p.public_url}/`)).text).toBe('home');

      // Ownership alone is not enough: the name must point here.
      publishRecords(d, 'ownership');
      let v = await app.request('POST', `${B(bucket.id)}/${d.id}/verify`, { key: u.key });
      expect(v.status, v.text).toBe(200);
      expect(v.body.data.domain.status).toBe('pending');
      expect(v.body.data.domain.error.code).toBe('routing_record_missing');
      expect(v.body.data.domain.dns_records.map((r: any) => r.status)).toEqual(['found', 'missing']);
      // A records naming someone else's server do not count.
      zone.a(host, '203.0.113.9');
      v = await app.request('POST', `${B(bucket.id)}/${d.id}/verify`, { key: u.key });
      expect(v.body.data.domain.status).toBe('pending');
      zone.remove(host, 'A');
      publishRecords(d, 'routing');
      v = await app.request('POST', `${B(bucket.id)}/${d.id}/verify`, { key: u.key });
      expect(v.body.data.domain).toMatchObject({ status: 'verified', serving: true, error: null });
      expect(v.body.data.domain.verified_at).toBeTruthy();

      // The question Caddy's on-demand TLS asks: yes for this verified host only.
      expect((await siteFetch(`http://127.0.0.1:${port()}/.well-known/cubby/tls-allowed?domain=${host}`)).status).toBe(200);
      expect((await siteFetch(`http://127.0.0.1:${port()}/.well-known/cubby/tls-allowed?domain=nope.${root}`)).status).toBe(404);
      // Asked on a site's own host, the path is the site's (no answer about other domains).
      const onSite = await siteFetch(`http://${host}:${port()}/.well-known/cubby/tls-allowed?domain=${host}`);
      expect(onSite.status).toBe(404);
      expect(onSite.text).not.toBe('ok');
      const on = await siteFetch(`http://${host}:${port()}/docs/page.html`);
      expect(on.status).toBe(200);
      expect(on.text).toBe('page');
      // The host is matched without its port, case or trailing dot.
      expect((await siteFetch(`http://${host}:${port()}/`, { headers: { host: `WWW.${root}.` } })).text).toBe('home');

      // Visits on the custom host count for the site's publication (the analytics API).
      await app.started.flushSiteAnalytics();
      const stats = await app.request('GET', `/api/v1/publications/${p.id}/analytics`, { key: u.key, query: { granularity: 'hour' } });
      expect(stats.status, stats.text).toBe(200);
      // Three page views: '/' on the slug host before verification, then '/docs/page.html' and '/' here.
      expect(stats.body.data.analytics.totals.views).toBe(3);
      expect(stats.body.data.analytics.top_paths).toContainEqual({ value: '/docs/page.html', count: 1 });

      // The slug URL now redirects (301) to the same path on the custom domain, and public_url follows.
      const moved = await siteFetch(`${p.public_url}/docs/page.html?a=1`);
      expect(moved.status).toBe(301);
      expect(moved.headers.location).toBe(`http://${host}:${port()}/docs/page.html?a=1`);
      const read = await app.request('GET', `/api/v1/publications/${p.id}`, { key: u.key });
      expect(read.body.data.publication.public_url).toBe(`http://${host}:${port()}`);
      const b = await app.request('GET', `/api/v1/buckets/${bucket.id}`, { key: u.key });
      expect(b.body.data.bucket.public_url).toBe(`http://${host}:${port()}`);
      const list = await app.request('GET', B(bucket.id), { key: u.key });
      expect(list.body.data.domains.map((x: any) => x.id)).toEqual([d.id]);

      // A renamed slug redirects to the current address: the custom domain.
      const renamed = await app.request('PATCH', `${B(bucket.id)}/public_slug`, { key: u.key, body: { public_slug: `renamed-${serial}-${kind}` } });
      expect(renamed.status, renamed.text).toBe(200);
      expect(renamed.body.data.public_url).toBe(`http://${host}:${port()}`);
      expect((await siteFetch(`${p.public_url}/x`)).headers.location).toBe(`http://${host}:${port()}/x`);

      // Not primary any more: the slug host serves again, the custom host still does.
      const notPrimary = await app.request('PATCH', `${B(bucket.id)}/${d.id}`, { key: u.key, body: { primary: false } });
      expect(notPrimary.status, notPrimary.text).toBe(200);
      expect(notPrimary.body.data.domain.primary).toBe(false);
      const slugUrl = renamed.body.data.publication.public_url.replace(`http://${host}:${port()}`, `http://renamed-${serial}-${kind}.localhost:${port()}`);
      expect((await siteFetch(`${slugUrl}/`)).text).toBe('home');
      expect((await siteFetch(`http://${host}:${port()}/`)).text).toBe('home');
      await app.request('PATCH', `${B(bucket.id)}/${d.id}`, { key: u.key, body: { primary: true } });

      // Removing the domain: the host stops answering at once, the slug URL serves again.
      const del = await app.request('DELETE', `${B(bucket.id)}/${d.id}`, { key: u.key });
      expect(del.status, del.text).toBe(200);
      expect(del.body.data).toEqual({ deleted: true, id: d.id });
      expect((await siteFetch(`http://127.0.0.1:${port()}/.well-known/cubby/tls-allowed?domain=${host}`)).status).toBe(404);
      const after = await siteFetch(`http://${host}:${port()}/`);
      expect(after.status).toBe(404);
      expect(after.text).toContain('Domain not connected');
      expect((await siteFetch(`${slugUrl}/`)).text).toBe('home');
      expect((await app.request('GET', `${B(bucket.id)}/${d.id}`, { key: u.key })).status).toBe(404);
      expect((await app.request('GET', `/api/v1/buckets/${bucket.id}`, { key: u.key })).body.data.bucket.public_url).toBe(`http://renamed-${serial}-${kind}.localhost:${port()}`);
    });

    it('another account cannot claim a verified host, cannot see or touch the domain, and its pending claim never routes', async () => {
      const a = await site({ 'index.html': 'owner site' });
      const host = `shop.${a.root}`;
      const add = await app.request('POST', B(a.bucket.id), { key: a.u.key, body: { hostname: host } });
      publishRecords(add.body.data.domain);
      const v = await app.request('POST', `${B(a.bucket.id)}/${add.body.data.domain.id}/verify`, { key: a.u.key });
      expect(v.body.data.domain.status).toBe('verified');

      const other = await site({ 'index.html': 'intruder' });
      const taken = await app.request('POST', B(other.bucket.id), { key: other.u.key, body: { hostname: host } });
      expect(taken.status, taken.text).toBe(409);
      expect(taken.body.error.code).toBe('SITE_DOMAIN_TAKEN');
      // The owner's ids answer like missing ones to the other account.
      expect((await app.request('GET', `${B(a.bucket.id)}/${add.body.data.domain.id}`, { key: other.u.key })).status).toBe(404);
      expect((await app.request('DELETE', `${B(a.bucket.id)}/${add.body.data.domain.id}`, { key: other.u.key })).status).toBe(404);
      expect((await app.request('GET', `${B(other.bucket.id)}/${add.body.data.domain.id}`, { key: other.u.key })).body.error.code).toBe('SITE_DOMAIN_NOT_FOUND');
      expect((await siteFetch(`http://${host}:${port()}/`)).text).toBe('owner site');

      // A pending claim elsewhere does not block the real owner, and can never take over a verified host.
      const host2 = `blog.${a.root}`;
      const squat = await app.request('POST', B(other.bucket.id), { key: other.u.key, body: { hostname: host2 } });
      expect(squat.status, squat.text).toBe(201);
      const real = await app.request('POST', B(a.bucket.id), { key: a.u.key, body: { hostname: host2, primary: false } });
      expect(real.status).toBe(201);
      publishRecords(real.body.data.domain);
      expect((await app.request('POST', `${B(a.bucket.id)}/${real.body.data.domain.id}/verify`, { key: a.u.key })).body.data.domain.status).toBe('verified');
      // The squatter copies the routing record but cannot publish the owner's token: still pending.
      const sv = await app.request('POST', `${B(other.bucket.id)}/${squat.body.data.domain.id}/verify`, { key: other.u.key });
      expect(sv.body.data.domain.status).toBe('pending');
      expect(sv.body.data.domain.error.code).toBe('ownership_record_missing');
      // Even with its own token published (a DNS admin's mistake), the verified holder keeps it.
      publishRecords(squat.body.data.domain, 'ownership');
      const sv2 = await app.request('POST', `${B(other.bucket.id)}/${squat.body.data.domain.id}/verify`, { key: other.u.key });
      expect(sv2.body.data.domain.status).toBe('pending');
      expect(sv2.body.data.domain.error.code).toBe('hostname_taken');
      // A second verified domain of the same site redirects to the primary one.
      const alias = await siteFetch(`http://${host2}:${port()}/p?q=1`);
      expect(alias.status).toBe(301);
      expect(alias.headers.location).toBe(`http://${host}:${port()}/p?q=1`);

      // Once the holder's bucket is deleted, its domains hold nothing: the other site may verify the host.
      await app.started.deps.db.updateTable('mailboxes').set({ deleted_at: new Date().toISOString() }).where('id', '=', a.bucket.id).execute();
      const sv3 = await app.request('POST', `${B(other.bucket.id)}/${squat.body.data.domain.id}/verify`, { key: other.u.key });
      expect(sv3.body.data.domain.status, sv3.text).toBe('verified');
      expect((await siteFetch(`http://${host2}:${port()}/`)).text).toBe('intruder');
    });

    it('password protection works the same on the custom host, with the cookie bound to that host', async () => {
      const s = await site({ 'index.html': 'secret home' }, { access_mode: 'password' });
      const host = `members.${s.root}`;
      const add = await app.request('POST', B(s.bucket.id), { key: s.u.key, body: { hostname: host } });
      publishRecords(add.body.data.domain);
      // Published before adding: the DNS check at add time verifies it right away.
      const re = await app.request('POST', `${B(s.bucket.id)}/${add.body.data.domain.id}/verify`, { key: s.u.key });
      expect(re.body.data.domain.status).toBe('verified');
      const origin = `http://${host}:${port()}`;
      const gate = await siteFetch(`${origin}/`);
      expect(gate.status).toBe(200);
      expect(gate.headers['x-cubby-access']).toBe('password_required');
      expect(gate.text).not.toContain('secret home');
      const foreign = await siteFetch(`${origin}/.cubby/password`, { method: 'POST', headers: { ...form({}).headers, origin: s.p.public_url }, body: form({ password: s.p.password }).body });
      expect(foreign.status).toBe(403);
      const right = await siteFetch(`${origin}/.cubby/password`, { method: 'POST', headers: { ...form({}).headers, origin }, body: form({ password: s.p.password, next: '/' }).body });
      expect(right.status).toBe(303);
      expect(String(right.headers['set-cookie'])).not.toMatch(/domain=/i);
      const inside = await siteFetch(`${origin}/`, { headers: { cookie: cookieOf(right) } });
      expect(inside.text).toBe('secret home');
    });

    it('an apex domain uses A/AAAA records naming the sites addresses; records added before the domain verify it at once', async () => {
      const s = await site({ 'index.html': 'apex' });
      zone.txt(`_cubby-verification.${s.root}`, 'cubby-verification=not-this-one');
      zone.a(s.root, '127.0.0.1');
      zone.aaaa(s.root, '::1');
      const add = await app.request('POST', B(s.bucket.id), { key: s.u.key, body: { hostname: s.root } });
      expect(add.status).toBe(201);
      const d = add.body.data.domain;
      expect(d.dns_records.map((r: any) => [r.type, r.relative_name, r.value, r.status])).toEqual([
        ['TXT', '_cubby-verification', d.dns_records[0].value, 'missing'],
        ['A', '@', '127.0.0.1', 'found'],
        ['AAAA', '@', '::1', 'found'],
      ]);
      zone.txt(`_cubby-verification.${s.root}`, d.dns_records[0].value);
      const v = await app.request('POST', `${B(s.bucket.id)}/${d.id}/verify`, { key: s.u.key });
      expect(v.body.data.domain.status).toBe('verified');
      expect((await siteFetch(`http://${s.root}:${port()}/`)).text).toBe('apex');
    });

    it('refuses hostnames that are not valid, carry a port, or belong to the service; normalises IDN and case; changes nothing', async () => {
      const s = await site({ 'index.html': 'x' });
      const bad: [string, string, string?][] = [
        ['https://www.example.org/', 'not_a_hostname'],
        ['www.example.org/path', 'not_a_hostname'],
        ['www.example.org:8080', 'port_not_allowed'],
        ['203.0.113.7', 'ip_address'],
        ['[2001:db8::1]', 'ip_address'],
        ['localhost', 'single_label'],
        ['intranet', 'single_label'],
        ['printer.local', 'not_public'],
        ['*.example.org', 'wildcard'],
        ['bad_name.example.org', 'invalid_characters'],
        ['-lead.example.org', 'invalid_characters'],
        ['', 'empty'],
        [`${'a'.repeat(64)}.example.org`, 'invalid_characters'],
        ['mail.cubby.test', 'service_host', 'SITE_DOMAIN_NOT_ALLOWED'],
        ['x.mail.cubby.test', 'service_host', 'SITE_DOMAIN_NOT_ALLOWED'],
      ];
      for (const [hostname, reason, code = 'INVALID_ARGUMENT'] of bad) {
        const r = await app.request('POST', B(s.bucket.id), { key: s.u.key, body: { hostname } });
        expect(r.status, `${hostname}: ${r.text}`).toBe(code === 'INVALID_ARGUMENT' ? 422 : 422);
        expect(r.body.error.code, hostname).toBe(code);
        expect(r.body.error.details.reason, hostname).toBe(reason);
      }
      expect((await app.request('GET', B(s.bucket.id), { key: s.u.key })).body.data.domains).toEqual([]);
      const idn = await app.request('POST', B(s.bucket.id), { key: s.u.key, body: { hostname: `Bücher.${s.root}` } });
      expect(idn.status, idn.text).toBe(201);
      expect(idn.body.data.domain.hostname).toBe(`xn--bcher-kva.${s.root}`);
      // Unknown ids and foreign buckets.
      expect((await app.request('GET', `${B(s.bucket.id)}/sdm_nope`, { key: s.u.key })).body.error.code).toBe('SITE_DOMAIN_NOT_FOUND');
      expect((await app.request('POST', `${B(s.bucket.id)}/public_slug/verify`, { key: s.u.key })).status).toBe(404);
      const stranger = await publisher(app);
      expect((await app.request('GET', B(s.bucket.id), { key: stranger.key })).status).toBe(404);
      expect((await app.request('POST', B(s.bucket.id), { key: stranger.key, body: { hostname: `z.${s.root}` } })).status).toBe(404);
    });

    it('a domain whose records disappear keeps serving for a day, then fails and frees the host', async () => {
      const s = await site({ 'index.html': 'fading' });
      const host = `old.${s.root}`;
      const add = await app.request('POST', B(s.bucket.id), { key: s.u.key, body: { hostname: host } });
      publishRecords(add.body.data.domain);
      expect((await app.request('POST', `${B(s.bucket.id)}/${add.body.data.domain.id}/verify`, { key: s.u.key })).body.data.domain.status).toBe('verified');
      zone.remove(host, 'CNAME');
      const db = app.started.deps.db;
      let v = await app.request('POST', `${B(s.bucket.id)}/${add.body.data.domain.id}/verify`, { key: s.u.key });
      expect(v.body.data.domain.status).toBe('verified');
      expect(v.body.data.domain.error.code).toBe('routing_record_missing');
      expect((await siteFetch(`http://${host}:${port()}/`)).text).toBe('fading');
      // A day later (the last passing check moved back), the next check fails it.
      await db.updateTable('site_domains').set({ last_passed_at: new Date(Date.now() - 25 * 3600_000).toISOString() }).where('id', '=', add.body.data.domain.id).execute();
      await app.started.deps.jobs.enqueue(db, 'sites.domains.check', { domain_id: add.body.data.domain.id });
      await app.started.deps.jobs.worker!.drain();
      v = await app.request('GET', `${B(s.bucket.id)}/${add.body.data.domain.id}`, { key: s.u.key });
      expect(v.body.data.domain.status).toBe('failed');
      expect((await siteFetch(`http://${host}:${port()}/`)).status).toBe(404);
      // The slug URL serves again.
      expect((await siteFetch(`${s.p.public_url}/`)).text).toBe('fading');
    });
  });
}
