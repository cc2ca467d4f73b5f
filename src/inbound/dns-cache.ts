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
  const maxEntries = opts.maxEntries ?? 10_000;
  const cache = new Map<string, ExpiringAnswer>();
  const withExpiry = async (name: string, rrtype: string): Promise<ExpiringAnswer> => {
    const key = `${rrtype} ${name.toLowerCase()}`;
    const hit = cache.get(key);
    const now = Date.now();
    if (hit && hit.until > now) return hit;
    if (cache.size >= maxEntries) cache.delete(cache.keys().next().value!);
    try {
      const answer = { value: await inner(name, rrtype), until: now + ttlMs };
      cache.set(key, answer);
      return answer;
    } catch (err) {
      const code = (err as NodeJS.ErrnoException)?.code;
      const cacheable = code === 'ENOTFOUND' || code === 'ENODATA';
      const answer = { error: err, until: cacheable ? now + ttlMs : 0 };
      if (cacheable) cache.set(key, answer);
      return answer;
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
