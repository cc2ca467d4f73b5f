import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DATABASES, startTestApp, type TestApp, type TestUser } from './harness.ts';
import { mailboxWithAddress, sendMail } from './smtp-helpers.ts';
import { startTestZone, type TestZone } from './dns-zone.ts';
import { drain, expectError, inboundEmail, rcpt, received, rotate, rotateA, settings } from './address-helpers.ts';

// Custom receiving domains end to end: a real name server (dns2) inside the test holds the
// records an owner publishes; the app checks them through its resolver, and mail arrives over SMTP.

const MX = 'mx.cubby.test';
const R = '/v1/account/email_domains';
const A = '/api/v1/account/inbound_email_domains';
let serial = 0;

function publish(zone: TestZone, domain: any, purposes = ['ownership', 'ses_verification', 'receiving']) {
  for (const r of domain.required_dns_records) {
    if (!purposes.includes(r.purpose)) continue;
    if (r.type === 'TXT') zone.txt(r.name, r.value);
    else zone.mx(r.name, r.value.split(' ')[1], Number(r.value.split(' ')[0]));
  }
}

for (const kind of DATABASES) {
  describe(`custom receiving domains [${kind}]`, () => {
    let zone: TestZone;
    let app: TestApp;
    let offsetMs = 0;
    beforeAll(async () => {
      zone = await startTestZone();
      app = await startTestApp(kind, { CUBBY_MX_HOST: MX, CUBBY_DOMAIN_SETUP_LIMIT: '8' }, { resolver: zone.resolver, now: () => new Date(Date.now() + offsetMs) });
    });
    afterAll(async () => {
      await app?.stop();
      await zone?.close();
    });

    /** A fresh root zone and a pilot user with `inbox.<root>` claimed, published and ready. */
    async function readyDomain(base = R, user?: TestUser) {
      const root = `d${serial++}-${kind}.test`;
      zone.addZone(root);
      const u = user ?? (await app.user({ plan: 'pilot' }));
      const claim = await app.request('POST', base, { key: u.key, body: { hostname: `Inbox.${root}.` } });
      expect(claim.status, claim.text).toBe(201);
      const domain = claim.body.data.domain;
      publish(zone, domain);
      expect((await app.request('POST', `${base}/${domain.id}/verify`, { key: u.key })).status).toBe(202);
      await drain(app);
      const read = await app.request('GET', `${base}/${domain.id}`, { key: u.key });
      expect(read.body.data.domain.status, read.text).toBe('ready');
      return { u, root, host: `inbox.${root}`, domain: read.body.data.domain };
    }

    it('journey on surface R: check, claim, publish, verify, create a mailbox on the domain, receive over SMTP, rotate back to the platform', async () => {
      const root = `j${serial++}-${kind}.test`;
      zone.addZone(root);
      const host = `inbox.${root}`;
      const u = await app.user({ plan: 'pilot' });

      const checkRoot = await app.request('POST', `${R}/check`, { key: u.key, body: { hostname: root } });
      expect(checkRoot.status, checkRoot.text).toBe(200);
      expect(checkRoot.body.data).toMatchObject({ hostname: root, root_domain: true, suggested_subdomain: `inbox.${root}`, available: true });
      expect(checkRoot.body.data.root_guidance).toContain(root);
      const checkSub = await app.request('POST', `${R}/check`, { key: u.key, body: { hostname: host } });
      expect(checkSub.body.data).toMatchObject({ hostname: host, root_domain: false, suggested_subdomain: null, root_guidance: null });
      expect((await app.request('GET', R, { key: u.key })).body.data).toMatchObject({ domains: [], enabled: true });

      const claim = await app.request('POST', R, { key: u.key, body: { hostname: host } });
      expect(claim.status, claim.text).toBe(201);
      const d = claim.body.data.domain;
      expect(d).toMatchObject({ id: expect.stringMatching(/^dom_[A-Za-z0-9]+$/), hostname: host, status: 'pending_ownership', receiving: false, root_domain: false, error: null, assigned_mailboxes: [], last_checked_at: null });
      expect(Date.parse(d.setup_expires_at)).toBeGreaterThan(Date.now());
      expect(d.required_dns_records).toEqual([
        { type: 'TXT', name: `_cubby-verification.${host}`, value: expect.stringMatching(/^cubby-verification=[A-Za-z0-9]{32}$/), purpose: 'ownership', zone: root, relative_name: '_cubby-verification.inbox' },
        { type: 'TXT', name: `_cubby-provider.${host}`, value: expect.stringMatching(/^cubby-provider=[A-Za-z0-9]{32}$/), purpose: 'ses_verification', zone: root, relative_name: '_cubby-provider.inbox' },
        { type: 'MX', name: host, value: `10 ${MX}`, purpose: 'receiving', zone: root, relative_name: 'inbox' },
      ]);
      // Not receivable before it is ready: a relay refusal, as for any foreign domain.
      expect(await rcpt(app, `orders@${host}`)).toMatch(/^550 5\.7\.1 /);

      const verify = async () => {
        const res = await app.request('POST', `${R}/${d.id}/verify`, { key: u.key });
        expect(res.status, res.text).toBe(202);
        expect(res.body.data.domain.id).toBe(d.id);
        await drain(app);
        return (await app.request('GET', `${R}/${d.id}`, { key: u.key })).body.data.domain;
      };
      let now = await verify();
      expect(now).toMatchObject({ status: 'pending_ownership', error: { code: 'ownership_record_missing', retryable: true } });
      expect(now.last_checked_at).not.toBeNull();
      publish(zone, d, ['ownership']);
      now = await verify();
      expect(now).toMatchObject({ status: 'verified', error: { code: 'provider_record_missing' } });
      expect(now.ownership_verified_at).not.toBeNull();
      publish(zone, d, ['ses_verification', 'receiving']);
      now = await verify();
      expect(now).toMatchObject({ status: 'ready', receiving: true, error: null, setup_expires_at: null });
      expect(now.ready_at).not.toBeNull();

      // A mailbox on the domain takes the exact name and receives over SMTP.
      const created = await app.request('POST', '/v1/mailboxes', { key: u.key, body: { mailbox: { email: { username: 'Orders', domain: host } } } });
      expect(created.status, created.text).toBe(201);
      const box = created.body.data.mailbox;
      expect(box).toMatchObject({ title: 'Orders', email: { address: `orders@${host}`, receiving_enabled: true } });
      expectError(await app.request('POST', '/v1/mailboxes', { key: u.key, body: { mailbox: { title: 'Again', email: { username: 'orders', domain: host } } } }), 409, 'EMAIL_ADDRESS_TAKEN');
      const sent = await sendMail(app, { to: `orders@${host}`, subject: 'custom domain' });
      expect(sent.emailIds).toHaveLength(1);
      expect(await rcpt(app, `nobody@${host}`)).toMatch(/^550 5\.1\.1 /); // ours now: unknown names are 5.1.1
      await drain(app);
      expect((await received(app, u, box.id))[0]).toMatchObject({ id: sent.emailIds[0], delivered_to: `orders@${host}` });

      const s = await settings(app, u.key, box.id);
      expect(s).toMatchObject({ address: `orders@${host}`, username: 'orders' });
      expect(s.available_domains).toEqual([{ hostname: 'mail.localhost', kind: 'platform' }, { hostname: host, kind: 'custom' }]);
      expect((await app.request('GET', `${R}/${d.id}`, { key: u.key })).body.data.domain.assigned_mailboxes).toEqual([{ id: box.id, email: `orders@${host}` }]);
      const inUse = await app.request('DELETE', `${R}/${d.id}`, { key: u.key, body: { hostname: host, confirm: true } });
      expectError(inUse, 409, 'EMAIL_DOMAIN_IN_USE');
      expect(inUse.body.error.details.assigned_mailboxes).toEqual([{ id: box.id, email: `orders@${host}` }]);

      // Back to the platform domain: the custom address stays as an alias (default for owners).
      const back = await rotate(app, u.key, box.id, { expected_address: `orders@${host}`, domain: 'platform' });
      expect(back.status, back.text).toBe(200);
      expect(back.body.data.address).toMatch(/^orders-[a-z0-9]{4}@mail\.localhost$/);
      expect(back.body.data.aliases).toEqual([{ id: expect.any(String), address: `orders@${host}`, active: true }]);
      expect((await sendMail(app, { to: `orders@${host}` })).emailIds).toHaveLength(1);
      expect((await sendMail(app, { to: back.body.data.address })).emailIds).toHaveLength(1);
      const del = await app.request('DELETE', `/v1/mailboxes/${box.id}/email/aliases/${back.body.data.aliases[0].id}`, { key: u.key });
      expect(del.status).toBe(200);
      expect(await rcpt(app, `orders@${host}`)).toMatch(/^550 5\.1\.1 /);

      // Nothing uses it now: removed (hostname and confirm required), then gone.
      expectError(await app.request('DELETE', `${R}/${d.id}`, { key: u.key, body: { hostname: host } }), 422, 'INVALID_ARGUMENT');
      expectError(await app.request('DELETE', `${R}/${d.id}`, { key: u.key, body: { hostname: `other.${root}`, confirm: true } }), 422, 'INVALID_ARGUMENT');
      const removed = await app.request('DELETE', `${R}/${d.id}`, { key: u.key, body: { hostname: host, confirm: true } });
      expect(removed.status, removed.text).toBe(200);
      expect(removed.body.data).toEqual({ deleted: true, id: d.id });
      expectError(await app.request('GET', `${R}/${d.id}`, { key: u.key }), 404, 'EMAIL_DOMAIN_NOT_FOUND');
      expect((await app.request('GET', R, { key: u.key })).body.data.domains).toEqual([]);
    });

    it('surface A: claim and verify, a custom-domain rotation is pending (never receivable, never shown) until activation, then the domain is removed in the background', async () => {
      const { u, host, domain } = await readyDomain(A);
      const list = await app.request('GET', A, { key: u.key });
      expect(list.body.data).toMatchObject({ enabled: true, domains: [{ id: domain.id, status: 'ready' }] });
      const bucket = (await app.request('POST', '/api/v1/buckets', { key: u.key, body: { bucket: { title: 'Receipts' } } })).body.data.bucket;
      const old = bucket.inbound_email.address;

      // Hold the activation: DNS for the domain fails until healed.
      zone.fail(host);
      const body = { current_address: old, domain: host, idempotency_key: 'to-custom-0001' };
      const res = await rotateA(app, u.key, bucket.id, body);
      expect(res.status, res.text).toBe(202);
      expect(res.body.data).toMatchObject({ address: old, assignment: { status: 'pending', hostname: host, kind: 'primary' } });
      expect(res.text).not.toContain(`receipts@${host}`);
      await drain(app);
      expect(await rcpt(app, `receipts@${host}`)).toMatch(/^550 5\.1\.1 /);
      const pending = await inboundEmail(app, u.key, bucket.id);
      expect(pending).toMatchObject({ address: old, assignment: { status: 'pending' } });
      const replay = await rotateA(app, u.key, bucket.id, body);
      expect(replay.status, replay.text).toBe(202);
      expect(replay.body.data.assignment.id).toBe(res.body.data.assignment.id);
      expectError(await rotateA(app, u.key, bucket.id, { current_address: old }), 409, 'INBOUND_EMAIL_ROTATION_UNAVAILABLE');
      expectError(await rotate(app, u.key, bucket.id, { expected_address: old }), 409, 'EMAIL_ADDRESS_CHANGE_PENDING');
      expectError(await app.request('DELETE', `${A}/${domain.id}`, { key: u.key, body: { hostname: host, confirm: true } }), 409, 'EMAIL_DOMAIN_IN_USE');

      zone.heal(host);
      offsetMs += 60_000; // the retry is due
      await drain(app);
      const done = await inboundEmail(app, u.key, bucket.id);
      expect(done).toMatchObject({ address: `receipts@${host}`, assignment: { id: res.body.data.assignment.id, status: 'active', error: null }, aliases: [], rotations: { used: 1 } });
      expect((await sendMail(app, { to: `receipts@${host}` })).emailIds).toHaveLength(1);
      expect(await rcpt(app, old)).toMatch(/^550 5\.1\.1 /); // surface A retires the old address

      expectError(await app.request('DELETE', `${A}/${domain.id}`, { key: u.key, body: { hostname: host, confirm: true } }), 409, 'EMAIL_DOMAIN_IN_USE');
      const back = await rotateA(app, u.key, bucket.id, { current_address: `receipts@${host}`, domain: 'platform' });
      expect(back.status, back.text).toBe(200);
      expect(back.body.data.address).toMatch(/^receipts-[a-z0-9]{4}@mail\.localhost$/);
      const queued = await app.request('DELETE', `${A}/${domain.id}`, { key: u.key, body: { hostname: host, confirm: 'true' } });
      expect(queued.status, queued.text).toBe(202);
      expect(queued.body.data.domain).toMatchObject({ id: domain.id, status: 'removing', receiving: false });
      await drain(app);
      expectError(await app.request('GET', `${A}/${domain.id}`, { key: u.key }), 404, 'EMAIL_DOMAIN_NOT_FOUND');
      // Free again: another account may claim the hostname now.
      const other = await app.user({ plan: 'pilot' });
      expect((await app.request('POST', A, { key: other.key, body: { hostname: host } })).status).toBe(201);
    });

    it('surface R custom-domain rotation answers 202 and activates; a failed activation leaves the old address current', async () => {
      const { u, host } = await readyDomain();
      const box = await mailboxWithAddress(app, u, 'Help');
      const res = await rotate(app, u.key, box.id, { expected_address: box.address, domain: host, username: 'helpdesk' });
      expect(res.status, res.text).toBe(202);
      expect(res.body.data.address).toBe(box.address);
      await drain(app);
      const s = await settings(app, u.key, box.id);
      expect(s).toMatchObject({ address: `helpdesk@${host}`, assignment: { status: 'active' }, aliases: [{ address: box.address, active: true }] });
      expectError(await rotate(app, u.key, box.id, { expected_address: s.address, domain: host, username: 'helpdesk' }), 409, 'EMAIL_ADDRESS_TAKEN');

      // The MX record went away before activation: the change fails, the address stays.
      zone.remove(host, 'MX');
      const fail = await rotate(app, u.key, box.id, { expected_address: s.address, domain: host, username: 'desk' });
      expect(fail.status, fail.text).toBe(202);
      await drain(app);
      const after = await settings(app, u.key, box.id);
      expect(after).toMatchObject({ address: `helpdesk@${host}`, assignment: { status: 'failed', error: { code: 'mx_record_missing', retryable: true } } });
      expect(await rcpt(app, `desk@${host}`)).toMatch(/^550 5\.1\.1 /);
      zone.mx(host, MX);
    });

    it('refuses without the pilot entitlement or an administrator credential, bad or taken hostnames, DNS conflicts, and DNS outages (503 retryable)', async () => {
      const paid = await app.user({ plan: 'paid' });
      const listPaid = await app.request('GET', R, { key: paid.key });
      expect(listPaid.status).toBe(200);
      expect(listPaid.body.data).toMatchObject({ domains: [], enabled: false });
      expectError(await app.request('POST', R, { key: paid.key, body: { hostname: 'inbox.example.test' } }), 403, 'EMAIL_DOMAINS_NOT_ENABLED');
      expectError(await app.request('POST', `${A}/check`, { key: paid.key, body: { hostname: 'inbox.example.test' } }), 403, 'EMAIL_DOMAINS_NOT_ENABLED');

      const root = `e${serial++}-${kind}.test`;
      zone.addZone(root);
      const u = await app.user({ plan: 'pilot' });
      const writer = await app.key(u, { scope: 'mailbox_write' });
      expectError(await app.request('POST', R, { key: writer, body: { hostname: `inbox.${root}` } }), 403, 'PERMISSION_DENIED');
      const box = await mailboxWithAddress(app, u);
      const selected = await app.key(u, { mailboxAccess: 'selected', mailboxPermissions: { [box.id]: 'write' } });
      expectError(await app.request('GET', R, { key: selected }), 403, 'PERMISSION_DENIED');

      for (const bad of ['localhost', 'no_underscores.example', '10.0.0.1', 'mail.localhost', 'x.mail.localhost', '-bad.example']) {
        expectError(await app.request('POST', R, { key: u.key, body: { hostname: bad } }), 422, 'INVALID_ARGUMENT');
      }
      // Mail for the root already goes elsewhere: a DNS conflict.
      zone.mx(root, 'mx.elsewhere.example');
      const conflict = await app.request('POST', R, { key: u.key, body: { hostname: root } });
      expectError(conflict, 422, 'EMAIL_DOMAIN_CONFLICT');
      expect(conflict.body.error.details).toMatchObject({ reason: 'existing_mx', suggested_subdomain: `inbox.${root}` });

      expect((await app.request('POST', A, { key: u.key, body: { hostname: `inbox.${root}` } })).status).toBe(201);
      const other = await app.user({ plan: 'pilot' });
      const taken = await app.request('POST', A, { key: other.key, body: { hostname: `inbox.${root}` } });
      expectError(taken, 422, 'EMAIL_DOMAIN_CONFLICT');
      expect(taken.body.error.details.reason).toBe('already_claimed');
      expectError(await app.request('GET', `${R}/dom_missing`, { key: u.key }), 404, 'EMAIL_DOMAIN_NOT_FOUND');
      expectError(await app.request('POST', `${A}/dom_missing/verify`, { key: u.key }), 404, 'EMAIL_DOMAIN_NOT_FOUND');

      zone.fail(`down.${root}`);
      const down = await app.request('POST', R, { key: other.key, body: { hostname: `down.${root}` } });
      expectError(down, 503, 'EMAIL_DOMAIN_DNS_UNAVAILABLE');
      expect(down.body.error.details.retryable).toBe(true);
      expect(down.headers.get('retry-after')).toBe('30');
      const downA = await app.request('POST', `${A}/check`, { key: other.key, body: { hostname: `down.${root}` } });
      expect(downA.status).toBe(503);
      expect(downA.body.error).toMatchObject({ code: 'EMAIL_DOMAIN_DNS_UNAVAILABLE', details: { retryable: true } });
      zone.heal(`down.${root}`);
    });

    it('limits setup requests per account (429 with Retry-After); a DNS outage during verification is recorded as retryable', async () => {
      const { u, host, domain } = await readyDomain(); // claim + verify: 2 of 8
      zone.fail(host);
      expect((await app.request('POST', `${R}/${domain.id}/verify`, { key: u.key })).status).toBe(202);
      await drain(app);
      const read = (await app.request('GET', `${R}/${domain.id}`, { key: u.key })).body.data.domain;
      expect(read).toMatchObject({ status: 'ready', error: { code: 'dns_unavailable', retryable: true } });
      zone.heal(host);
      for (let i = 0; i < 5; i++) expect((await app.request('POST', `${R}/check`, { key: u.key, body: { hostname: host } })).status).toBe(200);
      const limited = await app.request('POST', `${R}/check`, { key: u.key, body: { hostname: host } });
      expectError(limited, 429, 'EMAIL_DOMAIN_SETUP_RATE_LIMITED');
      const retryAfter = Number(limited.headers.get('retry-after'));
      expect(retryAfter).toBeGreaterThan(0);
      expect(retryAfter).toBeLessThanOrEqual(3600);
      expect(limited.body.error.details.retry_after).toBe(retryAfter);
      expectError(await app.request('POST', `${A}/check`, { key: u.key, body: { hostname: host } }), 429, 'EMAIL_DOMAIN_SETUP_RATE_LIMITED');
      // Reads are not setup requests.
      expect((await app.request('GET', `${A}/${domain.id}`, { key: u.key })).status).toBe(200);
    });

    // Moves the app's clock: keep it last.
    it('periodic rechecks pause a domain whose records went missing (no mail) and resume it; an unfinished setup fails after its window', async () => {
      const { u, host, domain } = await readyDomain();
      const box = (await app.request('POST', '/v1/mailboxes', { key: u.key, body: { mailbox: { email: { username: 'ops', domain: host } } } })).body.data.mailbox;
      const recheck = async () => {
        offsetMs += 2 * 60 * 60 * 1000;
        await app.started.deps.jobs.enqueue(app.started.deps.db, 'domains.recheck', {});
        await drain(app);
        return (await app.request('GET', `${R}/${domain.id}`, { key: u.key })).body.data.domain;
      };
      zone.remove(host, 'MX');
      const paused = await recheck();
      expect(paused).toMatchObject({ status: 'paused', receiving: false, pause_reason: 'mx_record_missing', error: { code: 'mx_record_missing', retryable: true } });
      expect(paused.paused_at).not.toBeNull();
      expect(await rcpt(app, `ops@${host}`)).toMatch(/^550 5\.2\.1 .*domain_paused/);
      expect(await settings(app, u.key, box.id)).toMatchObject({ receiving_enabled: false, blocked_reason: 'domain_paused' });
      expect((await settings(app, u.key, box.id)).available_domains).toEqual([{ hostname: 'mail.localhost', kind: 'platform' }]);
      expect((await app.request('GET', `/v1/mailboxes/${box.id}`, { key: u.key })).body.data.mailbox.email).toMatchObject({ receiving_enabled: false, blocked_reason: 'domain_paused' });
      expect(await inboundEmail(app, u.key, box.id)).toMatchObject({ address: `ops@${host}`, receiving_enabled: false });
      zone.mx(host, MX);
      const resumed = await recheck();
      expect(resumed).toMatchObject({ status: 'ready', receiving: true, pause_reason: null, paused_at: null, error: null });
      expect((await app.request('GET', `/v1/mailboxes/${box.id}`, { key: u.key })).body.data.mailbox.email).toMatchObject({ receiving_enabled: true });
      expect((await sendMail(app, { to: `ops@${host}` })).emailIds).toHaveLength(1);

      const root = `x${serial++}-${kind}.test`;
      zone.addZone(root);
      const stale = (await app.request('POST', R, { key: u.key, body: { hostname: `inbox.${root}` } })).body.data.domain;
      offsetMs += 8 * 24 * 60 * 60 * 1000;
      await app.started.deps.jobs.enqueue(app.started.deps.db, 'domains.recheck', {});
      await drain(app);
      const failed = (await app.request('GET', `${R}/${stale.id}`, { key: u.key })).body.data.domain;
      expect(failed).toMatchObject({ status: 'failed', error: { code: 'setup_expired', retryable: false } });
      const again = await app.request('POST', `${R}/${stale.id}/verify`, { key: u.key });
      expect(again.status).toBe(202);
      expect(again.body.data.domain.status).toBe('pending_ownership');
      expect(Date.parse(again.body.data.domain.setup_expires_at)).toBeGreaterThan(Date.now() + offsetMs);
    });
  });
}
