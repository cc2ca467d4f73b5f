import type { AppDeps, RequestCtx } from '../../context.ts';
import { AppError } from '../../errors.ts';
import { loadPublication } from '../manage.service.ts';
import type { AnalyticsDimension } from './analytics.schema.ts';

// Reading the counters of one publication: a series of hours or days in a range, totals, and the
// top paths, referrers, countries and status codes. Through loadPublication, so a foreign or
// missing id answers 404 like any publication read; read access to the bucket is enough.

export type Granularity = 'hour' | 'day';
const HOUR = 3_600_000;
const DAY = 86_400_000;
/** Longest range per granularity (a series of at most 744 hours or 366 days). */
export const MAX_SPAN: Record<Granularity, { ms: number; label: string }> = { hour: { ms: 31 * DAY, label: '31 days' }, day: { ms: 366 * DAY, label: '366 days' } };
const TOP = 10;

export interface AnalyticsInput {
  from?: string;
  to?: string;
  granularity?: string;
}

function parseTime(field: 'from' | 'to', raw: string): number {
  // A date (YYYY-MM-DD) or an ISO 8601 time with a zone (Z or ±hh:mm): never local time.
  const ok = /^\d{4}-\d{2}-\d{2}$/.test(raw) || /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/i.test(raw);
  const ms = ok ? Date.parse(raw) : NaN;
  if (Number.isNaN(ms)) throw new AppError('ANALYTICS_RANGE_INVALID', `${field} must be a date (YYYY-MM-DD) or an ISO 8601 time with a zone, e.g. 2026-11-26T10:00:00Z.`, { field, value: raw.slice(0, 100) });
  return ms;
}

/** The range, aligned to whole buckets: `from` down to its bucket's start, `to` (exclusive) up to a boundary. */
export function analyticsRange(input: AnalyticsInput, now: Date): { from: number; to: number; granularity: Granularity } {
  const g = input.granularity ?? 'day';
  if (g !== 'hour' && g !== 'day') throw new AppError('ANALYTICS_GRANULARITY_INVALID', undefined, { field: 'granularity', value: String(g).slice(0, 100), allowed: ['hour', 'day'] });
  const step = g === 'hour' ? HOUR : DAY;
  const toRaw = input.to ? parseTime('to', input.to) : now.getTime();
  const to = Math.ceil(toRaw / step) * step;
  // By default the last 7 days, the current hour or day included.
  const fromRaw = input.from ? parseTime('from', input.from) : to - 7 * DAY;
  const from = fromRaw - (((fromRaw % step) + step) % step);
  if (fromRaw >= toRaw) throw new AppError('ANALYTICS_RANGE_INVALID', 'from must be before to.', { field: 'from', from: new Date(fromRaw).toISOString(), to: new Date(toRaw).toISOString() });
  if (to - from > MAX_SPAN[g].ms) throw new AppError('ANALYTICS_RANGE_INVALID', `A range by ${g} may span at most ${MAX_SPAN[g].label}; ask for a shorter range or granularity=day.`, { field: 'to', granularity: g, max_days: MAX_SPAN[g].ms / DAY });
  return { from, to, granularity: g };
}

export async function publicationAnalytics(ctx: RequestCtx, accountSelector: string | undefined, publicationId: string, input: AnalyticsInput) {
  const range = analyticsRange(input, ctx.now());
  const { publication } = await loadPublication(ctx, accountSelector, publicationId);
  return readAnalytics(ctx, publication, range);
}

/** The counters of a publication the caller may read (the dashboard checks access its own way). */
export async function readAnalytics(ctx: AppDeps, publication: { id: string; mailbox_id: string }, range: ReturnType<typeof analyticsRange>) {
  const fromIso = new Date(range.from).toISOString();
  const toIso = new Date(range.to).toISOString();
  const hours = await ctx.db
    .selectFrom('site_analytics_hours')
    .select(['hour', 'requests', 'views', 'visitors', 'bytes'])
    .where('publication_id', '=', publication.id)
    .where('hour', '>=', fromIso)
    .where('hour', '<', toIso)
    .execute();
  const days = await ctx.db
    .selectFrom('site_analytics_days')
    .select(['day', 'visitors'])
    .where('publication_id', '=', publication.id)
    .where('day', '>=', fromIso.slice(0, 10))
    .where('day', '<', toIso.slice(0, 10) + (toIso.slice(10) === 'T00:00:00.000Z' ? '' : '~'))
    .execute();

  const step = range.granularity === 'hour' ? HOUR : DAY;
  const series = new Map<number, { start: string; views: number; visitors: number; requests: number; bytes: number }>();
  for (let t = range.from; t < range.to; t += step) series.set(t, { start: new Date(t).toISOString(), views: 0, visitors: 0, requests: 0, bytes: 0 });
  for (const h of hours) {
    const t = Date.parse(h.hour);
    const point = series.get(t - (t % step))!;
    point.views += Number(h.views);
    point.requests += Number(h.requests);
    point.bytes += Number(h.bytes);
    if (range.granularity === 'hour') point.visitors += Number(h.visitors);
  }
  if (range.granularity === 'day') for (const d of days) {
    const point = series.get(Date.parse(d.day));
    if (point) point.visitors = Number(d.visitors);
  }
  const points = [...series.values()];
  const sum = (k: 'views' | 'requests' | 'bytes') => points.reduce((n, p) => n + p[k], 0);

  const top = async (dimension: AnalyticsDimension, limit: number | null) => {
    let q = ctx.db
      .selectFrom('site_analytics_counts')
      .select((eb) => ['value', eb.fn.sum<number>('count').as('n')])
      .where('publication_id', '=', publication.id)
      .where('dimension', '=', dimension)
      .where('hour', '>=', fromIso)
      .where('hour', '<', toIso)
      .groupBy('value')
      .orderBy('n', 'desc')
      .orderBy('value');
    if (limit) q = q.limit(limit);
    return (await q.execute()).map((r) => ({ value: r.value, count: Number(r.n) }));
  };
  return {
    publication_id: publication.id,
    bucket_id: publication.mailbox_id,
    from: fromIso,
    to: toIso,
    granularity: range.granularity,
    totals: { views: sum('views'), visitors: days.reduce((n, d) => n + Number(d.visitors), 0), requests: sum('requests'), bytes: sum('bytes') },
    series: points,
    top_paths: await top('path', TOP),
    top_referrers: await top('referrer', TOP),
    countries: await top('country', TOP),
    status_codes: await top('status', null),
    countries_enabled: ctx.config.siteAnalytics.geoipDb !== null,
  };
}

export type PublicationAnalytics = Awaited<ReturnType<typeof readAnalytics>>;
