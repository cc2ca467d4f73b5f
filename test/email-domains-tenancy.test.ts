import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DATABASES, startTestApp, type TestApp } from './harness.ts';
import { mailboxWithAddress } from './smtp-helpers.ts';
import { startTestZone, type TestZone } from './dns-zone.ts';
import { drain, expectError, rcpt, rotate, rotateA, settings } from './address-helpers.ts';
import { deliverLocal } from '../src/outbound/local-delivery.ts';

// Custom domains between accounts: another account's domain id answers exactly like a missing one
// on both surfaces, a ready domain of one account is never usable by another (mailbox creation,
// rotation, aliases), and a claim whose setup failed does not keep the hostname from others.

const MX = 'mx.cubby.test';
const R = '/v1/account/email_domains';
const A = '/api/v1/account/inbound_email_domains';
let serial = 0;

for (const kind of DATABASES) {
  describe(`custom domains between accounts [${kind}]`, () => {
    let zone: TestZone;
    let app: TestApp;
    let offsetMs = 0;
    beforeAll(async () => {
      zone = await startTestZone();
      app = await startTestApp(kind, { CUBBY_MX_HOST: MX }, { resolver: zone.resolver, now: () => new Date(Date.now() + offsetMs) });
    });
    afterAll(async () => {
      await app?.stop();
      await zone?.close();
    });

    async function claim(key: string, hostname: string) {
      const res = await app.request('POST', R, { key, body: { hostname } });
      expect(res.status, res.text).toBe(201);
      return res.body.data.domain;
    }

    function publish(domain: any) {
      for (const r of domain.required_dns_records) {
        if (r.type === 'TXT') zone.txt(r.name, r.value);
        else zone.mx(r.name, r.value.split(' ')[1], Number(r.value.split(' ')[0]));
      }
    }

    it("another account's domain id answers like a missing one; its ready domain cannot be used", async () => {
      const root = `t${serial++}-${kind}.test`;
      zone.addZone(root);
      const owner = await app.user({ plan: 'pilot' });
      const host = `inbox.${root}`;
      const domain = await claim(owner.key, host);
      publish(domain);
      await app.request('POST', `${R}/${domain.id}/verify`, { key: owner.key });
      await drain(app);
      expect((await app.request('GET', `${R}/${domain.id}`, { key: owner.key })).body.data.domain.status).toBe('ready');

      const other = await app.user({ plan: 'pilot' });
      const same = (res: { status: number; body: any; text: string }, missing: { status: number; body: any }) => {
        expect(res.status, res.text).toBe(missing.status);
        expect(res.body.error.code).toBe(missing.body.error.code);
        expect(res.body.error.message).toBe(missing.body.error.message);
      };
      const body = { hostname: host, confirm: true };
      for (const [method, path, b] of [
        ['GET', '', undefined],
        ['POST', '/verify', {}],
        ['DELETE', '', body],
      ] as const) {
        for (const base of [R, A]) {
          const missing = await app.request(method, `${base}/dom_00000000000000000000000000${path}`, { key: other.key, body: b });
          expectError(missing, 404, 'EMAIL_DOMAIN_NOT_FOUND');
          same(await app.request(method, `${base}/${domain.id}${path}`, { key: other.key, body: b }), missing);
        }
      }
      expect((await app.request('GET', R, { key: other.key })).body.data.domains).toEqual([]);
      // Still there, untouched, for its owner.
      expect((await app.request('GET', `${A}/${domain.id}`, { key: owner.key })).status).toBe(200);

      // Never usable by the other account: mailbox creation, rotation (both surfaces), alias.
      expectError(await app.request('POST', '/v1/mailboxes', { key: other.key, body: { mailbox: { email: { username: 'x', domain: host } } } }), 422, 'EMAIL_DOMAIN_NOT_AVAILABLE');
      const box = await mailboxWithAddress(app, other);
      expect((await settings(app, other.key, box.id)).available_domains).toEqual([{ hostname: 'mail.localhost', kind: 'platform' }]);
      expectError(await rotate(app, other.key, box.id, { expected_address: box.address, domain: host, keep_old_as_alias: false }), 422, 'EMAIL_DOMAIN_NOT_AVAILABLE');
      expectError(await rotateA(app, other.key, box.id, { current_address: box.address, domain: host }), 409, 'INBOUND_EMAIL_ROTATION_UNAVAILABLE');
      expectError(await app.request('POST', `/v1/mailboxes/${box.id}/email/aliases`, { key: other.key, body: { username: 'x', domain: host } }), 422, 'EMAIL_DOMAIN_NOT_AVAILABLE');
      expect(await app.started.deps.db.selectFrom('email_addresses').select('id').where('domain', '=', host).execute()).toEqual([]);
      expect(await app.started.deps.db.selectFrom('address_assignments').select('id').where('hostname', '=', host).execute()).toEqual([]);
    });

    it('addresses left on a removed domain do not keep it local: RCPT is a relay refusal and our own senders go out to its new mail servers', async () => {
      const root = `r${serial++}-${kind}.test`;
      zone.addZone(root);
      const host = `inbox.${root}`;
      const owner = await app.user({ plan: 'pilot' });
      const domain = await claim(owner.key, host);
      publish(domain);
      await app.request('POST', `${R}/${domain.id}/verify`, { key: owner.key });
      await drain(app);
      const box = (await app.request('POST', '/v1/mailboxes', { key: owner.key, body: { mailbox: { email: { username: 'orders', domain: host } } } })).body.data.mailbox;
      expect((await rotate(app, owner.key, box.id, { expected_address: `orders@${host}`, domain: 'platform', keep_old_as_alias: false })).status).toBe(200);
      expect(await rcpt(app, `orders@${host}`)).toMatch(/^550 5\.1\.1 /); // retired, domain still ours
      expect((await app.request('DELETE', `${R}/${domain.id}`, { key: owner.key, body: { hostname: host, confirm: true } })).status).toBe(200);

      // The retired row (and a name never used) no longer make the domain ours.
      expect(await rcpt(app, `orders@${host}`)).toMatch(/^550 5\.7\.1 /);
      expect(await rcpt(app, `anyone@${host}`)).toMatch(/^550 5\.7\.1 /);
      const message = { raw: Buffer.from('Subject: hi\r\n\r\nhi\r\n'), address: `orders@${host}`, envelopeFrom: box.email.address ?? 'x@mail.localhost', messageId: 'tenancy-1@mail.localhost' };
      expect(await deliverLocal(app.started.deps, message)).toBeNull(); // null: not ours, delivered remotely

      // Claimed and verified by another account: ours again; the old name stays reserved (5.1.1).
      const next = await app.user({ plan: 'pilot' });
      const d2 = await claim(next.key, host);
      publish(d2);
      await app.request('POST', `${R}/${d2.id}/verify`, { key: next.key });
      await drain(app);
      expect(await rcpt(app, `orders@${host}`)).toMatch(/^550 5\.1\.1 /);
      const bookings = await app.request('POST', '/v1/mailboxes', { key: next.key, body: { mailbox: { email: { username: 'bookings', domain: host } } } });
      expect(bookings.status, bookings.text).toBe(201);
      expect(await rcpt(app, `bookings@${host}`)).toMatch(/^250 /);
    });

    // Moves the app's clock: keep it last.
    it('a claim whose setup failed (never verified) no longer holds the hostname: its real owner can claim it', async () => {
      const root = `s${serial++}-${kind}.test`;
      zone.addZone(root);
      const host = `inbox.${root}`;
      const squatter = await app.user({ plan: 'pilot' });
      const owner = await app.user({ plan: 'pilot' });
      const squat = await claim(squatter.key, host);
      // While the squatter's setup window is open the hostname is taken.
      const taken = await app.request('POST', A, { key: owner.key, body: { hostname: host } });
      expectError(taken, 422, 'EMAIL_DOMAIN_CONFLICT');
      expect(taken.body.error.details.reason).toBe('already_claimed');

      offsetMs += 8 * 24 * 60 * 60 * 1000;
      await app.started.deps.jobs.enqueue(app.started.deps.db, 'domains.recheck', {});
      await drain(app);
      expect((await app.request('GET', `${R}/${squat.id}`, { key: squatter.key })).body.data.domain.status).toBe('failed');

      const check = await app.request('POST', `${R}/check`, { key: owner.key, body: { hostname: host } });
      expect(check.body.data).toMatchObject({ available: true, unavailable_reason: null });
      const mine = await claim(owner.key, host);
      publish(mine);
      await app.request('POST', `${R}/${mine.id}/verify`, { key: owner.key });
      await drain(app);
      expect((await app.request('GET', `${R}/${mine.id}`, { key: owner.key })).body.data.domain.status).toBe('ready');

      // The failed claim is gone for the squatter, who cannot restart it nor take the hostname back.
      expectError(await app.request('GET', `${R}/${squat.id}`, { key: squatter.key }), 404, 'EMAIL_DOMAIN_NOT_FOUND');
      expectError(await app.request('POST', `${R}/${squat.id}/verify`, { key: squatter.key }), 404, 'EMAIL_DOMAIN_NOT_FOUND');
      expect((await app.request('GET', R, { key: squatter.key })).body.data.domains).toEqual([]);
      expectError(await app.request('POST', R, { key: squatter.key, body: { hostname: host } }), 422, 'EMAIL_DOMAIN_CONFLICT');
    });
  });
}
