import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DATABASES, startTestApp, type TestApp } from './harness.ts';
import { startTestZone, type TestZone } from './dns-zone.ts';
import { drain } from './address-helpers.ts';
import { webSignIn } from './account-helpers.ts';
import { WebClient } from './web-client.ts';

// /account/domains over HTTP: add a hostname (root-domain guidance), the DNS records to copy,
// verify against a real name server in the test, which mailboxes use it, and removal blocked
// while in use; collaborators and plans without domains are refused.

const MX = 'mx.cubby.test';

for (const kind of DATABASES) {
  describe(`account domains page [${kind}]`, () => {
    let zone: TestZone;
    let app: TestApp;
    beforeAll(async () => {
      zone = await startTestZone();
      app = await startTestApp(kind, { CUBBY_MX_HOST: MX }, { resolver: zone.resolver });
    });
    afterAll(async () => {
      await app?.stop();
      await zone?.close();
    });

    const post = (web: WebClient, accountId: string, action: string, fields: Record<string, string>) => web.submit(`/account/domains?account=${accountId}`, action, { account_id: accountId, ...fields });

    it('adds, shows records, verifies, lists the mailboxes using it and blocks removal while in use', async () => {
      const root = `pages-${kind}.test`;
      zone.addZone(root);
      const owner = await app.user({ plan: 'pilot' });
      const web = await webSignIn(app, owner.email);

      expect((await post(web, owner.accountId, '/account/domains/add', { hostname: root })).status).toBe(303);
      let page = await web.get(`/account/domains?account=${owner.accountId}`);
      expect(page.text).toContain(`inbox.${root}`); // the suggested subdomain for a root domain
      const bad = await post(web, owner.accountId, '/account/domains/add', { hostname: 'not a host name' });
      expect(bad.status).toBe(422);

      expect((await post(web, owner.accountId, '/account/domains/add', { hostname: `inbox.${root}` })).status).toBe(303);
      const list = await app.request('GET', '/v1/account/email_domains', { key: owner.key });
      const domain = list.body.data.domains.find((d: any) => d.hostname === `inbox.${root}`);
      page = await web.get(`/account/domains?account=${owner.accountId}`);
      for (const r of domain.required_dns_records) expect(page.text).toContain(r.value);
      for (const r of domain.required_dns_records) {
        if (r.type === 'TXT') zone.txt(r.name, r.value);
        else zone.mx(r.name, r.value.split(' ')[1], Number(r.value.split(' ')[0]));
      }
      expect((await post(web, owner.accountId, '/account/domains/verify', { domain_id: domain.id })).status).toBe(303);
      await drain(app);
      page = await web.get(`/account/domains?account=${owner.accountId}`);
      expect(page.text).toMatch(new RegExp(`inbox\\.${root.replace('.', '\\.')} <span class="tag ok">ready</span>`));

      const box = await app.request('POST', '/v1/mailboxes', { key: owner.key, body: { mailbox: { email: { username: 'orders', domain: `inbox.${root}` } } } });
      expect(box.status, box.text).toBe(201);
      await drain(app);
      page = await web.get(`/account/domains?account=${owner.accountId}`);
      expect(page.text).toContain(`Used by: orders@inbox.${root}`);
      const blocked = await post(web, owner.accountId, '/account/domains/remove', { domain_id: domain.id, hostname: `inbox.${root}` });
      expect(blocked.status).toBe(409);
      expect(blocked.text).toContain(`still in use by orders@inbox.${root}`);

      // The unused root claim goes.
      const rootDomain = list.body.data.domains.find((d: any) => d.hostname === root);
      expect((await post(web, owner.accountId, '/account/domains/remove', { domain_id: rootDomain.id, hostname: root })).status).toBe(303);
      expect((await web.get(`/account/domains?account=${owner.accountId}`)).text).not.toContain(`<h2>${root} `);
    });

    it('refuses collaborators and says when the plan has no custom domains', async () => {
      const owner = await app.user({ plan: 'pilot' });
      const collab = await app.user();
      await app.started.deps.db.insertInto('memberships').values({ id: `mem_${collab.userId.slice(4)}d`, account_id: owner.accountId, user_id: collab.userId, role: 'collaborator', created_at: new Date().toISOString() }).execute();
      const cweb = await webSignIn(app, collab.email);
      expect((await cweb.get(`/account/domains?account=${owner.accountId}`)).status).toBe(403);
      const posted = await cweb.submit(`/account/members?account=${owner.accountId}`, '/account/domains/add', { account_id: owner.accountId, hostname: 'inbox.example.org' });
      expect(posted.status).toBe(403);

      const free = await app.user();
      const fweb = await webSignIn(app, free.email);
      expect((await fweb.get('/account/domains')).text).toContain('not included in the free plan');
    });
  });
}
