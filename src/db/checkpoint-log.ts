import type { Logger } from '../logger.ts';

const EVERY_MS = 60_000;

/**
 * A failing WAL checkpoint repeats on every pass (once a second) until its cause is gone, a full
 * disk say, and meanwhile the WAL grows. The first failure is logged at once, then at most one line
 * a minute with the number of failures since the last line: seen, without filling the log.
 */
export function checkpointErrorLog(log: Pick<Logger, 'error'> | undefined, now: () => number = () => performance.now()): ((message: string) => void) | undefined {
  if (!log) return undefined;
  let lastAt = -Infinity;
  let failures = 0;
  return (message) => {
    failures++;
    if (now() - lastAt < EVERY_MS) return;
    log.error({ err_message: message, failures }, 'SQLite WAL checkpoint failed; the WAL grows until one succeeds');
    lastAt = now();
    failures = 0;
  };
}
