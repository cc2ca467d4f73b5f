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
    // Test files share their fork's module cache (one fork runs many files in turn). The suite is
    // CPU-bound on two cores, and loading the app's modules again for every file took 389 s of a
    // 1,578 s run (vitest's "import"); shared, 37 s, and the run 1,303 s. Files can share a process:
    // nothing in test/ mocks modules, stubs globals or sets process.env, and every file boots its
    // own apps on its own ports, data dirs and Postgres schemas.
    isolate: false,
    globalSetup: ['test/global-setup.ts'],
  },
});
