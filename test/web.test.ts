import { createHash, randomBytes } from 'node:crypto';
import { expect, it } from 'vitest';
import { describeEachDatabase } from './harness.ts';
import { csrfOf, WebClient } from './web-client.ts';

const email = () => `web-${randomBytes(5).toString('hex')}@example.com`;
const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

describeEachDatabase('web pages', (app) => {
  it('signs up, signs in and shows the dashboard with the new account', async () => {
    const c = new WebClient(app().base);
    const addr = email();
    const res = await c.signUp({ email: addr, name: 'Ada Web', account_name: 'Analytical Engines' });
    expect(res.status).toBe(303);
    expect(res.location).toBe('/');
    const session = res.setCookies.find((l) => l.startsWith('cubby_session='))!;
    expect(session).toMatch(/HttpOnly/i);
    expect(session).toMatch(/SameSite=Lax/i);
    expect(session).not.toMatch(/Secure/i);
    const expires = Date.parse(session.match(/Expires=([^;]+)/i)![1]!);
    expect(Math.abs(expires - (Date.now() + 14 * 86_400_000))).toBeLessThan(120_000);

    const home = await c.get('/');
    expect(home.status).toBe(200);
    expect(home.headers.get('content-type')).toMatch(/text\/html/);
    expect(home.headers.get('cache-control')).toBe('no-store');
    expect(home.text).toContain('Ada Web');
    expect(home.text).toContain('Analytical Engines');
    expect(home.text).toContain('href="/settings/api_keys"');

    // Only the token's hash is stored.
    const token = c.cookies.get('cubby_session')!;
    const rows = await app().started.deps.db.selectFrom('sessions').selectAll().execute();
    expect(rows.some((r) => r.token_hash === sha256(token))).toBe(true);
    expect(rows.some((r) => Object.values(r).includes(token))).toBe(false);

    // Sign in again from another browser.
    const other = new WebClient(app().base);
    const signIn = await other.signIn(addr.toUpperCase(), 'a long test password');
    expect(signIn.status).toBe(303);
    expect((await other.get('/')).text).toContain('Analytical Engines');
  });

  it('shows form errors for a taken email, a weak password and an invalid email', async () => {
    const addr = email();
    expect((await new WebClient(app().base).signUp({ email: addr })).status).toBe(303);

    const c = new WebClient(app().base);
    const taken = await c.signUp({ email: addr, name: 'Second <b>Person</b>' });
    expect(taken.status).toBe(422);
    expect(taken.text).toContain('An account with this email already exists');
    expect(taken.text).toContain('value="Second &lt;b&gt;Person&lt;/b&gt;"');
    expect(c.cookies.has('cubby_session')).toBe(false);

    const weak = await c.signUp({ email: email(), password: 'short' });
    expect(weak.status).toBe(422);
    expect(weak.text).toContain('Use at least 10 characters.');
    expect(weak.text).not.toContain('short');

    const invalid = await c.signUp({ email: 'not-an-email' });
    expect(invalid.status).toBe(422);
    expect(invalid.text).toContain('Enter a valid email address.');

    const wrong = await c.signIn(addr, 'not the password at all');
    expect(wrong.status).toBe(422);
    expect(wrong.text).toContain('Incorrect email or password.');
  });

  it('escapes what people type', async () => {
    const c = new WebClient(app().base);
    await c.signUp({ email: email(), name: '<script>alert(1)</script>', account_name: '"><img src=x onerror=alert(2)>' });
    const home = await c.get('/');
    expect(home.text).not.toContain('<script>alert');
    expect(home.text).not.toContain('<img src=x');
    expect(home.text).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
    expect(home.headers.get('content-security-policy')).toContain("default-src 'none'");
  });

  it('refuses a form POST without a valid CSRF token (403)', async () => {
    const c = new WebClient(app().base);
    // No CSRF cookie and no token.
    const bare = await c.request('POST', '/users/sign_up', { email: email(), name: 'X', password: 'a long test password' });
    expect(bare.status).toBe(403);
    expect(bare.text).toContain('This form has expired');
    // The cookie, but no token.
    await c.get('/users/sign_up');
    const noToken = await c.request('POST', '/users/sign_up', { email: email(), name: 'X', password: 'a long test password' });
    expect(noToken.status).toBe(403);
    // A forged token.
    const forged = await c.request('POST', '/users/sign_up', { _csrf: 'abc-def', email: email(), name: 'X', password: 'a long test password' });
    expect(forged.status).toBe(403);
    // A token minted before sign-in does not work after it (bound to the session).
    const before = await c.get('/users/sign_in');
    await c.signUp({ email: email() });
    expect(c.cookies.has('cubby_session')).toBe(true);
    const stale = await c.request('POST', '/users/sign_out', { _csrf: csrfOf(before.text) });
    expect(stale.status).toBe(403);
    expect((await c.get('/')).status).toBe(200);
  });

  it('sign-out deletes the session, and the old cookie no longer works', async () => {
    const c = new WebClient(app().base);
    await c.signUp({ email: email() });
    const token = c.cookies.get('cubby_session')!;
    const out = await c.submit('/', '/users/sign_out', {});
    expect(out.status).toBe(303);
    expect(out.location).toBe('/users/sign_in');
    expect(c.cookies.has('cubby_session')).toBe(false);
    const row = await app().started.deps.db.selectFrom('sessions').select('id').where('token_hash', '=', sha256(token)).executeTakeFirst();
    expect(row).toBeUndefined();

    const replay = new WebClient(app().base);
    replay.cookies.set('cubby_session', token);
    const home = await replay.get('/');
    expect(home.status).toBe(303);
    expect(home.location).toBe('/users/sign_in');
  });

  it('the keys page requires a session', async () => {
    const c = new WebClient(app().base);
    const page = await c.get('/settings/api_keys');
    expect(page.status).toBe(303);
    expect(page.location).toBe('/users/sign_in?next=%2Fsettings%2Fapi_keys');
    const create = await c.submit('/users/sign_in', '/settings/api_keys', { label: 'x', scope: 'mailbox_read', mailbox_access: 'all' });
    expect(create.status).toBe(303);
    expect(create.location).toBe('/users/sign_in');
    // After signing in with ?next the browser comes back to the keys page; never elsewhere.
    const addr = email();
    await new WebClient(app().base).signUp({ email: addr });
    const back = await c.submit('/users/sign_in?next=%2Fsettings%2Fapi_keys', '/users/sign_in', { email: addr, password: 'a long test password', next: '/settings/api_keys' });
    expect(back.location).toBe('/settings/api_keys');
    const evil = await new WebClient(app().base).submit('/users/sign_in', '/users/sign_in', { email: addr, password: 'a long test password', next: '//evil.example/' });
    expect(evil.location).toBe('/');
  });

  it('creates a key shown once, lists it, and revokes it', async () => {
    const c = new WebClient(app().base);
    await c.signUp({ email: email() });
    // A new account has no mailboxes: only whole-account access is offered.
    const empty = await c.get('/settings/api_keys');
    expect(empty.text).toContain('No mailboxes yet');
    expect(empty.text).not.toContain('value="selected"');
    const created = await c.submit('/settings/api_keys', '/settings/api_keys', { label: 'ci <runner>', scope: 'mailbox_read', mailbox_access: 'all', expires_on: '' });
    expect(created.status).toBe(201);
    expect(created.location).toBeNull();
    const token = created.text.match(/id="new-key"[^>]*>(cubby_[A-Za-z0-9]+)</)![1]!;
    expect(created.text).toContain('ci &lt;runner&gt;');
    const status = await app().request('GET', '/v1/status', { key: token });
    expect(status.status).toBe(200);
    expect(status.body.data.connection.scope).toBe('mailbox_read');

    const list = await c.get('/settings/api_keys');
    expect(list.text).not.toContain(token);
    expect(list.text).toContain(`${token.slice(0, 10)}…${token.slice(-4)}`);
    const keyId = list.text.match(/data-key-id="(key_[A-Za-z0-9]+)"/)![1]!;
    const revoked = await c.submit(list, `/settings/api_keys/${keyId}/revoke`, {});
    expect(revoked.status).toBe(303);
    expect((await app().request('GET', '/v1/status', { key: token })).status).toBe(401);

    // Someone else's key answers like a missing one.
    const other = new WebClient(app().base);
    await other.signUp({ email: email() });
    const foreign = await other.submit('/settings/api_keys', `/settings/api_keys/${keyId}/revoke`, {});
    expect(foreign.status).toBe(404);
  });

  it('rejects a bad expiry date and a selected key without mailboxes', async () => {
    const c = new WebClient(app().base);
    await c.signUp({ email: email() });
    const past = await c.submit('/settings/api_keys', '/settings/api_keys', { scope: 'mailbox_write', mailbox_access: 'all', expires_on: '2001-01-01' });
    expect(past.status).toBe(422);
    expect(past.text).toContain('Choose today or a later date.');
    const none = await c.submit('/settings/api_keys', '/settings/api_keys', { scope: 'mailbox_write', mailbox_access: 'selected' });
    expect(none.status).toBe(422);
    expect(none.text).toContain('Choose at least one mailbox');
    const tomorrow = new Date(Date.now() + 86_400_000).toISOString().slice(0, 10);
    const ok = await c.submit('/settings/api_keys', '/settings/api_keys', { scope: 'mailbox_write', mailbox_access: 'all', expires_on: tomorrow });
    expect(ok.status).toBe(201);
  });

  it('creates a key for selected mailboxes, only among the account\'s own', async () => {
    const c = new WebClient(app().base);
    await c.signUp({ email: email() });
    const admin = (await c.submit('/settings/api_keys', '/settings/api_keys', { scope: 'mailbox_admin', mailbox_access: 'all' })).text.match(/id="new-key"[^>]*>(cubby_[A-Za-z0-9]+)</)![1]!;
    const ids: string[] = [];
    for (const title of ['Receipts <2024>', 'Reports']) {
      const res = await app().request('POST', '/v1/mailboxes', { key: admin, body: { mailbox: { title } } });
      expect(res.status).toBe(201);
      ids.push(res.body.data.mailbox.id);
    }
    const stranger = await app().user();
    const foreign = await app().request('POST', '/v1/mailboxes', { key: stranger.key, body: { mailbox: { title: 'Not yours' } } });

    const page = await c.get('/settings/api_keys');
    expect(page.text).toContain('value="selected"');
    expect(page.text).toContain('Receipts &lt;2024&gt;');
    expect(page.text).not.toContain('Not yours');

    const refused = await c.submit(page, '/settings/api_keys', { scope: 'mailbox_write', mailbox_access: 'selected', [`mbx:${foreign.body.data.mailbox.id}`]: 'write' });
    expect(refused.status).toBe(422);
    expect(refused.text).toContain('Choose at least one mailbox');

    // A read-scoped key reaches its mailboxes read-only, whatever was chosen.
    const created = await c.submit(page, '/settings/api_keys', { scope: 'mailbox_read', mailbox_access: 'selected', [`mbx:${ids[0]}`]: 'write', [`mbx:${ids[1]}`]: '' });
    expect(created.status).toBe(201);
    const token = created.text.match(/id="new-key"[^>]*>(cubby_[A-Za-z0-9]+)</)![1]!;
    const status = await app().request('GET', '/v1/status', { key: token });
    expect(status.status).toBe(200);
    expect(status.body.data.connection.mailbox_access).toBe('selected');
    expect(status.body.data.connection.mailbox_permissions).toEqual({ [ids[0]!]: 'read' });
    expect((await c.get('/settings/api_keys')).text).toContain('1 selected mailbox<');
  });

  it('leaves the JSON API alone: no cookies, no form parsing, no web routes in OpenAPI', async () => {
    const u = await app().user();
    const status = await app().request('GET', '/v1/status', { key: u.key });
    expect(status.headers.get('set-cookie')).toBeNull();
    const form = await app().request('POST', '/api/v1/accounts', { key: u.key, rawBody: 'name=x', headers: { 'content-type': 'application/x-www-form-urlencoded' } });
    expect(form.status).toBe(415);
    const doc = await app().request('GET', '/v1/openapi.json');
    expect(Object.keys(doc.body.paths).some((p) => p.startsWith('/users') || p.startsWith('/settings'))).toBe(false);
  });
});

describeEachDatabase(
  'web pages behind https',
  (app) => {
    it('marks the cookies Secure when the public URL is https', async () => {
      const c = new WebClient(app().base);
      const page = await c.get('/users/sign_up');
      expect(page.setCookies.find((l) => l.startsWith('cubby_csrf='))).toMatch(/Secure/);
      const res = await c.signUp({ email: email() });
      expect(res.setCookies.find((l) => l.startsWith('cubby_session='))).toMatch(/; Secure/);
    });
  },
  { CUBBY_PUBLIC_URL: 'https://cubby.example' },
);
