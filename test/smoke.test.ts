import { expect, it } from 'vitest';
import { describeEachDatabase } from './harness.ts';

describeEachDatabase('smoke', (app) => {
  it('answers GET /v1/status for a new key', async () => {
    const u = await app().user();
    const res = await app().request('GET', '/v1/status', { key: u.key });
    expect(res.status).toBe(200);
    expect(res.body.success).toBe(true);
    expect(res.body.data.account.id).toBe(u.accountId);
  });
});
