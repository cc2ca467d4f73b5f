import { hash } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AppDeps } from '../../context.ts';
import { hitOf, type Hit } from './hit.ts';
import type { Site } from '../server/site-cache.ts';
import { clientOf } from '../server/access.ts';
import { ensureSalts, writeBuckets } from './store.ts';
import { openCountryLookup, type CountryLookup } from './geoip.ts';
import { bump, hourOf, dayOf, mergeInto, newBucket, type HourBucket } from './bucket.ts';

// Counting in memory, writing in batches: record() is synchronous and touches only Maps (the
// request has already been answered); flush() writes what was counted since the last flush in one
// transaction, on a timer and at shutdown. Memory is bounded: per hour and publication at most
// CAPS[dimension] distinct values (the rest count under OTHER), and past MAX_PENDING visitor
// hashes a flush starts at once; past twice that, views still count but visitors are not added.

const MAX_PENDING = 100_000;

export class SiteAnalytics {
  private buckets = new Map<string, HourBucket>();
  private pending = 0;
  private salts = new Map<string, string>();
  private timer: NodeJS.Timeout | null = null;
  private flushing: Promise<void> | null = null;
  private hourMs = -1;
  private hour = '';

  constructor(
    private readonly deps: AppDeps,
    private readonly countries: CountryLookup | null,
  ) {}

  async start(): Promise<void> {
    this.salts = await ensureSalts(this.deps.db, this.deps.now());
    this.timer = setInterval(() => void this.flush(), this.deps.config.siteAnalytics.flushMs);
    this.timer.unref();
  }

  /** The sites server's one call, when a response has finished (site: what the host served). */
  countResponse(req: IncomingMessage, res: ServerResponse, site: Site | null): void {
    if (!site) return;
    try {
      this.record(hitOf(req, res, site.publicationId, () => clientOf(this.deps, req)));
    } catch (err) {
      this.deps.log.error({ err }, 'site analytics could not count a response');
    }
  }

  /** Counts one finished response. Never throws, never waits. */
  record(hit: Hit): void {
    const now = this.deps.now().getTime();
    const hourMs = now - (now % 3_600_000);
    // The hour's ISO string is made once per hour, not per response.
    if (hourMs !== this.hourMs) {
      this.hourMs = hourMs;
      this.hour = hourOf(now);
    }
    const hour = this.hour;
    const key = `${hit.publicationId}\n${hour}`;
    let b = this.buckets.get(key);
    if (!b) this.buckets.set(key, (b = newBucket(hit.publicationId, hour)));
    b.requests++;
    b.bytes += hit.bytes;
    bump(b, 'status', String(hit.status));
    if (!hit.view) return;
    b.views++;
    bump(b, 'path', hit.path);
    if (hit.referrer) bump(b, 'referrer', hit.referrer);
    const country = this.countries?.(hit.ip.replace(/\/64$/, ''));
    if (country) bump(b, 'country', country);
    const salt = this.salts.get(dayOf(now));
    if (salt && this.pending < 2 * MAX_PENDING) {
      // Publication in the hash: one person on two sites is two unrelated visitors.
      // crypto.hash: one call, about half the cost of createHash for a short input.
      const visitor = hash('sha256', `${salt}\n${hit.publicationId}\n${hit.ip}\n${hit.userAgent}`, 'base64url').slice(0, 22);
      if (!b.visitors.has(visitor)) {
        b.visitors.add(visitor);
        if (++this.pending === MAX_PENDING) void this.flush();
      }
    }
  }

  /** Writes everything counted so far; concurrent calls share one write. */
  flush(): Promise<void> {
    if (this.flushing) return this.flushing.then(() => this.flush());
    const batch = [...this.buckets.values()];
    this.buckets = new Map();
    this.pending = 0;
    this.flushing = this.write(batch).finally(() => {
      this.flushing = null;
    });
    return this.flushing;
  }

  private async write(batch: HourBucket[]): Promise<void> {
    try {
      const now = this.deps.now();
      // Tomorrow's salt is made a day ahead, so a hit just after midnight already has one.
      if (!this.salts.has(dayOf(now.getTime() + 86_400_000))) this.salts = await ensureSalts(this.deps.db, now);
      if (batch.length) await writeBuckets(this.deps.db, batch);
    } catch (err) {
      this.deps.log.error({ err }, 'site analytics flush failed; keeping the counts for the next one');
      for (const b of batch) {
        const key = `${b.publicationId}\n${b.hour}`;
        const cur = this.buckets.get(key);
        if (cur) mergeInto(cur, b);
        else this.buckets.set(key, b);
        this.pending += b.visitors.size;
      }
    }
  }

  /** Final flush; the caller closes the listener first so that nothing is counted after it. */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.flush();
  }
}

/** The recorder of a sites server, or null when CUBBY_SITE_ANALYTICS=off. */
export async function startSiteAnalytics(deps: AppDeps): Promise<SiteAnalytics | null> {
  if (!deps.config.siteAnalytics.enabled) return null;
  const analytics = new SiteAnalytics(deps, await openCountryLookup(deps.config.siteAnalytics.geoipDb));
  await analytics.start();
  return analytics;
}
