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
});
