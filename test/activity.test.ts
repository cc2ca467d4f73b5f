import { expect, it } from 'vitest';
import { describeEachDatabase } from './harness.ts';
import { agency, dbOf, keyRow } from './factories.ts';
import { recordActivity, sweepActivity } from '../src/activity/activity.service.ts';
import { PLANS } from '../src/accounts/plans.ts';
import { iso } from '../src/time.ts';

// Activity history: who did what, through which key and agent, why, in which request;
// kept for the plan's audit retention.

describeEachDatabase('activity', (app) => {
  it('creating a client account records the actor, key, agent, action, target, reason and request id', async () => {
    const owner = await agency(app());
    const keyId = (await keyRow(app(), owner.key)).id;
    const res = await app().request('POST', '/v1/accounts', {
      key: owner.key,
      body: { name: 'Audited', reason: 'new customer onboarding' },
      headers: { 'x-service-agent': 'claude-code', 'x-service-agent-run-id': 'run-7', 'user-agent': 'cubby-cli/1.2' },
    });
    expect(res.status).toBe(201);
    const clientId = res.body.data.account.id;
    const requestId = res.headers.get('x-request-id');

    const rows = await dbOf(app())
      .selectFrom('activity')
      .selectAll()
      .where('request_id', '=', requestId)
      .orderBy('id')
      .execute();
    expect(rows.map((r) => [r.account_id, r.action])).toEqual([
      [owner.accountId, 'account.create_client'],
      [clientId, 'account.create'],
    ]);
    for (const r of rows) {
      expect(r).toMatchObject({ user_id: owner.userId, api_key_id: keyId, target_type: 'account', target_id: clientId, reason: 'new customer onboarding', request_id: requestId });
      expect(r.id).toMatch(/^act_[A-Za-z0-9]+$/);
      expect(JSON.parse(r.agent!)).toMatchObject({ agent: 'claude-code', run_id: 'run-7', user_agent: 'cubby-cli/1.2' });
      expect(Math.abs(Date.parse(r.created_at) - Date.now())).toBeLessThan(60_000);
    }
  });

  it('a refused change records nothing', async () => {
    const owner = await agency(app());
    const before = await dbOf(app()).selectFrom('activity').select('id').where('account_id', '=', owner.accountId).execute();
    const res = await app().request('POST', '/v1/accounts', { key: owner.key, body: { name: 'x', client_name: 'c'.repeat(101) } });
    expect(res.status).toBe(422);
    const after = await dbOf(app()).selectFrom('activity').select('id').where('account_id', '=', owner.accountId).execute();
    expect(after).toHaveLength(before.length);
  });

  it('a blank reason is stored as null', async () => {
    const owner = await agency(app());
    const res = await app().request('POST', '/v1/accounts', { key: owner.key, body: { name: 'x', reason: '   ' } });
    expect(res.status).toBe(201);
    const rows = await dbOf(app()).selectFrom('activity').select('reason').where('request_id', '=', res.headers.get('x-request-id')).execute();
    expect(rows.length).toBeGreaterThan(0);
    for (const r of rows) expect(r.reason).toBeNull();
  });

  it('sweepActivity removes rows older than the plan\'s audit retention and keeps newer ones', async () => {
    const free = await app().user({ plan: 'free' });
    const paid = await app().user({ plan: 'paid' });
    const now = new Date();
    const day = 86_400_000;
    const db = dbOf(app());
    const actor = { userId: null, apiKeyId: null, agent: null, requestId: null };
    const add = async (accountId: string, ageDays: number, label: string) =>
      recordActivity(db, actor, new Date(now.getTime() - ageDays * day), { accountId, action: 'test.sweep', targetType: 'test', targetId: label });

    const freeDays = PLANS.free.audit_retention_days!;
    const paidDays = PLANS.paid.audit_retention_days!;
    expect(freeDays).toBeLessThan(paidDays);
    await add(free.accountId, freeDays + 1, 'free-old');
    await add(free.accountId, freeDays - 1, 'free-new');
    await add(paid.accountId, freeDays + 1, 'paid-mid');
    await add(paid.accountId, paidDays + 1, 'paid-old');
    await add(paid.accountId, paidDays - 1, 'paid-new');

    const removed = await sweepActivity(db, now);
    expect(removed).toBeGreaterThanOrEqual(2);
    const left = await db
      .selectFrom('activity')
      .select('target_id')
      .where('action', '=', 'test.sweep')
      .where('account_id', 'in', [free.accountId, paid.accountId])
      .execute();
    expect(left.map((r) => r.target_id).sort()).toEqual(['free-new', 'paid-mid', 'paid-new']);
    // the rows from registration are recent and stay
    const registration = await db.selectFrom('activity').select('id').where('account_id', '=', free.accountId).where('action', '=', 'account.create').execute();
    expect(registration).toHaveLength(1);
    // a second sweep finds nothing more of these
    await sweepActivity(db, now);
    expect(
      await db.selectFrom('activity').select('target_id').where('action', '=', 'test.sweep').where('account_id', 'in', [free.accountId, paid.accountId]).execute(),
    ).toHaveLength(3);
  });

  it('client accounts follow the agency plan\'s retention', async () => {
    const owner = await agency(app());
    const res = await app().request('POST', '/v1/accounts', { key: owner.key, body: { name: 'Ret' } });
    const client = res.body.data.account.id;
    const db = dbOf(app());
    const days = PLANS.agency.audit_retention_days!;
    const old = iso(Date.now() - (days + 2) * 86_400_000);
    const kept = iso(Date.now() - (days - 2) * 86_400_000);
    for (const [created_at, target_id] of [[old, 'old'], [kept, 'kept']]) {
      await db
        .insertInto('activity')
        .values({ id: `act_${target_id}${Date.now()}${Math.random().toString(36).slice(2, 8)}`, account_id: client, user_id: null, api_key_id: null, agent: null, action: 'test.client', target_type: 'test', target_id, reason: null, request_id: null, created_at })
        .execute();
    }
    await sweepActivity(db, new Date());
    const left = await db.selectFrom('activity').select('target_id').where('account_id', '=', client).where('action', '=', 'test.client').execute();
    expect(left.map((r) => r.target_id)).toEqual(['kept']);
  });
});
