import type { DnsResolver } from './authenticate.ts';

/**
 * A small TTL cache in front of a resolver: a burst of mail from one sender domain asks for the
 * same SPF, DKIM and DMARC records again and again. Answers and "no record" errors are both kept
 * (for `ttlMs`; we do not see record TTLs through the resolver API); timeouts and server failures
 * are not, so they are retried on the next message.
 */
export function cachingResolver(inner: DnsResolver, opts: { ttlMs?: number; maxEntries?: number } = {}): DnsResolver {
  const ttlMs = opts.ttlMs ?? 60_000;
  const maxEntries = opts.maxEntries ?? 10_000;
  const cache = new Map<string, { until: number; value?: unknown; error?: unknown }>();
  return async (name, rrtype) => {
    const key = `${rrtype} ${name.toLowerCase()}`;
    const hit = cache.get(key);
    const now = Date.now();
    if (hit && hit.until > now) {
      if (hit.error) throw hit.error;
      return hit.value;
    }
    if (cache.size >= maxEntries) cache.delete(cache.keys().next().value!);
    try {
      const value = await inner(name, rrtype);
      cache.set(key, { until: now + ttlMs, value });
      return value;
    } catch (err) {
      const code = (err as NodeJS.ErrnoException)?.code;
      if (code === 'ENOTFOUND' || code === 'ENODATA') cache.set(key, { until: now + ttlMs, error: err });
      throw err;
    }
  };
}
