import { AppError } from '../errors.ts';

/**
 * Requests per API key per minute, counted in fixed one-minute windows. The count lives in
 * this process: with several API nodes each enforces the plan's rate on its own share of
 * traffic, which bounds abuse without a database write per request.
 */
export class KeyRateLimiter {
  private windows = new Map<string, { start: number; count: number }>();

  constructor(private readonly now: () => Date) {}

  /** Counts one request; throws RATE_LIMITED with retry_after when the key is over its rate. */
  hit(keyId: string, perMinute: number | null): void {
    if (perMinute === null) return;
    const t = this.now().getTime();
    const start = t - (t % 60_000);
    let w = this.windows.get(keyId);
    if (!w || w.start !== start) {
      if (this.windows.size > 100_000) this.prune(start);
      w = { start, count: 0 };
      this.windows.set(keyId, w);
    }
    w.count++;
    if (w.count > perMinute) {
      const retryAfter = Math.max(1, Math.ceil((start + 60_000 - t) / 1000));
      throw new AppError('RATE_LIMITED', `This key may make ${perMinute} requests a minute.`, { retry_after: retryAfter, limit: 'api_rate_limit_requests_per_minute', max: perMinute });
    }
  }

  private prune(current: number) {
    for (const [k, w] of this.windows) if (w.start !== current) this.windows.delete(k);
  }
}
