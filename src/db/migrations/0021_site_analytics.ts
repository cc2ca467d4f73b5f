import type { Kysely } from 'kysely';

// Site analytics without cookies (src/sites/analytics): counters per publication and UTC hour,
// filled by the sites server in batched writes. No raw IP address or user agent is ever stored:
// a visitor is a salted SHA-256 of (day's salt, publication, IP, user agent), the salt is random
// per UTC day and deleted once the day is over, after which the stored hashes lead back to no one.
export async function up(db: Kysely<any>): Promise<void> {
  // One row per publication and hour (`hour` is the ISO start of the UTC hour).
  await db.schema
    .createTable('site_analytics_hours')
    .addColumn('publication_id', 'text', (c) => c.notNull())
    .addColumn('hour', 'text', (c) => c.notNull())
    .addColumn('requests', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('views', 'bigint', (c) => c.notNull().defaultTo(0))
    // Distinct visitors in this hour.
    .addColumn('visitors', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('bytes', 'bigint', (c) => c.notNull().defaultTo(0))
    .addPrimaryKeyConstraint('site_analytics_hours_pk', ['publication_id', 'hour'])
    .execute();
  // Distinct visitors per UTC day (not the sum of the hours: one visitor in two hours is one).
  await db.schema
    .createTable('site_analytics_days')
    .addColumn('publication_id', 'text', (c) => c.notNull())
    .addColumn('day', 'text', (c) => c.notNull())
    .addColumn('visitors', 'bigint', (c) => c.notNull().defaultTo(0))
    .addPrimaryKeyConstraint('site_analytics_days_pk', ['publication_id', 'day'])
    .execute();
  // Breakdowns per hour: dimension path | referrer | country (page views) or status (requests).
  // At most a fixed number of values per hour and dimension; the rest count under "(other)".
  await db.schema
    .createTable('site_analytics_counts')
    .addColumn('publication_id', 'text', (c) => c.notNull())
    .addColumn('hour', 'text', (c) => c.notNull())
    .addColumn('dimension', 'text', (c) => c.notNull())
    .addColumn('value', 'text', (c) => c.notNull())
    .addColumn('count', 'bigint', (c) => c.notNull().defaultTo(0))
    .addPrimaryKeyConstraint('site_analytics_counts_pk', ['publication_id', 'hour', 'dimension', 'value'])
    .execute();
  // Which visitor hashes were already counted in an hour (`YYYY-MM-DDTHH`) or a day
  // (`YYYY-MM-DD`), so that every node and every flush counts a visitor once. Kept only while
  // the period can still receive hits; purged with the day's salt.
  await db.schema
    .createTable('site_analytics_seen')
    .addColumn('publication_id', 'text', (c) => c.notNull())
    .addColumn('period', 'text', (c) => c.notNull())
    .addColumn('visitor', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('site_analytics_seen_pk', ['publication_id', 'period', 'visitor'])
    .execute();
  // The day's random salt, shared by every sites node; today's and tomorrow's only.
  await db.schema
    .createTable('site_analytics_salts')
    .addColumn('day', 'text', (c) => c.primaryKey())
    .addColumn('salt', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('site_analytics_hours_hour').on('site_analytics_hours').column('hour').execute();
  await db.schema.createIndex('site_analytics_counts_hour').on('site_analytics_counts').column('hour').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  for (const t of ['site_analytics_salts', 'site_analytics_seen', 'site_analytics_counts', 'site_analytics_days', 'site_analytics_hours']) await db.schema.dropTable(t).execute();
}
