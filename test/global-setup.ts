// Says plainly which database suites run.
export default function setup() {
  if (process.env.CUBBY_TEST_POSTGRES_URL) {
    console.log(`Database suites: SQLite and Postgres (${new URL(process.env.CUBBY_TEST_POSTGRES_URL).host}).`);
  } else {
    console.log('Database suites: SQLite only. The Postgres suite was skipped: set CUBBY_TEST_POSTGRES_URL to run it.');
  }
}
