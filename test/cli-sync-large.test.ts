import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp, type TestUser } from './harness.ts';
import { cli, cliEnv, tempDir } from './cli-user-helpers.ts';

// `cubby sync` of a folder of 20,000 files: the CLI walks the folder lazily, hashes and uploads a
// batch at a time with bounded parallelism, and goes through two upload sessions (the service holds
// 10,000 files per session). Its peak memory (CUBBY_DEBUG_RSS: maxRSS at exit) is compared with a
// sync of one file: holding the files' bytes would add 160 MiB; the bound allows 96.
// Run time: 2.4 min for the file at load ≈ 3–8 on 2 cores, 9.5 min at load ≈ 25 (the server's
// work per file dominates). Memory is a bound, not a timing.

const FILES = 20_000;
const SIZE = 8 * 1024;

let app: TestApp;
let user: TestUser;
let env: Record<string, string>;
let work: string;

beforeAll(async () => {
  // Errors logged: a 500 in the middle of 20,000 files is otherwise only a request id.
  app = await startTestApp('sqlite', { CUBBY_LOG_LEVEL: 'error' });
  user = await app.user({ plan: 'paid' });
  work = tempDir();
  env = cliEnv({ CUBBY_URL: app.base, CUBBY_API_KEY: user.key, CUBBY_CONFIG_DIR: path.join(work, 'config'), CUBBY_DEBUG_RSS: '1' });
}, 120_000);
afterAll(async () => {
  await app?.stop();
  if (work) fs.rmSync(work, { recursive: true, force: true });
}, 600_000); // 20,000 files to remove, twice (the folder and the app's data)

const peakKib = (stderr: string) => Number(/"debug_max_rss_kib":(\d+)/.exec(stderr)?.[1]);

describe('cubby sync of 20,000 files', { timeout: 1_200_000 }, () => {
  it('streams through two sessions in flat memory, and leaves no lock', async () => {
    const one = path.join(work, 'one');
    fs.mkdirSync(one);
    fs.writeFileSync(path.join(one, 'only.bin'), Buffer.alloc(SIZE, 1));
    const big = path.join(work, 'big');
    for (let i = 0; i < FILES; i++) {
      const sub = path.join(big, `d${String(Math.floor(i / 1000)).padStart(2, '0')}`);
      if (i % 1000 === 0) fs.mkdirSync(sub, { recursive: true });
      // distinct contents (the first bytes), so that nothing is skipped as identical
      const bytes = Buffer.alloc(SIZE, i % 251);
      bytes.writeUInt32BE(i, 0);
      fs.writeFileSync(path.join(sub, `f${i}.bin`), bytes);
    }
    for (const title of ['Sync One', 'Sync Many']) expect((await cli(['mailboxes', 'create', title], env)).code).toBe(0);

    const baseline = await cli(['sync', one, 'Sync One:', '--json'], env);
    expect(baseline.code, baseline.stderr).toBe(0);
    const many = await cli(['sync', big, 'Sync Many:', '--batch-size', '100', '--json'], env);
    expect(many.code, many.stderr).toBe(0);
    expect(many.json).toMatchObject({ uploaded: FILES, skipped: 0, bytes: FILES * SIZE, sessions: 2, session: { status: 'finalized' } });

    const base = peakKib(baseline.stderr);
    const peak = peakKib(many.stderr);
    expect(base).toBeGreaterThan(0);
    // eslint-disable-next-line no-console
    console.log(`cubby sync peak RSS: ${Math.round(base / 1024)} MiB for 1 file, ${Math.round(peak / 1024)} MiB for ${FILES} files of ${SIZE} B`);
    expect(peak - base).toBeLessThan(96 * 1024);

    const mailbox = (await app.request('GET', `/v1/mailboxes/${many.json.mailbox_id}`, { key: user.key })).body.data.mailbox;
    expect(mailbox.files_count).toBe(FILES);
    expect(mailbox.lock?.locked ?? false).toBe(false);
  });
});
