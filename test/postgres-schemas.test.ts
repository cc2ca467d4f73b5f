import { describe, expect, it } from 'vitest';
import { startTestApp } from './harness.ts';

// Several Cubby installations (or test suites) in one Postgres database, each in its own
// CUBBY_DATABASE_SCHEMA.

describe.skipIf(!process.env.CUBBY_TEST_POSTGRES_URL)('Postgres schemas', () => {
  // Known bug, fix pending in src/db/database.ts (owned by another change): Kysely's Migrator
  // decides whether its kysely_migration tables exist by looking in *every* schema unless it
  // is given migrationTableSchema. When another schema already holds them, it skips creating
  // its own and fails with 'relation "kysely_migration_lock" does not exist'. This makes the
  // Postgres suites flaky whenever two test files migrate at once, and stops a self-hosted
  // Cubby from starting in a schema of a database where another Kysely app lives.
  // Fix: new Migrator({ db, provider, migrationTableSchema: <the CUBBY_DATABASE_SCHEMA> }).
  it.fails('an app starts in a fresh schema while another schema of the same database is migrated', async () => {
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
