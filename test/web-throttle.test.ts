import { randomBytes } from 'node:crypto';
import { expect, it } from 'vitest';
import { describeEachDatabase } from './harness.ts';
import { WebClient } from './web-client.ts';

// Its own app per database. Every client here connects from the same address, so the
// per-IP counters are shared by the tests below, which run in order.
const IP = '127.0.0.9';

const email = () => `throttle-${randomBytes(5).toString('hex')}@example.com`;

function expectRetryAfter(res: { status: number; headers: Headers; text: string }) {
  expect(res.status).toBe(429);
  const after = Number(res.headers.get('retry-after'));
  expect(after).toBeGreaterThan(0);
  expect(after).toBeLessThanOrEqual(15 * 60);
  expect(res.text).toContain('Too many');
}

describeEachDatabase('web sign-in throttling', (app) => {
  it('after 5 failed sign-ins for one email answers 429 with Retry-After, even for the right password', async () => {
    const addr = email();
    await new WebClient(app().base, IP).signUp({ email: addr });
    const c = new WebClient(app().base, IP);
    for (let i = 0; i < 5; i++) expect((await c.signIn(addr, `wrong password ${i}`)).status).toBe(422);
    expectRetryAfter(await c.signIn(addr, 'wrong password 6'));
    expectRetryAfter(await c.signIn(addr.toUpperCase(), 'a long test password'));
    expect(c.cookies.has('cubby_session')).toBe(false);
    // Another address from the same client is not blocked yet.
    expect((await c.signIn(email(), 'whatever password')).status).toBe(422);
  });

  it('a successful sign-in clears the per-email count', async () => {
    const addr = email();
    await new WebClient(app().base, IP).signUp({ email: addr });
    const c = new WebClient(app().base, IP);
    for (let i = 0; i < 4; i++) expect((await c.signIn(addr, `wrong password ${i}`)).status).toBe(422);
    expect((await c.signIn(addr, 'a long test password')).status).toBe(303);
    const d = new WebClient(app().base, IP);
    expect((await d.signIn(addr, 'wrong password again')).status).toBe(422);
  });

  it('after 20 failures from one client answers 429 for any email', async () => {
    const c = new WebClient(app().base, IP);
    // 5 + 1 + 4 + 1 failures so far in this suite.
    let blocked = false;
    for (let i = 0; i < 20 && !blocked; i++) {
      const res = await c.signIn(email(), 'some wrong password');
      blocked = res.status === 429;
      if (!blocked) expect(res.status).toBe(422);
    }
    expect(blocked).toBe(true);
    const rows = await app().started.deps.db.selectFrom('sign_in_attempts').select('id').where('succeeded', '=', 0).where('email', '<>', 'signup:').execute();
    expect(rows.length).toBe(20);
    expectRetryAfter(await c.signIn(email(), 'some wrong password'));
  });

  it('limits sign-up attempts per client', async () => {
    const c = new WebClient(app().base, IP);
    // Two sign-ups so far in this suite; weak passwords count too and cost no hashing.
    let blocked: Awaited<ReturnType<WebClient['signUp']>> | undefined;
    for (let i = 0; i < 10 && !blocked; i++) {
      const res = await c.signUp({ email: email(), password: 'weak' });
      if (res.status === 429) blocked = res;
      else expect(res.status).toBe(422);
    }
    expect(blocked).toBeDefined();
    expectRetryAfter(blocked!);
    expectRetryAfter(await c.signUp({ email: email() }));
  });
});
