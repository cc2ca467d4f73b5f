import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestApp, type TestApp } from './harness.ts';
import { KeyRateLimiter } from '../src/http/rate-limit.ts';
import { PLANS } from '../src/accounts/plans.ts';
import { AppError } from '../src/errors.ts';

let app: TestApp;
// The clock stands still one second into a minute, so the whole burst falls in one window.
const frozen = new Date(Math.floor(Date.now() / 60_000) * 60_000 + 1000);
beforeAll(async () => {
  app = await startTestApp('sqlite', {}, { now: () => frozen });
});
afterAll(() => app.stop());

it("a key over its plan's requests per minute gets 429 with Retry-After on both surfaces; other keys are unaffected", async () => {
  const u = await app.user({ plan: 'free' });
  const perMinute = PLANS.free.api_rate_limit_requests_per_minute!;
  const statuses: number[] = [];
  for (let sent = 0; sent < perMinute; sent += 50) {
    const batch = await Promise.all(Array.from({ length: Math.min(50, perMinute - sent) }, () => app.request('GET', '/v1/account/limits', { key: u.key })));
    statuses.push(...batch.map((r) => r.status));
  }
  expect(statuses.every((x) => x === 200)).toBe(true);
  const over = await app.request('GET', '/api/v1/status', { key: u.key });
  expect(over.status).toBe(429);
  expect(over.body.error.code).toBe('RATE_LIMITED');
  expect(over.body.error.details.retry_after).toBe(59);
  expect(over.headers.get('retry-after')).toBe('59');
  const r = await app.request('GET', '/v1/status', { key: u.key });
  expect(r.status).toBe(429);
  const other = await app.user({ plan: 'free' });
  expect((await app.request('GET', '/v1/status', { key: other.key })).status).toBe(200);
});

it('the limiter counts per key in one-minute windows and resets at the next minute', () => {
  let t = Date.parse('2026-11-23T10:00:10.000Z');
  const limiter = new KeyRateLimiter(() => new Date(t));
  for (let i = 0; i < 3; i++) limiter.hit('k', 3);
  let thrown: unknown;
  try {
    limiter.hit('k', 3);
  } catch (err) {
    thrown = err;
  }
  expect(thrown).toBeInstanceOf(AppError);
  expect((thrown as AppError).details.retry_after).toBe(50);
  limiter.hit('other', 3);
  t += 50_000;
  limiter.hit('k', 3);
  limiter.hit('k', null);
});
