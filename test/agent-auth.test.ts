import { expect, it } from 'vitest';
import { describeEachDatabase, type TestApp, type TestUser } from './harness.ts';
import { labelNow, mailboxWithAddress } from './smtp-helpers.ts';
import { signedIn } from './agent-helpers.ts';
import { csrfOf } from './web-client.ts';
import { registerUser } from '../src/accounts/accounts.service.ts';

// The email-code flow with the code read from a mailbox of our own (the person's sign-in
// address is a Cubby mailbox, so our own mail sending delivers the code there), one-time
// connection codes, browser login links and the capabilities document, on both surfaces.

/** A person whose sign-in address is a mailbox of `host`'s account; they own an account of their own. */
async function personAtMailbox(app: TestApp, host: TestUser) {
  const box = await mailboxWithAddress(app, host);
  const { user, account } = await registerUser(app.started.deps.db, { email: box.address, password: 'a long test password', name: 'Agent Owner' }, new Date());
  return { userId: user.id, accountId: account.id, email: box.address, mailboxId: box.id };
}

/** The newest sign-in code delivered to the mailbox. */
async function codeIn(app: TestApp, host: TestUser, mailboxId: string): Promise<string> {
  await labelNow(app);
  const list = await app.request('GET', `/v1/mailboxes/${mailboxId}/emails`, { key: host.key });
  const newest = list.body.data.emails[0];
  expect(newest.subject).toMatch(/sign-in code/);
  const detail = await app.request('GET', `/v1/mailboxes/${mailboxId}/emails/${newest.id}`, { key: host.key });
  return detail.body.data.email.body_text.match(/code is (\d{6})/)![1]!;
}

describeEachDatabase('agent auth: email code, grants, login links', (app) => {
  it('request_code answers the same for every address; verify_code issues a key once with every field', async () => {
    const host = await app().user();
    const person = await personAtMailbox(app(), host);
    const known = await app().request('POST', '/v1/agent_auth/request_code', { body: { email: person.email } });
    const unknown = await app().request('POST', '/v1/agent_auth/request_code', { body: { email: `nobody-${person.mailboxId}@example.com` } });
    expect(known.status).toBe(200);
    expect(Object.keys(known.body.data).sort()).toEqual(['email', 'expires_in_seconds', 'fallback_url', 'hint', 'message']);
    expect({ ...known.body.data, email: 'x' }).toEqual({ ...unknown.body.data, email: 'x' });

    const code = await codeIn(app(), host, person.mailboxId);
    const wrong = await app().request('POST', '/v1/agent_auth/verify_code', { body: { email: person.email, code: code === '000000' ? '111111' : '000000' } });
    expect(wrong.status).toBe(422);
    expect(wrong.body.error.code).toBe('SIGN_IN_CODE_INVALID');

    const spaced = `${code.slice(0, 3)} ${code.slice(3)}`;
    const ok = await app().request('POST', '/v1/agent_auth/verify_code', { body: { email: person.email, code: spaced, label: 'Laptop agent', permission_scope: 'mailbox_read' } });
    expect(ok.status).toBe(201);
    const d = ok.body.data;
    for (const f of ['api_key', 'account_id', 'account_name', 'scope', 'mailbox_access', 'mailbox_ids', 'mailbox_permissions', 'account_connection_limits', 'expires_at', 'manage_access', 'mailboxes', 'guidance']) expect(d).toHaveProperty(f);
    expect(d).toMatchObject({ account_id: person.accountId, scope: 'mailbox_read', mailbox_access: 'all', expires_at: null });
    const status = await app().request('GET', '/v1/status', { key: d.api_key });
    expect(status.body.data.connection).toMatchObject({ label: 'Laptop agent', token_type: 'api', scope: 'mailbox_read' });
    expect(status.body.data.connection.renewal.browser_url).toMatch(/\/settings\/connections$/);
    // Used once.
    const again = await app().request('POST', '/v1/agent_auth/verify_code', { body: { email: person.email, code } });
    expect(again.body.error.code).toBe('SIGN_IN_CODE_INVALID');
  });

  it('surface A: bucket_access and selected mailboxes; the reply is data.api_key', async () => {
    const host = await app().user();
    const person = await personAtMailbox(app(), host);
    const personKey = await app().key({ userId: person.userId, accountId: person.accountId, email: person.email, key: '' });
    const own = (await app().request('POST', '/v1/mailboxes', { key: personKey, body: { mailbox: { title: 'Selected one' } } })).body.data.mailbox.id;
    await app().request('POST', '/v1/mailboxes', { key: personKey, body: { mailbox: { title: 'Not selected' } } });
    await app().request('POST', '/api/v1/agent_auth/request_code', { body: { email: person.email } });
    const code = await codeIn(app(), host, person.mailboxId);
    const ok = await app().request('POST', '/api/v1/agent_auth/verify_code', { body: { email: person.email, code, bucket_access: 'selected', bucket_ids: [own], bucket_permissions: { [own]: 'read' } } });
    expect(ok.status).toBe(201);
    expect(ok.body.data.api_key).toMatch(/^cubby_/);
    expect(ok.body.data.mailbox_permissions).toEqual({ [own]: 'read' });
    const list = await app().request('GET', '/v1/mailboxes', { key: ok.body.data.api_key });
    expect(list.body.data.mailboxes.map((m: any) => m.id)).toEqual([own]);
  });

  it('refuses collaborators and people with two-factor sign-in; a wrong code five times kills it', async () => {
    const host = await app().user();
    const collab = await personAtMailbox(app(), host);
    const db = app().started.deps.db;
    await db.updateTable('memberships').set({ role: 'collaborator' }).where('user_id', '=', collab.userId).execute();
    await app().request('POST', '/v1/agent_auth/request_code', { body: { email: collab.email } });
    const c1 = await codeIn(app(), host, collab.mailboxId);
    expect((await app().request('POST', '/v1/agent_auth/verify_code', { body: { email: collab.email, code: c1 } })).body.error.code).toBe('ACCOUNT_ADMIN_REQUIRED');

    const twoFactor = await personAtMailbox(app(), host);
    await db.updateTable('users').set({ two_factor_enabled: 1 }).where('id', '=', twoFactor.userId).execute();
    await app().request('POST', '/v1/agent_auth/request_code', { body: { email: twoFactor.email } });
    const c2 = await codeIn(app(), host, twoFactor.mailboxId);
    const refused = await app().request('POST', '/v1/agent_auth/verify_code', { body: { email: twoFactor.email, code: c2 } });
    expect(refused.status).toBe(403);
    expect(refused.body.error.code).toBe('TWO_FACTOR_REQUIRED');

    const guessed = await personAtMailbox(app(), host);
    await app().request('POST', '/v1/agent_auth/request_code', { body: { email: guessed.email } });
    const c3 = await codeIn(app(), host, guessed.mailboxId);
    const bad = c3 === '999999' ? '999998' : '999999';
    for (let i = 0; i < 5; i++) await app().request('POST', '/v1/agent_auth/verify_code', { body: { email: guessed.email, code: bad } });
    expect((await app().request('POST', '/v1/agent_auth/verify_code', { body: { email: guessed.email, code: c3 } })).body.error.code).toBe('SIGN_IN_CODE_INVALID');
  });

  it('limits code requests per address (429 with Retry-After)', async () => {
    const email = `limited-${Date.now()}@example.com`;
    for (let i = 0; i < 5; i++) expect((await app().request('POST', '/v1/agent_auth/request_code', { body: { email } })).status).toBe(200);
    const over = await app().request('POST', '/v1/agent_auth/request_code', { body: { email } });
    expect(over.status).toBe(429);
    expect(Number(over.headers.get('retry-after'))).toBeGreaterThan(0);
  });

  it('exchange_grant trades a dashboard connection code once', async () => {
    const user = await app().user();
    const web = await signedIn(app(), user);
    const page = await web.get('/settings/connections');
    const made = await web.request('POST', '/settings/connections/grants', { _csrf: csrfOf(page.text), label: 'Chat agent', account_id: user.accountId, scope: 'mailbox_write', mailbox_access: 'all' });
    expect(made.status).toBe(201);
    const grant = made.text.match(/data-testid="grant-token">([^<]+)</)![1]!;
    const ok = await app().request('POST', '/v1/agent_auth/exchange_grant', { body: { grant_token: grant, label: 'Codex on laptop' } });
    expect(ok.status).toBe(201);
    expect(ok.body.data).toMatchObject({ account_id: user.accountId, scope: 'mailbox_write' });
    expect((await app().request('GET', '/v1/status', { key: ok.body.data.api_key })).body.data.connection.label).toBe('Codex on laptop');
    const again = await app().request('POST', '/api/v1/agent_auth/exchange_grant', { body: { grant_token: grant } });
    expect(again.status).toBe(422);
    expect(again.body.error.code).toBe('GRANT_INVALID');
  });

  it('browser_login_link is single-use and signs nobody in', async () => {
    const user = await app().user();
    const r = await app().request('POST', '/v1/agent_auth/browser_login_link', { key: user.key, body: { redirect_path: '/settings/connections' } });
    expect(r.status).toBe(201);
    expect(r.body.data).toMatchObject({ single_use: true, requires_login: true, redirect_path: '/settings/connections' });
    const first = await fetch(r.body.data.url, { redirect: 'manual' });
    expect(first.status).toBe(303);
    expect(first.headers.get('location')).toBe('/users/sign_in?next=%2Fsettings%2Fconnections');
    expect(first.headers.get('set-cookie') ?? '').not.toContain('cubby_session');
    expect((await fetch(r.body.data.url, { redirect: 'manual' })).status).toBe(410);
    const offsite = await app().request('POST', '/v1/agent_auth/browser_login_link', { key: user.key, body: { redirect_path: '//evil.example/' } });
    expect(offsite.status).toBe(422);
    expect((await app().request('POST', '/v1/agent_auth/browser_login_link', { body: {} })).status).toBe(401);
  });

  it('capabilities on both surfaces list every flow as available', async () => {
    for (const path of ['/v1/agent_auth/capabilities', '/api/v1/agent_auth/capabilities']) {
      const r = await app().request('GET', path);
      expect(r.status).toBe(200);
      const data = r.body.data;
      expect(data.flows.map((f: any) => f.id).sort()).toEqual(['api_key', 'email_code', 'exchange_grant', 'oauth_authorization_code', 'oauth_device']);
      expect(data.flows.every((f: any) => f.available)).toBe(true);
      expect(data.mcp_url).toBe(`${app().base}/mcp`);
    }
  });
});
