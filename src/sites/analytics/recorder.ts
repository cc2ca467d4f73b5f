import { hash } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AppDeps } from '../../context.ts';
import { BOT, maybeView, pathOf, referrerHost } from './hit.ts';
import { SENT_HEADERS } from '../server/serve-file.ts';
import type { Site } from '../server/site-cache.ts';
import { clientOf } from '../server/access.ts';
import { ensureSalts, writeBuckets } from './store.ts';
import { openCountryLookup, type CountryLookup } from './geoip.ts';
import { bump, dayOf, foldStatuses, hourOf, mergeInto, newBucket, type HourBucket } from './bucket.ts';

// Counting in memory, writing in batches. When a response finishes, countResponse() does only what
// every response needs and allocates nothing for an asset: the hour's bucket of the publication (a
// Map lookup by publication id, the hour's key made once per hour), requests, bytes (read from the
// header object the sites server wrote) and the status (a numeric Map). A page view also queues its raw facts (request
// URL, user agent, Referer, Host, client address); drainViews() turns the queue into counts once the
// responses of the event-loop turn are done (setImmediate): robot test, path, referrer host,
// country, visitor hash (cached per client and user agent until the next flush, so a visitor's
// pages and assets are hashed once). flush() drains first, then writes what was counted since the
// last flush in one transaction, on a timer and at shutdown.
//
// Memory is bounded: per hour and publication at most CAPS[dimension] distinct values (the rest
// count under OTHER); past MAX_PENDING visitor hashes a flush starts at once, and past twice that,
// views still count but visitors are not added; the caches are cleared at each flush and when full.

const MAX_PENDING = 100_000;
const MAX_CACHE = 10_000;

interface ViewFacts {
  bucket: HourBucket;
  url: string;
  userAgent: string;
  referer: string | undefined;
  host: string;
  ip: string;
}

export class SiteAnalytics {
  /** Every bucket since the last flush, by publication and hour. */
  private buckets = new Map<string, HourBucket>();
  /** This hour's buckets by publication id (the fast path's index into `buckets`). */
  private current = new Map<string, HourBucket>();
  private pending = 0;
  private salts = new Map<string, string>();
  private timer: NodeJS.Timeout | null = null;
  private flushing: Promise<void> | null = null;
  private hourMs = -1;
  private hour = '';
  private views: ViewFacts[] = [];
  private drainScheduled = false;
  private flushDue = false;
  /** Visitor hash by salt, publication, client and user agent (raw keys live only until the next flush). */
  private visitorCache = new Map<string, string>();
  private botCache = new Map<string, boolean>();
  private referrerCache = new Map<string, string | null>();

  constructor(
    private readonly deps: AppDeps,
    private readonly countries: CountryLookup | null,
  ) {}

  async start(): Promise<void> {
    this.salts = await ensureSalts(this.deps.db, this.deps.now());
    this.timer = setInterval(() => void this.flush(), this.deps.config.siteAnalytics.flushMs);
    this.timer.unref();
  }

  /** The sites server's one call, when a response has finished (site: what the host served). Never throws, never waits. */
  countResponse(req: IncomingMessage, res: ServerResponse, site: Site | null): void {
    if (!site) return;
    try {
      const now = this.deps.now().getTime();
      if (now < this.hourMs || now >= this.hourMs + 3_600_000) {
        // The hour's ISO string and index are made once per hour, not per response.
        this.hourMs = now - (now % 3_600_000);
        this.hour = hourOf(now);
        this.current = new Map();
      }
      let b = this.current.get(site.publicationId);
      if (!b) b = this.bucketOf(site.publicationId);
      const status = res.statusCode;
      b.requests++;
      b.statuses.set(status, (b.statuses.get(status) ?? 0) + 1);
      // The header object the sites server wrote (every response of it goes through its writeHead
      // helper); a response without one counts as a request of no bytes, never as a view.
      const sent = (res as unknown as Record<symbol, Record<string, string | string[] | undefined> | undefined>)[SENT_HEADERS] ?? {};
      const length = sent['content-length'];
      if (req.method !== 'HEAD' && typeof length === 'string') b.bytes += Number(length) || 0;
      const type = sent['content-type'];
      const html = typeof type === 'string' && type.startsWith('text/html');
      const gate = sent['x-cubby-access'] !== undefined;
      if (!maybeView(req, status, html, gate)) return;
      const ua = req.headers['user-agent'];
      const referer = req.headers.referer;
      this.views.push({ bucket: b, url: req.url ?? '/', userAgent: typeof ua === 'string' ? ua : '', referer: typeof referer === 'string' ? referer : undefined, host: String(req.headers.host ?? ''), ip: clientOf(this.deps, req) });
      if (!this.drainScheduled) {
        this.drainScheduled = true;
        setImmediate(() => this.drainViews());
      }
    } catch (err) {
      this.deps.log.error({ err }, 'site analytics could not count a response');
    }
  }

  private bucketOf(publicationId: string): HourBucket {
    const key = `${publicationId}\n${this.hour}`;
    let b = this.buckets.get(key);
    if (!b) this.buckets.set(key, (b = newBucket(publicationId, this.hour)));
    this.current.set(publicationId, b);
    return b;
  }

  /** Counts the queued page views (off the response path; flush() calls it first too). */
  private drainViews(): void {
    this.drainScheduled = false;
    const views = this.views;
    if (!views.length) return;
    this.views = [];
    for (const v of views) {
      try {
        this.countView(v);
      } catch (err) {
        this.deps.log.error({ err }, 'site analytics could not count a page view');
      }
    }
    if (this.flushDue) {
      this.flushDue = false;
      void this.flush();
    }
  }

  private countView(v: ViewFacts): void {
    let bot = this.botCache.get(v.userAgent);
    if (bot === undefined) {
      bot = BOT.test(v.userAgent);
      if (this.botCache.size >= MAX_CACHE) this.botCache.clear();
      this.botCache.set(v.userAgent, bot);
    }
    if (bot) return;
    const b = v.bucket;
    b.views++;
    bump(b, 'path', pathOf(v.url));
    if (v.referer) {
      const refKey = `${v.host}\n${v.referer}`;
      let ref = this.referrerCache.get(refKey);
      if (ref === undefined) {
        ref = referrerHost(v.referer, v.host);
        if (this.referrerCache.size >= MAX_CACHE) this.referrerCache.clear();
        this.referrerCache.set(refKey, ref);
      }
      if (ref) bump(b, 'referrer', ref);
    }
    const country = this.countries?.(v.ip.replace(/\/64$/, ''));
    if (country) bump(b, 'country', country);
    // The hour's day: a view queued just before midnight keeps its day's salt.
    const salt = this.salts.get(b.hour.slice(0, 10));
    if (salt && this.pending < 2 * MAX_PENDING) {
      // Publication in the hash: one person on two sites is two unrelated visitors.
      const key = `${salt}\n${b.publicationId}\n${v.ip}\n${v.userAgent}`;
      let visitor = this.visitorCache.get(key);
      if (visitor === undefined) {
        // crypto.hash: one call, about half the cost of createHash for a short input.
        visitor = hash('sha256', key, 'base64url').slice(0, 22);
        if (this.visitorCache.size >= MAX_CACHE) this.visitorCache.clear();
        this.visitorCache.set(key, visitor);
      }
      if (!b.visitors.has(visitor)) {
        b.visitors.add(visitor);
        // The flush starts after this batch (it takes the buckets this loop still adds to).
        if (++this.pending === MAX_PENDING) this.flushDue = true;
      }
    }
  }

  /** Writes everything counted so far; concurrent calls share one write. */
  flush(): Promise<void> {
    if (this.flushing) return this.flushing.then(() => this.flush());
    this.drainViews();
    const batch = [...this.buckets.values()];
    for (const b of batch) foldStatuses(b);
    this.buckets = new Map();
    this.current = new Map();
    this.pending = 0;
    // Raw client addresses and user agents are kept no longer than one flush interval.
    this.visitorCache.clear();
    this.flushing = this.write(batch).finally(() => {
      this.flushing = null;
    });
    return this.flushing;
  }

  private async write(batch: HourBucket[]): Promise<void> {
    let durable: Promise<void> | null = null;
    try {
      const now = this.deps.now();
      // Tomorrow's salt is made a day ahead, so a hit just after midnight already has one.
      if (!this.salts.has(dayOf(now.getTime() + 86_400_000))) this.salts = await ensureSalts(this.deps.db, now);
      if (batch.length) ({ durable } = await writeBuckets(this.deps.commits, batch));
    } catch (err) {
      this.deps.log.error({ err }, 'site analytics flush failed; keeping the counts for the next one');
      for (const b of batch) {
        const key = `${b.publicationId}\n${b.hour}`;
        const cur = this.buckets.get(key);
        if (cur) mergeInto(cur, b);
        else {
          this.buckets.set(key, b);
          if (b.hour === this.hour) this.current.set(b.publicationId, b);
        }
        this.pending += b.visitors.size;
      }
    }
    // Committed: a failed sync is logged, not retried (the counts are in; adding them again would double them).
    await durable?.catch((err: unknown) => this.deps.log.error({ err }, 'site analytics flush committed, but syncing it to disk failed'));
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
