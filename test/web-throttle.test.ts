import { randomBytes } from 'node:crypto';
import { expect, it } from 'vitest';
import { describeEachDatabase } from './harness.ts';
import { WebClient } from './web-client.ts';
import { emailDelayMs } from '../src/web/throttle.ts';

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

  // Regression: the limit was checked before the attempt was recorded, so guesses sent at once
  // all passed the check while the first passwords were still being hashed.
  it('parallel wrong passwords for one email: at most 5 are checked, the rest answer 429', async () => {
    const addr = email();
    await new WebClient(app().base, '127.0.0.10').signUp({ email: addr });
    const c = new WebClient(app().base, '127.0.0.10');
    const form = await c.get('/users/sign_in');
    const results = await Promise.all(
      Array.from({ length: 15 }, (_, i) => c.submit(form, '/users/sign_in', { email: addr, password: `parallel wrong password ${i}` })),
    );
    // Attempts racing for the last places may all be refused (never all admitted): at most 5 checked.
    const checked = results.filter((r) => r.status === 422).length;
    expect(checked).toBeGreaterThan(0);
    expect(checked).toBeLessThanOrEqual(5);
    expect(results.filter((r) => r.status === 429)).toHaveLength(15 - checked);
    // Refused guesses leave no rows, so the window ends on time.
    const rows = await app().started.deps.db.selectFrom('sign_in_attempts').select('id').where('email', '=', addr).execute();
    expect(rows).toHaveLength(checked);
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

  it('parallel sign-ups from one client: at most 10 are attempted', async () => {
    const c = new WebClient(app().base, '127.0.0.11');
    const form = await c.get('/users/sign_up');
    const results = await Promise.all(Array.from({ length: 14 }, () => c.submit(form, '/users/sign_up', { email: email(), name: 'Parallel', password: 'weak' })));
    const attempted = results.filter((r) => r.status === 422).length;
    expect(attempted).toBeGreaterThan(0);
    expect(attempted).toBeLessThanOrEqual(10);
    expect(results.filter((r) => r.status === 429)).toHaveLength(14 - attempted);
  });

  // Regression: five wrong passwords from one network used to lock the owner out from every
  // network for 15 minutes. Failures for an email from other clients now only slow it down.
  it('wrong passwords from other addresses never refuse the right password from a new one', async () => {
    const addr = email();
    await new WebClient(app().base, '127.0.0.30').signUp({ email: addr });
    const attacker = new WebClient(app().base, '127.0.0.31');
    for (let i = 0; i < 5; i++) expect((await attacker.signIn(addr, `guess number ${i}`)).status).toBe(422);
    expectRetryAfter(await attacker.signIn(addr, 'a long test password'));
    const second = new WebClient(app().base, '127.0.0.32');
    for (let i = 0; i < 2; i++) expect((await second.signIn(addr, `other guess ${i}`)).status).toBe(422);
    // Seven failures for the email: the next attempt from anywhere is held before its check.
    const db = app().started.deps.db;
    expect(await emailDelayMs(db, addr, new Date())).toBeGreaterThan(0);

    const owner = new WebClient(app().base, '127.0.0.33');
    const res = await owner.signIn(addr, 'a long test password');
    expect(res.status).toBe(303);
    expect(owner.cookies.has('cubby_session')).toBe(true);
    // The owner's success ends the slowdown; the attacker's own address stays refused.
    expect(await emailDelayMs(db, addr, new Date())).toBe(0);
    expectRetryAfter(await attacker.signIn(addr, 'a long test password'));
  });
});
