import type { AnalyticsDimension } from './analytics.schema.ts';

// One publication's counts for one UTC hour, as kept in memory between flushes.

export const OTHER = '(other)';
/** Distinct values kept per publication, hour and dimension (in memory and in the database). */
export const CAPS: Record<AnalyticsDimension, number> = { path: 100, referrer: 50, country: 300, status: 60 };

export interface HourBucket {
  publicationId: string;
  /** ISO start of the UTC hour. */
  hour: string;
  requests: number;
  views: number;
  bytes: number;
  visitors: Set<string>;
  /** Responses per status code, counted by number on the request path; folded into counts.status before a write. */
  statuses: Map<number, number>;
  counts: Record<AnalyticsDimension, Map<string, number>>;
}

export const hourOf = (ms: number) => new Date(ms - (ms % 3_600_000)).toISOString();
export const dayOf = (ms: number) => new Date(ms).toISOString().slice(0, 10);

export function newBucket(publicationId: string, hour: string): HourBucket {
  return { publicationId, hour, requests: 0, views: 0, bytes: 0, visitors: new Set(), statuses: new Map(), counts: { path: new Map(), referrer: new Map(), country: new Map(), status: new Map() } };
}

export function bump(bucket: HourBucket, dimension: AnalyticsDimension, value: string, n = 1): void {
  const m = bucket.counts[dimension];
  const had = m.get(value);
  if (had !== undefined) m.set(value, had + n);
  else if (m.size < CAPS[dimension] || value === OTHER) m.set(value, n);
  else m.set(OTHER, (m.get(OTHER) ?? 0) + n);
}

/** Moves the numeric status counts into the status breakdown (capped like every dimension). */
export function foldStatuses(bucket: HourBucket): void {
  for (const [status, n] of bucket.statuses) bump(bucket, 'status', String(status), n);
  bucket.statuses.clear();
}

/** Adds a bucket that could not be written back into the pending ones (the next flush retries). */
export function mergeInto(target: HourBucket, from: HourBucket): void {
  target.requests += from.requests;
  target.views += from.views;
  target.bytes += from.bytes;
  for (const v of from.visitors) target.visitors.add(v);
  for (const [status, n] of from.statuses) target.statuses.set(status, (target.statuses.get(status) ?? 0) + n);
  for (const d of Object.keys(from.counts) as AnalyticsDimension[]) for (const [k, n] of from.counts[d]) bump(target, d, k, n);
}

