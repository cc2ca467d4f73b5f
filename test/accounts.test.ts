import { expect, it } from 'vitest';
import { describeEachDatabase } from './harness.ts';
import { addMembership, agency, createClient, dbOf, expectError, member } from './factories.ts';
import { setAccountStatus, setAccountSuspended } from '../src/accounts/accounts.service.ts';
import { AGENCY_MAX_ACCOUNTS } from '../src/accounts/plans.ts';

// account_id selection, client accounts of agencies, and account states.

const MISSING_ACCOUNT = 'acct_01ARZ3NDEKTSV4RRFFQ69G5FAV';

describeEachDatabase('account selection', (app) => {
  it('an unrelated, malformed or missing account id is 403 and never falls back to the default', async () => {
    const a = await app().user();
    const b = await app().user();
    for (const account_id of [b.accountId, 'acct_', 'nonsense', `${a.accountId}x`, MISSING_ACCOUNT, ' ', a.accountId.toLowerCase()]) {
      for (const path of ['/v1/status', '/v1/account/limits', '/api/v1/status']) {
        const res = await app().request('GET', path, { key: a.key, query: { account_id } });
        expectError(res, path.startsWith('/api') ? 'A' : 'R', 403, 'ACCOUNT_ACCESS_DENIED');
      }
      expectError(await app().request('GET', `/v1/accounts/${encodeURIComponent(account_id)}`, { key: a.key }), 'R', 403, 'ACCOUNT_ACCESS_DENIED');
    }
    // the default still works, explicitly and implicitly
    expect((await app().request('GET', '/v1/status', { key: a.key, query: { account_id: a.accountId } })).body.data.account.id).toBe(a.accountId);
    expect((await app().request('GET', `/v1/accounts/${a.accountId}`, { key: a.key })).body.data.account.id).toBe(a.accountId);
  });

  it('an empty account_id is not the default account', async () => {
    const a = await app().user();
    const res = await app().request('POST', '/v1/accounts', { key: a.key, body: { name: 'x', account_id: '' } });
    expect([403, 422]).toContain(res.status);
  });

  it('the agency owner key reaches the client accounts it created', async () => {
    const owner = await agency(app());
    const res = await app().request('POST', '/v1/accounts', { key: owner.key, body: { name: 'Acme', client_name: 'Acme Ltd' } });
    expect(res.status, res.text).toBe(201);
    expect(res.body.success).toBe(true);
    const account = res.body.data.account;
    expect(account).toMatchObject({
      name: 'Acme',
      account_kind: 'client',
      kind: 'client',
      client_name: 'Acme Ltd',
      agency_account: { id: owner.accountId, name: "Test Person's account" },
      website_publishing_enabled: false,
      status: 'active',
      permissions: { scope: 'mailbox_admin', mailbox_access: 'all', can_create_mailboxes: true },
    });
    expect(account.id).toMatch(/^acct_[A-Za-z0-9]+$/);

    const read = await app().request('GET', `/v1/accounts/${account.id}`, { key: owner.key });
    expect(read.status).toBe(200);
    expect(read.body.data.account).toEqual(account);

    const status = await app().request('GET', '/v1/status', { key: owner.key, query: { account_id: account.id } });
    expect(status.status).toBe(200);
    expect(status.body.data.account.id).toBe(account.id);
    expect(status.body.data.account.agency_account).toEqual({ id: owner.accountId, name: "Test Person's account" });
    // the credential's default did not move
    expect(status.body.data.default_account_id).toBe(owner.accountId);
    const plain = await app().request('GET', '/v1/status', { key: owner.key });
    expect(plain.body.data.account.id).toBe(owner.accountId);
    expect(plain.body.data.accounts.map((x: any) => x.id).sort()).toEqual([owner.accountId, account.id].sort());

    const limits = await app().request('GET', '/v1/account/limits', { key: owner.key, query: { account_id: account.id } });
    expect(limits.body.data.account_id).toBe(account.id);
  });

  it('surface A creates client accounts too', async () => {
    const owner = await agency(app());
    const res = await app().request('POST', '/api/v1/accounts', { key: owner.key, body: { name: 'Beta', client_name: null } });
    expect(res.status, res.text).toBe(201);
    expect(Object.keys(res.body)).toEqual(['data']);
    expect(res.body.data.account).toMatchObject({ name: 'Beta', account_kind: 'client', client_name: null });
    const st = await app().request('GET', '/api/v1/status', { key: owner.key, query: { account_id: res.body.data.account.id } });
    expect(st.status).toBe(200);
    expect(st.body.data.account.id).toBe(res.body.data.account.id);
  });

  it('a client-account key cannot select its parent agency, a sibling or an unrelated account', async () => {
    const owner = await agency(app());
    const c1 = await createClient(app(), owner, { name: 'One' });
    const c2 = await createClient(app(), owner, { name: 'Two' });
    const stranger = await app().user();
    // A person of client one, and the agency owner who also joined client one, with keys defaulting to it.
    const clientPerson = await member(app(), c1, 'owner');
    await addMembership(app(), owner, c1, 'owner');
    const ownerInClient = { ...owner, accountId: c1, key: await app().key({ ...owner, accountId: c1 }) };
    for (const clientUser of [clientPerson, ownerInClient]) {
      const own = await app().request('GET', '/v1/status', { key: clientUser.key });
      expect(own.status).toBe(200);
      expect(own.body.data.account.id).toBe(c1);
      // the parent is not granted to this credential, so it is not disclosed
      expect(own.body.data.account.agency_account).toBeNull();
      expect(own.body.data.accounts.map((x: any) => x.id)).toEqual([c1]);
      for (const account_id of [owner.accountId, c2, stranger.accountId]) {
        expectError(await app().request('GET', '/v1/status', { key: clientUser.key, query: { account_id } }), 'R', 403, 'ACCOUNT_ACCESS_DENIED');
        expectError(await app().request('GET', `/v1/accounts/${account_id}`, { key: clientUser.key }), 'R', 403, 'ACCOUNT_ACCESS_DENIED');
        expectError(
          await app().request('POST', '/v1/accounts', { key: clientUser.key, body: { name: 'x', account_id } }),
          'R',
          403,
          'ACCOUNT_ACCESS_DENIED',
        );
      }
      const list = await app().request('GET', '/v1/accounts', { key: clientUser.key });
      expect(list.body.data.accounts.map((x: any) => x.id)).toEqual([c1]);
    }
  });

  it('an agency owner cannot reach another agency\'s clients', async () => {
    const a = await agency(app());
    const b = await agency(app());
    const bc = await createClient(app(), b);
    expectError(await app().request('GET', `/v1/accounts/${bc}`, { key: a.key }), 'R', 403, 'ACCOUNT_ACCESS_DENIED');
    expectError(await app().request('POST', '/v1/accounts', { key: a.key, body: { name: 'x', account_id: b.accountId } }), 'R', 403, 'ACCOUNT_ACCESS_DENIED');
  });

  it('a selected-mailbox key stays in its own account, even for an agency owner', async () => {
    const owner = await agency(app());
    const client = await createClient(app(), owner);
    const key = await app().key(owner, { mailboxAccess: 'selected', mailboxPermissions: { bkt_x: 'read' } });
    const st = await app().request('GET', '/v1/status', { key });
    expect(st.status).toBe(200);
    expect(st.body.data.accounts.map((x: any) => x.id)).toEqual([owner.accountId]);
    expect(st.body.data.account.can_create_client_account).toBe(false);
    expect(st.body.data.account.permissions).toEqual({ scope: 'mailbox_admin', mailbox_access: 'selected', can_create_mailboxes: false });
    const connection = st.body.data.connection;
    expect(connection).toMatchObject({ mailbox_access: 'selected', mailbox_permissions: { bkt_x: 'read' } });
    // bkt_x does not exist: it is granted, but listed as denied rather than visible
    expect([...connection.mailbox_ids, ...connection.denied_mailbox_ids]).toEqual(['bkt_x']);
    expectError(await app().request('GET', '/v1/status', { key, query: { account_id: client } }), 'R', 403, 'ACCOUNT_ACCESS_DENIED');
    expectError(await app().request('GET', `/v1/accounts/${client}`, { key }), 'R', 403, 'ACCOUNT_ACCESS_DENIED');
    expectError(await app().request('POST', '/v1/accounts', { key, body: { name: 'x' } }), 'R', 403, 'AGENCY_OWNER_REQUIRED');
  });

  it('GET /v1/accounts refuses an account_id the credential cannot use', async () => {
    const a = await app().user();
    const b = await app().user();
    expectError(await app().request('GET', '/v1/accounts', { key: a.key, query: { account_id: b.accountId } }), 'R', 403, 'ACCOUNT_ACCESS_DENIED');
    const ok = await app().request('GET', '/v1/accounts', { key: a.key, query: { account_id: a.accountId } });
    expect(ok.status).toBe(200);
  });
});

describeEachDatabase('creating client accounts', (app) => {
  it('only an agency owner credential may create client accounts', async () => {
    const owner = await agency(app());
    const standard = await app().user({ plan: 'paid' });
    const collaborator = await member(app(), owner.accountId, 'collaborator');
    const administrator = await member(app(), owner.accountId, 'administrator');
    const client = await createClient(app(), owner);
    const before = await dbOf(app()).selectFrom('accounts').select('id').execute();
    for (const [key, account_id] of [
      [standard.key, undefined],
      [collaborator.key, undefined],
      [administrator.key, undefined],
      [owner.key, client],
    ] as const) {
      for (const path of ['/v1/accounts', '/api/v1/accounts']) {
        const res = await app().request('POST', path, { key, body: { name: 'Nope', account_id } });
        expectError(res, path.startsWith('/api') ? 'A' : 'R', 403, 'AGENCY_OWNER_REQUIRED');
      }
    }
    // a read-only-scoped key of the owner is not an owner credential for writes
    const readKey = await app().key(owner, { scope: 'mailbox_read' });
    const res = await app().request('POST', '/v1/accounts', { key: readKey, body: { name: 'Nope' } });
    expect(res.status).toBe(403);
    expect(['AGENCY_OWNER_REQUIRED', 'PERMISSION_DENIED']).toContain(res.body.error.code);
    expect(await dbOf(app()).selectFrom('accounts').select('id').execute()).toHaveLength(before.length);
    // collaborators do not see the clients either
    const list = await app().request('GET', '/v1/accounts', { key: collaborator.key });
    expect(list.body.data.accounts.map((x: any) => x.id)).toEqual([owner.accountId]);
    expect((await app().request('GET', '/v1/status', { key: collaborator.key })).body.data.account.can_create_client_account).toBe(false);
    expect((await app().request('GET', '/v1/status', { key: owner.key })).body.data.account.can_create_client_account).toBe(true);
  });

  it(`an agency holds at most ${AGENCY_MAX_ACCOUNTS} accounts in total`, async () => {
    const owner = await agency(app());
    for (let i = 1; i < AGENCY_MAX_ACCOUNTS; i++) await createClient(app(), owner, { name: `Client ${i}` });
    for (const path of ['/v1/accounts', '/api/v1/accounts']) {
      const res = await app().request('POST', path, { key: owner.key, body: { name: 'One too many' } });
      expectError(res, path.startsWith('/api') ? 'A' : 'R', 403, 'ACCOUNT_CAPACITY_REACHED');
    }
    const n = await dbOf(app()).selectFrom('accounts').select('id').where('parent_account_id', '=', owner.accountId).execute();
    expect(n).toHaveLength(AGENCY_MAX_ACCOUNTS - 1);
  });

  it('concurrent creations never exceed the agency capacity', async () => {
    const owner = await agency(app());
    for (let i = 1; i < AGENCY_MAX_ACCOUNTS - 2; i++) await createClient(app(), owner, { name: `Client ${i}` });
    const results = await Promise.all(
      Array.from({ length: 6 }, (_, i) => app().request('POST', '/v1/accounts', { key: owner.key, body: { name: `Race ${i}` } })),
    );
    const statuses = results.map((r) => r.status).sort();
    expect(statuses).toEqual([201, 201, 403, 403, 403, 403]);
    for (const r of results) if (r.status === 403) expect(r.body.error.code).toBe('ACCOUNT_CAPACITY_REACHED');
    const n = await dbOf(app()).selectFrom('accounts').select('id').where('parent_account_id', '=', owner.accountId).execute();
    expect(n).toHaveLength(AGENCY_MAX_ACCOUNTS - 1);
  });

  it('validates name and client_name and changes nothing when they are wrong', async () => {
    const owner = await agency(app());
    const cases: [Record<string, unknown>, string][] = [
      [{ name: 'x', client_name: 'c'.repeat(101) }, 'client_name'],
      [{ name: '' }, 'name'],
      [{ name: '   ' }, 'name'],
      [{ name: 'n'.repeat(101) }, 'name'],
      [{}, 'name'],
      [{ name: 'x', client_name: 5 }, 'client_name'],
    ];
    for (const [body, field] of cases) {
      const res = await app().request('POST', '/v1/accounts', { key: owner.key, body });
      const err = expectError(res, 'R', 422, 'INVALID_ARGUMENT');
      expect(err.details.field, JSON.stringify(body)).toBe(field);
    }
    const ok = await app().request('POST', '/v1/accounts', { key: owner.key, body: { name: 'x', client_name: 'c'.repeat(100) } });
    expect(ok.status).toBe(201);
    expect(ok.body.data.account.client_name).toBe('c'.repeat(100));
    const n = await dbOf(app()).selectFrom('accounts').select('id').where('parent_account_id', '=', owner.accountId).execute();
    expect(n).toHaveLength(1);
  });

  it('lists the agency and its clients', async () => {
    const owner = await agency(app());
    const ids = [owner.accountId];
    for (let i = 0; i < 3; i++) ids.push(await createClient(app(), owner, { name: `C${i}` }));
    const res = await app().request('GET', '/v1/accounts', { key: owner.key });
    expect(res.status).toBe(200);
    expect(res.body.data.default_account_id).toBe(owner.accountId);
    expect(res.body.data.pagination).toEqual({ limit: 50, has_more: false, next_cursor: null, offset: 0, count: 4, total: 4, next_offset: null });
    const accounts = res.body.data.accounts;
    expect(accounts.map((a: any) => a.id).sort()).toEqual(ids.sort());
    for (const a of accounts) {
      expect(Object.keys(a).sort()).toEqual(
        ['id', 'name', 'account_kind', 'kind', 'client_name', 'agency_account', 'website_publishing_enabled', 'region', 'status', 'permissions'].sort(),
      );
      expect(a.kind).toBe(a.account_kind);
    }
  });
});

describeEachDatabase('account states', (app) => {
  it('a read-only agency refuses writes with 423 and read_only: true; reads still work', async () => {
    const owner = await agency(app());
    await setAccountStatus(dbOf(app()), owner.accountId, 'read_only', 'agency entitlement ended', new Date());
    const r = await app().request('POST', '/v1/accounts', { key: owner.key, body: { name: 'x' } });
    const err = expectError(r, 'R', 423, 'ACCOUNT_READ_ONLY');
    expect(err.read_only).toBe(true);
    const a = await app().request('POST', '/api/v1/accounts', { key: owner.key, body: { name: 'x' } });
    expect(expectError(a, 'A', 423, 'ACCOUNT_READ_ONLY').read_only).toBe(true);
    expect(await dbOf(app()).selectFrom('accounts').select('id').where('parent_account_id', '=', owner.accountId).execute()).toHaveLength(0);

    const st = await app().request('GET', '/v1/status', { key: owner.key });
    expect(st.status).toBe(200);
    expect(st.body.data.account).toMatchObject({
      status: 'read_only',
      previous_status: 'active',
      status_reason: 'agency entitlement ended',
      restriction: null,
      permissions: { can_create_mailboxes: false },
    });
    expect(st.body.data.account.status_updated_at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    expect((await app().request('GET', '/v1/accounts', { key: owner.key })).status).toBe(200);
    expect((await app().request('GET', '/v1/account/limits', { key: owner.key })).status).toBe(200);
    expect((await app().request('GET', '/api/v1/status', { key: owner.key })).status).toBe(200);

    await setAccountStatus(dbOf(app()), owner.accountId, 'active', null, new Date());
    expect((await app().request('POST', '/v1/accounts', { key: owner.key, body: { name: 'x' } })).status).toBe(201);
    const again = await app().request('GET', '/v1/status', { key: owner.key });
    expect(again.body.data.account).toMatchObject({ status: 'active', previous_status: 'read_only', status_reason: null });
  });

  it('a suspended account refuses writes with 403 ACCOUNT_SUSPENDED and shows the restriction', async () => {
    const owner = await agency(app());
    await setAccountSuspended(dbOf(app()), owner.accountId, true, new Date());
    expectError(await app().request('POST', '/v1/accounts', { key: owner.key, body: { name: 'x' } }), 'R', 403, 'ACCOUNT_SUSPENDED');
    expectError(await app().request('POST', '/api/v1/accounts', { key: owner.key, body: { name: 'x' } }), 'A', 403, 'ACCOUNT_SUSPENDED');
    const st = await app().request('GET', '/v1/status', { key: owner.key });
    expect(st.status).toBe(200);
    const restriction = st.body.data.account.restriction;
    expect(restriction).toEqual({
      code: 'ACCOUNT_SUSPENDED',
      message: expect.any(String),
      acceptable_use_policy_url: expect.stringMatching(/^https?:\/\//),
      support_email: expect.stringMatching(/^[^@\s]+@[^@\s]+$/),
    });
    expect(st.body.data.account.permissions.can_create_mailboxes).toBe(false);
    const a = await app().request('GET', '/api/v1/status', { key: owner.key });
    expect(a.body.data.account.restriction.code).toBe('ACCOUNT_SUSPENDED');

    await setAccountSuspended(dbOf(app()), owner.accountId, false, new Date());
    expect((await app().request('GET', '/v1/status', { key: owner.key })).body.data.account.restriction).toBeNull();
    expect((await app().request('POST', '/v1/accounts', { key: owner.key, body: { name: 'x' } })).status).toBe(201);
  });

  it('operator state changes on a missing account say so', async () => {
    await expect(setAccountStatus(dbOf(app()), MISSING_ACCOUNT, 'read_only', null, new Date())).rejects.toMatchObject({ code: 'ACCOUNT_NOT_FOUND' });
    await expect(setAccountSuspended(dbOf(app()), MISSING_ACCOUNT, true, new Date())).rejects.toMatchObject({ code: 'ACCOUNT_NOT_FOUND' });
  });
});
