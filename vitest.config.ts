import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts', 'src/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Two test files at a time, also on a 2-core machine (vitest's default there is one): most of a
    // file's time is spent waiting on fsyncs, child processes and Chromium, and one at a time the
    // suite took over 30 minutes on a slow CI machine. Every file boots its own app on its own ports
    // and data dir (and Postgres schema), so files never share state.
    maxWorkers: 2,
    globalSetup: ['test/global-setup.ts'],
  },
});
