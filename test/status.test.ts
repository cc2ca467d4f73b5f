import { expect, it } from 'vitest';
import { describeEachDatabase } from './harness.ts';
import { agency, dbOf, expectError, keyRow } from './factories.ts';
import { CLIENT_VERSION, SERVER_VERSION } from '../src/version.ts';

// The status reads of both surfaces, account limits, and the no-key capabilities read.

const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const ACCOUNT_IDENTITY_KEYS = ['id', 'name', 'account_kind', 'kind', 'client_name', 'agency_account', 'website_publishing_enabled', 'region', 'status', 'permissions'];
const STATUS_ONLY_KEYS = ['can_create_client_account', 'can_manage_billing', 'billing_message', 'previous_status', 'status_reason', 'status_updated_at', 'restriction'];
const CONNECTION_KEYS = [
  'api_key_id',
  'label',
  'token_type',
  'scope',
  'expires_at',
  'last_used_at',
  'mailbox_access',
  'mailbox_ids',
  'denied_mailbox_ids',
  'mailbox_permissions',
  'permissions',
  'agent',
  'transport',
  'renewal',
];
const LIMIT_KEYS = [
  'max_mailboxes',
  'max_mailbox_creations_per_month',
  'max_files_per_mailbox',
  'max_current_files',
  'max_storage_bytes',
  'max_file_size_bytes',
  'max_pdf_size_bytes',
  'max_file_versions_per_file',
  'max_email_domains',
  'max_received_emails_per_month',
  'max_received_email_bytes_per_month',
  'max_received_email_message_bytes',
  'max_sent_emails_per_month',
  'max_email_address_rotations_per_month',
  'max_account_members',
  'max_api_keys',
  'max_agent_connections',
  'api_rate_limit_requests_per_minute',
  'audit_retention_days',
  'max_email_aliases_per_mailbox',
];

describeEachDatabase('GET /v1/status', (app) => {
  it('has every field the spec lists', async () => {
    const u = await app().user({ name: 'Stat Us' });
    const started = Date.now();
    const res = await app().request('GET', '/v1/status', { key: u.key });
    expect(res.status).toBe(200);
    expect(res.body.success).toBe(true);
    const d = res.body.data;
    expect(d.connected).toBe(true);
    expect(d.default_account_id).toBe(u.accountId);
    expect(d.server_version).toBe(SERVER_VERSION);
    expect(d.client_version).toBe(CLIENT_VERSION);
    expect(d.features).toEqual({ email_domains: expect.any(Boolean) });
    expect(d.user).toEqual({ id: u.userId, email: u.email, name: 'Stat Us' });
    expect(d.user.id).toMatch(/^usr_[A-Za-z0-9]+$/);
    expect(d.dashboard_url).toMatch(/^https?:\/\//);

    expect(Object.keys(d.account).sort()).toEqual([...ACCOUNT_IDENTITY_KEYS, ...STATUS_ONLY_KEYS].sort());
    expect(d.account).toMatchObject({
      id: u.accountId,
      name: "Stat Us's account",
      account_kind: 'standard',
      kind: 'standard',
      client_name: null,
      agency_account: null,
      website_publishing_enabled: false,
      status: 'active',
      permissions: { scope: 'mailbox_admin', mailbox_access: 'all', can_create_mailboxes: true },
      can_create_client_account: false,
      can_manage_billing: true,
      previous_status: null,
      status_reason: null,
      status_updated_at: null,
      restriction: null,
    });
    expect(d.accounts).toHaveLength(1);
    expect(Object.keys(d.accounts[0]).sort()).toEqual([...ACCOUNT_IDENTITY_KEYS].sort());

    const c = d.connection;
    expect(Object.keys(c).sort()).toEqual([...CONNECTION_KEYS].sort());
    const row = await keyRow(app(), u.key);
    expect(c).toMatchObject({
      api_key_id: row.id,
      token_type: 'api',
      scope: 'mailbox_admin',
      expires_at: null,
      mailbox_access: 'all',
      mailbox_ids: [],
      denied_mailbox_ids: [],
      mailbox_permissions: {},
      permissions: { read: true, write: true, admin: true },
      transport: expect.any(String),
      renewal: { recommended: false, next_action: expect.any(String), browser_url: expect.stringMatching(/^https?:\/\//) },
    });
    expect(c.api_key_id).toMatch(/^key_[A-Za-z0-9]+$/);
    // this request counts as a use
    expect(c.last_used_at).toMatch(ISO_MS);
    expect(Date.parse(c.last_used_at)).toBeGreaterThanOrEqual(started - 1000);
    expect(JSON.stringify(d)).not.toContain(u.key);
  });

  it('reports this request as the last use even when the key was last used long ago', async () => {
    const u = await app().user();
    const longAgo = new Date(Date.now() - 5 * 86_400_000).toISOString();
    await dbOf(app()).updateTable('api_keys').set({ last_used_at: longAgo }).where('id', '=', (await keyRow(app(), u.key)).id).execute();
    const before = Date.now();
    const res = await app().request('GET', '/v1/status', { key: u.key });
    expect(Date.parse(res.body.data.connection.last_used_at)).toBeGreaterThanOrEqual(before - 1000);
    expect(Date.parse((await keyRow(app(), u.key)).last_used_at!)).toBeGreaterThanOrEqual(before - 1000);
  });

  it('permissions follow the key scope', async () => {
    const u = await app().user();
    const expected = {
      mailbox_read: { read: true, write: false, admin: false },
      mailbox_write: { read: true, write: true, admin: false },
      mailbox_admin: { read: true, write: true, admin: true },
    } as const;
    for (const scope of ['mailbox_read', 'mailbox_write', 'mailbox_admin'] as const) {
      const key = await app().key(u, { scope, label: `${scope} key` });
      const c = (await app().request('GET', '/v1/status', { key })).body.data.connection;
      expect(c.scope).toBe(scope);
      expect(c.label).toBe(`${scope} key`);
      expect(c.permissions).toEqual(expected[scope]);
    }
  });

  it('recommends renewal for a key that expires within 7 days, not for one that expires later', async () => {
    const u = await app().user();
    const soon = new Date(Date.now() + 3 * 86_400_000).toISOString();
    const later = new Date(Date.now() + 30 * 86_400_000).toISOString();
    const soonKey = await app().key(u, { expiresAt: soon });
    const laterKey = await app().key(u, { expiresAt: later });
    const s = (await app().request('GET', '/v1/status', { key: soonKey })).body.data.connection;
    expect(s.expires_at).toBe(soon);
    expect(s.renewal.recommended).toBe(true);
    expect(s.renewal.next_action).not.toBe('none');
    expect(s.renewal.browser_url).toMatch(/^https?:\/\//);
    const l = (await app().request('GET', '/v1/status', { key: laterKey })).body.data.connection;
    expect(l.expires_at).toBe(later);
    expect(l.renewal.recommended).toBe(false);
  });

  it('shows agent identification headers in connection.agent and records them on the key', async () => {
    const u = await app().user();
    const headers = {
      'user-agent': 'test-agent/1.0',
      'x-service-agent': 'claude-code',
      'x-service-agent-client': 'cli',
      'x-service-agent-version': '2.3.4',
      'x-cubby-agent-run-id': 'run-42',
      'x-service-agent-project': 'receipts',
      'x-service-agent-task': 'file receipts',
    };
    const res = await app().request('GET', '/v1/status', { key: u.key, headers });
    expect(res.body.data.connection.agent).toEqual({
      user_agent: 'test-agent/1.0',
      agent: 'claude-code',
      client: 'cli',
      version: '2.3.4',
      run_id: 'run-42',
      project: 'receipts',
      task: 'file receipts',
    });
    const row = await keyRow(app(), u.key);
    expect(JSON.parse(row.last_used_agent!)).toMatchObject({ agent: 'claude-code', run_id: 'run-42', version: '2.3.4' });

    // surface A reads the same headers
    const a = await app().request('GET', '/api/v1/status', { key: u.key, headers: { 'x-service-agent': 'codex', 'x-service-agent-run-id': 'r1' } });
    expect(a.body.data.connection.agent).toMatchObject({ agent: 'codex', run_id: 'r1' });

    // long values are cut, not refused
    const long = await app().request('GET', '/v1/status', { key: u.key, headers: { 'x-service-agent-task': 't'.repeat(5000) } });
    expect(long.status).toBe(200);
    expect(long.body.data.connection.agent.task.length).toBeLessThanOrEqual(200);
  });

  it('an agency owner sees what an agency may do', async () => {
    const owner = await agency(app());
    const d = (await app().request('GET', '/v1/status', { key: owner.key })).body.data;
    expect(d.account).toMatchObject({ account_kind: 'agency', can_create_client_account: true, can_manage_billing: true, billing_message: null });
    expect(d.features.email_domains).toBe(true);
  });
});

describeEachDatabase('GET /api/v1/status', (app) => {
  it('has the surface A fields; new accounts cannot publish websites', async () => {
    const u = await app().user({ plan: 'paid' });
    const res = await app().request('GET', '/api/v1/status', { key: u.key });
    expect(res.status).toBe(200);
    expect(res.body.success).toBeUndefined();
    const d = res.body.data;
    expect(d.account.id).toBe(u.accountId);
    expect(d.account.website_publishing_enabled).toBe(false);
    expect(d.default_account_id).toBe(u.accountId);
    expect(d.accounts.map((a: any) => a.id)).toEqual([u.accountId]);
    expect(d.features.website_publishing).toBe(false);
    expect(typeof d.features.github_sync).toBe('boolean');
    expect(d.server_version).toBe(SERVER_VERSION);
    expect(d.client_version).toBe(CLIENT_VERSION);
    expect(typeof d.publishing.free_plan_available).toBe('boolean');
    expect(d.publishing.static_site).toBe(false);
    expect(['empty_account', 'active', 'no_visible_buckets']).toContain(d.onboarding.state);
    expect(d.onboarding.state).toBe('empty_account');
    expect(Array.isArray(d.onboarding.suggested_projects)).toBe(true);
    expect(d.onboarding.suggested_projects.length).toBeGreaterThan(0);
    for (const p of d.onboarding.suggested_projects) expect(typeof p.title).toBe('string');
    expect(res.headers.get('x-service-client-version')).toBe(CLIENT_VERSION);
  });

  it('selects another account with account_id in the query, and refuses one it cannot use', async () => {
    const owner = await agency(app());
    const created = await app().request('POST', '/api/v1/accounts', { key: owner.key, body: { name: 'Sel' } });
    const client = created.body.data.account.id;
    const d = (await app().request('GET', '/api/v1/status', { key: owner.key, query: { account_id: client } })).body.data;
    expect(d.account.id).toBe(client);
    expect(d.default_account_id).toBe(owner.accountId);
    const stranger = await app().user();
    expectError(await app().request('GET', '/api/v1/status', { key: owner.key, query: { account_id: stranger.accountId } }), 'A', 403, 'ACCOUNT_ACCESS_DENIED');
  });
});

describeEachDatabase('GET /v1/account/limits', (app) => {
  it('lists every limit key of the spec with integer or null values', async () => {
    for (const plan of ['free', 'paid', 'pilot', 'agency'] as const) {
      const u = await app().user({ plan });
      const res = await app().request('GET', '/v1/account/limits', { key: u.key });
      expect(res.status).toBe(200);
      const d = res.body.data;
      expect(d.account_id).toBe(u.accountId);
      expect(Object.keys(d.limits).sort()).toEqual([...LIMIT_KEYS].sort());
      for (const [k, v] of Object.entries(d.limits)) {
        if (v !== null) expect(Number.isInteger(v) && (v as number) >= 0, `${plan} ${k}=${v}`).toBe(true);
      }
      expect(Number.isInteger(d.limits.max_email_aliases_per_mailbox)).toBe(true);

      const m = d.usage.mailbox_creations;
      expect(Object.keys(m).sort()).toEqual(['monthly_limit', 'remaining', 'resets_at', 'used']);
      expect(m.monthly_limit).toBe(d.limits.max_mailbox_creations_per_month);
      expect(m.used).toBe(0);
      expect(m.remaining).toBe(m.monthly_limit === null ? null : m.monthly_limit - m.used);
      expect(m.resets_at).toMatch(ISO_MS);
      const resets = new Date(m.resets_at);
      expect(resets.getUTCDate()).toBe(1);
      expect(resets.getUTCHours()).toBe(0);
      expect(resets.getTime()).toBeGreaterThan(Date.now());
      expect(resets.getTime() - Date.now()).toBeLessThanOrEqual(31 * 86_400_000);
    }
  });

  it('a client account reports its own id and the agency plan\'s limits', async () => {
    const owner = await agency(app());
    const created = await app().request('POST', '/v1/accounts', { key: owner.key, body: { name: 'Lim' } });
    const client = created.body.data.account.id;
    const own = (await app().request('GET', '/v1/account/limits', { key: owner.key })).body.data;
    const res = await app().request('GET', '/v1/account/limits', { key: owner.key, query: { account_id: client } });
    expect(res.body.data.account_id).toBe(client);
    expect(res.body.data.limits).toEqual(own.limits);
  });
});

describeEachDatabase('GET /api/v1/agent_auth/capabilities', (app) => {
  it('works without a key (and ignores a bad one), and creates nothing', async () => {
    const before = await dbOf(app()).selectFrom('accounts').select('id').execute();
    for (const key of [undefined, 'cubby_nope']) {
      const res = await app().request('GET', '/api/v1/agent_auth/capabilities', { key });
      expect(res.status).toBe(200);
      expect(res.headers.get('x-service-client-version')).toBe(CLIENT_VERSION);
      expect(Array.isArray(res.body.data.flows)).toBe(true);
      expect(res.body.data.flows.some((f: any) => f.id === 'api_key' && f.available === true)).toBe(true);
      expect(res.body.data.creates_accounts).toBe(false);
    }
    expect(await dbOf(app()).selectFrom('accounts').select('id').execute()).toHaveLength(before.length);
  });
});
