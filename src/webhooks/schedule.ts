// When a failed delivery is tried again. Delays grow from seconds to hours with ±20 % jitter (so a
// receiver that comes back is not hit by every queued event at once) over a 24-hour window; the
// last try lands at the end of the window, after which the delivery is recorded as given up. A
// receiver's Retry-After (1 to 3600 s) replaces the scheduled delay for that retry.

export interface RetryPolicy {
  /** Delay before retry n (n = failures so far, 1-based; the last entry repeats). */
  delaysMs: number[];
  /** No attempt starts later than this after the event. */
  windowMs: number;
  /** A ceiling even when Retry-After keeps answers short. */
  maxAttempts: number;
  /** Random factor source in [0, 1). */
  random: () => number;
}

const S = 1000;
const M = 60 * S;
const H = 60 * M;

export const DEFAULT_RETRY_POLICY: RetryPolicy = {
  delaysMs: [5 * S, 30 * S, 2 * M, 10 * M, 30 * M, 1 * H, 2 * H, 4 * H, 6 * H, 8 * H],
  windowMs: 24 * H,
  maxAttempts: 30,
  random: Math.random,
};

/** Retry-After as seconds (delta or HTTP date), clamped to 1..3600; null when absent or unreadable. */
export function retryAfterSeconds(header: string | string[] | undefined, now: Date): number | null {
  const v = Array.isArray(header) ? header[0] : header;
  if (!v) return null;
  let seconds: number;
  if (/^\s*\d+\s*$/.test(v)) seconds = Number(v);
  else {
    const at = Date.parse(v);
    if (Number.isNaN(at)) return null;
    seconds = Math.ceil((at - now.getTime()) / 1000);
  }
  return Math.min(3600, Math.max(1, seconds));
}

/**
 * The time of the next attempt after `attempts` failed ones, or null to give up.
 * `createdAt` starts the window.
 */
export function nextAttemptAt(policy: RetryPolicy, attempts: number, createdAt: Date, now: Date, retryAfterS: number | null): Date | null {
  const deadline = createdAt.getTime() + policy.windowMs;
  if (attempts >= policy.maxAttempts || now.getTime() >= deadline) return null;
  let delay: number;
  if (retryAfterS !== null) delay = retryAfterS * 1000;
  else {
    const base = policy.delaysMs[Math.min(attempts, policy.delaysMs.length) - 1] ?? policy.delaysMs.at(-1)!;
    delay = Math.round(base * (0.8 + 0.4 * policy.random()));
  }
  return new Date(Math.min(now.getTime() + delay, deadline));
}
