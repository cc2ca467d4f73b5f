#!/usr/bin/env node
// `npm test`: runs vitest, then prints one plain closing line "N passed, N failed"
// that CI reads, and says whether the Postgres suite ran.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

// Build the compiled tree once before the suites start many `bin/cubby.js` processes at a time
// (each would otherwise build its own copy on a fresh clone; bin/compiled.js).
const { compiledTree } = await import('../bin/compiled.js');
await compiledTree();

const report = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'cubby-test-')), 'report.json');
const args = ['vitest', 'run', '--reporter=default', '--reporter=json', `--outputFile.json=${report}`, ...process.argv.slice(2)];
const run = spawnSync('npx', args, { stdio: 'inherit' });

let passed = 0;
let failed = 0;
let skipped = 0;
try {
  const json = JSON.parse(fs.readFileSync(report, 'utf8'));
  passed = json.numPassedTests;
  // A file that failed without a failing test (it did not load, a hook threw) counts once; a
  // failing test is not counted again for the file and the describe blocks around it.
  const brokenFiles = (json.testResults ?? []).filter((f) => f.status === 'failed' && !(f.assertionResults ?? []).some((t) => t.status === 'failed')).length;
  failed = json.numFailedTests + brokenFiles;
  skipped = json.numPendingTests + (json.numTodoTests ?? 0);
} catch {
  failed = Math.max(1, failed);
}
if (!process.env.CUBBY_TEST_POSTGRES_URL) {
  console.log('Postgres suite skipped: CUBBY_TEST_POSTGRES_URL is not set (SQLite suite ran).');
}
console.log(`${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}`);
process.exit(run.status === 0 && failed === 0 ? 0 : 1);
