import { randomBytes } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import type { DB } from '../../db/schema.ts';
import type { DurableCommits } from '../../db/durable-commit.ts';
import { iso } from '../../time.ts';
import type { AnalyticsDimension } from './analytics.schema.ts';
import { CAPS, OTHER, type HourBucket } from './bucket.ts';

// The writes behind SiteAnalytics.flush(): one transaction for a whole batch, safe to run from
// several sites nodes at once (every write adds to a counter; "seen" rows make visitor counts
// exact across nodes and flushes).

const CHUNK = 300;
const DAY = 86_400_000;
const dayOf = (ms: number) => new Date(ms).toISOString().slice(0, 10);

const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

function chunks<T>(list: T[]): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < list.length; i += CHUNK) out.push(list.slice(i, i + CHUNK));
  return out;
}

/**
 * Today's and tomorrow's salts (made when missing, the same for every node); older salts are
 * deleted, so yesterday's visitor hashes can no longer be matched to anyone.
 */
export async function ensureSalts(db: Kysely<DB>, now: Date): Promise<Map<string, string>> {
  const days = [dayOf(now.getTime()), dayOf(now.getTime() + DAY)];
  await db
    .insertInto('site_analytics_salts')
    .values(days.map((day) => ({ day, salt: randomBytes(32).toString('base64url'), created_at: iso(now) })))
    .onConflict((oc) => oc.column('day').doNothing())
    .execute();
  await db.deleteFrom('site_analytics_salts').where('day', '<', days[0]!).execute();
  const rows = await db.selectFrom('site_analytics_salts').select(['day', 'salt']).where('day', 'in', days).execute();
  return new Map(rows.map((r) => [r.day, r.salt]));
}

/**
 * Adds one batch of hourly buckets to the tables; resolves once committed, with `durable` for
 * once the commit is on disk. Through `commits` (src/db/durable-commit.ts): on SQLite the WAL is
 * synced on libuv's pool, not by the commit on the event loop, so a flush never holds up the
 * responses being served meanwhile.
 */
export async function writeBuckets(commits: DurableCommits, batch: HourBucket[]): Promise<{ durable: Promise<void> }> {
  // One order for every node (publication, hour; then dimension, value): concurrent flushes on
  // Postgres lock the same rows in the same order and so never deadlock each other.
  const ordered = [...batch].sort((a, b) => (a.publicationId === b.publicationId ? cmp(a.hour, b.hour) : cmp(a.publicationId, b.publicationId)));
  const { durable } = await commits.commit(async (trx) => {
    for (const b of ordered) {
      const hourKey = b.hour.slice(0, 13);
      const day = b.hour.slice(0, 10);
      // Visitors first: which of them this hour and this day have not counted yet.
      let newInHour = 0;
      let newInDay = 0;
      for (const part of chunks([...b.visitors].sort())) {
        const rows = part.flatMap((visitor) => [
          { publication_id: b.publicationId, period: hourKey, visitor },
          { publication_id: b.publicationId, period: day, visitor },
        ]);
        const added = await trx
          .insertInto('site_analytics_seen')
          .values(rows)
          .onConflict((oc) => oc.columns(['publication_id', 'period', 'visitor']).doNothing())
          .returning('period')
          .execute();
        for (const r of added) r.period === day ? newInDay++ : newInHour++;
      }
      await trx
        .insertInto('site_analytics_hours')
        .values({ publication_id: b.publicationId, hour: b.hour, requests: b.requests, views: b.views, visitors: newInHour, bytes: b.bytes })
        .onConflict((oc) =>
          oc.columns(['publication_id', 'hour']).doUpdateSet({
            requests: sql`site_analytics_hours.requests + excluded.requests`,
            views: sql`site_analytics_hours.views + excluded.views`,
            visitors: sql`site_analytics_hours.visitors + excluded.visitors`,
            bytes: sql`site_analytics_hours.bytes + excluded.bytes`,
          }),
        )
        .execute();
      if (newInDay) {
        await trx
          .insertInto('site_analytics_days')
          .values({ publication_id: b.publicationId, day, visitors: newInDay })
          .onConflict((oc) => oc.columns(['publication_id', 'day']).doUpdateSet({ visitors: sql`site_analytics_days.visitors + excluded.visitors` }))
          .execute();
      }
      await writeCounts(trx, b);
    }
  });
  return { durable };
}

/** The breakdowns, capped per hour in the database too: values past the cap go to OTHER. */
async function writeCounts(trx: Kysely<DB>, b: HourBucket): Promise<void> {
  const dims = (Object.keys(b.counts) as AnalyticsDimension[]).filter((d) => b.counts[d].size > 0);
  if (!dims.length) return;
  const existing = await trx
    .selectFrom('site_analytics_counts')
    .select(['dimension', 'value'])
    .where('publication_id', '=', b.publicationId)
    .where('hour', '=', b.hour)
    .where('dimension', 'in', dims)
    .execute();
  const known = new Map<AnalyticsDimension, Set<string>>(dims.map((d) => [d, new Set()]));
  for (const r of existing) known.get(r.dimension)!.add(r.value);
  const rows: { publication_id: string; hour: string; dimension: AnalyticsDimension; value: string; count: number }[] = [];
  for (const d of dims) {
    const have = known.get(d)!;
    const merged = new Map<string, number>();
    for (const [value, n] of b.counts[d]) {
      const key = have.has(value) || value === OTHER ? value : have.size < CAPS[d] ? (have.add(value), value) : OTHER;
      merged.set(key, (merged.get(key) ?? 0) + n);
    }
    for (const [value, count] of merged) rows.push({ publication_id: b.publicationId, hour: b.hour, dimension: d, value, count });
  }
  rows.sort((a, b) => (a.dimension === b.dimension ? cmp(a.value, b.value) : cmp(a.dimension, b.dimension)));
  for (const part of chunks(rows)) {
    await trx
      .insertInto('site_analytics_counts')
      .values(part)
      .onConflict((oc) => oc.columns(['publication_id', 'hour', 'dimension', 'value']).doUpdateSet({ count: sql`site_analytics_counts.count + excluded.count` }))
      .execute();
  }
}

/**
 * Retention: hourly rows, breakdowns and daily visitor counts older than `days` go; "seen" rows
 * of days before yesterday go at once (their salt is gone, so no later hit can match them).
 */
export async function purgeSiteAnalytics(db: Kysely<DB>, now: Date, days: number): Promise<void> {
  const cutoff = now.getTime() - days * DAY;
  const today = dayOf(now.getTime());
  await db.deleteFrom('site_analytics_hours').where('hour', '<', iso(cutoff)).execute();
  await db.deleteFrom('site_analytics_counts').where('hour', '<', iso(cutoff)).execute();
  await db.deleteFrom('site_analytics_days').where('day', '<', dayOf(cutoff)).execute();
  // Periods are `YYYY-MM-DD` or `YYYY-MM-DDTHH`; both sort below today's date when older.
  // Yesterday's stay a day longer for a flush that was still on its way at midnight.
  await db.deleteFrom('site_analytics_seen').where('period', '<', dayOf(now.getTime() - DAY)).execute();
  await db.deleteFrom('site_analytics_salts').where('day', '<', today).execute();
}
