import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { startTestApp } from './harness.ts';

// Several Cubby installations (or test suites) in one Postgres database, each in its own
// CUBBY_DATABASE_SCHEMA.

describe.skipIf(!process.env.CUBBY_TEST_POSTGRES_URL)('Postgres schemas', () => {
  // Regression: Kysely's Migrator decides whether its kysely_migration tables exist by looking
  // in *every* schema unless it is given migrationTableSchema. When another schema already held
  // them, it skipped creating its own and failed with 'relation "kysely_migration_lock" does not
  // exist' (or read another schema's history: 'corrupted migrations'). Postgres suites were
  // flaky whenever two test files migrated at once, and a self-hosted Cubby could not start in a
  // schema of a database where another Kysely app lives. Fixed in src/db/database.ts by passing
  // migrationTableSchema.
  it('an app starts in a fresh schema while another schema of the same database is migrated', async () => {
    const first = await startTestApp('postgres');
    try {
      const second = await startTestApp('postgres');
      try {
        const u = await second.user();
        expect((await second.request('GET', '/v1/status', { key: u.key })).status).toBe(200);
      } finally {
        await second.stop();
      }
    } finally {
      await first.stop();
    }
  });

  // Regression: Kysely finds its bookkeeping tables by listing every column of every table in the
  // database, looking each table up again with pg_get_serial_sequence. A table dropped by another
  // tenant while the listing ran failed the migration with 'column "…" of relation "…" does not
  // exist'. The listing is now made again (src/db/database.ts, listingRaced).
  it('an app starts while another tenant of the database creates and drops tables', async () => {
    const churnSchema = `churn_${randomUUID().replaceAll('-', '')}`;
    const churn = new pg.Client({ connectionString: process.env.CUBBY_TEST_POSTGRES_URL });
    await churn.connect();
    await churn.query(`CREATE SCHEMA "${churnSchema}"`);
    let stop = false;
    let cycles = 0;
    const churning = (async () => {
      const columns = Array.from({ length: 40 }, (_, i) => `c${i} text`).join(', ');
      while (!stop) {
        await churn.query(`CREATE TABLE "${churnSchema}".t (${columns})`);
        await churn.query(`DROP TABLE "${churnSchema}".t`);
        cycles++;
      }
    })();
    try {
      for (let i = 0; i < 3; i++) {
        const app = await startTestApp('postgres');
        await app.stop();
      }
    } finally {
      stop = true;
      await churning;
      await churn.query(`DROP SCHEMA "${churnSchema}" CASCADE`);
      await churn.end();
    }
    expect(cycles).toBeGreaterThan(0);
  });
});
