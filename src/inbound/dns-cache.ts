import type { DnsResolver } from './authenticate.ts';

/** An answer with the time (Date.now()) until which it may be reused; 0: not to be reused. */
export interface ExpiringAnswer {
  value?: unknown;
  error?: unknown;
  until: number;
}

/** A resolver that keeps answers for a while, and can say how long each may still be reused. */
export interface CachingResolver extends DnsResolver {
  withExpiry(name: string, rrtype: string): Promise<ExpiringAnswer>;
}

/**
 * A small TTL cache in front of a resolver: a burst of mail from one sender domain asks for the
 * same SPF, DKIM and DMARC records again and again. Answers and "no record" errors are both kept
 * (for `ttlMs`; we do not see record TTLs through the resolver API); timeouts and server failures
 * are not, so they are retried on the next message. `withExpiry` tells how long an answer stays
 * good, so that the analysis threads can keep a copy until then instead of asking this thread for
 * every message (src/inbound/analyze-worker.ts).
 */
export function cachingResolver(inner: DnsResolver, opts: { ttlMs?: number; maxEntries?: number } = {}): CachingResolver {
  const ttlMs = opts.ttlMs ?? 60_000;
  const cache = new KeptAnswers<ExpiringAnswer>(opts.maxEntries);
  const withExpiry = async (name: string, rrtype: string): Promise<ExpiringAnswer> => {
    const hit = cache.get(name, rrtype);
    if (hit) return hit;
    const now = Date.now();
    try {
      return cache.keep(name, rrtype, { value: await inner(name, rrtype), until: now + ttlMs });
    } catch (err) {
      const code = (err as NodeJS.ErrnoException)?.code;
      const cacheable = code === 'ENOTFOUND' || code === 'ENODATA';
      return cache.keep(name, rrtype, { error: err, until: cacheable ? now + ttlMs : 0 });
    }
  };
  const resolve = async (name: string, rrtype: string) => {
    const answer = await withExpiry(name, rrtype);
    if ('error' in answer) throw answer.error;
    return answer.value;
  };
  return Object.assign(resolve, { withExpiry });
}

export function isCachingResolver(resolver: DnsResolver): resolver is CachingResolver {
  return typeof (resolver as Partial<CachingResolver>).withExpiry === 'function';
}

/**
 * Answers by name and type, each until its `until` (Date.now() time), at most `maxEntries` (the
 * oldest go first). Used by the caching resolver and by the analysis threads' copies of its answers.
 */
export class KeptAnswers<A extends { until: number }> {
  private readonly answers = new Map<string, A>();

  constructor(private readonly maxEntries = 10_000) {}

  get(name: string, rrtype: string): A | undefined {
    const hit = this.answers.get(`${rrtype} ${name.toLowerCase()}`);
    return hit && hit.until > Date.now() ? hit : undefined;
  }

  /** Keeps `answer` if it is still good (an `until` in the past is not kept); returns it. */
  keep(name: string, rrtype: string, answer: A): A {
    if (answer.until <= Date.now()) return answer;
    const key = `${rrtype} ${name.toLowerCase()}`;
    if (!this.answers.has(key) && this.answers.size >= this.maxEntries) this.answers.delete(this.answers.keys().next().value!);
    this.answers.set(key, answer);
    return answer;
  }
}
