import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { describeEachDatabase } from './harness.ts';
import { newBucket, publisher, siteFetch } from './sites-helpers.ts';
import { filePaths, mailboxOf, versionRows } from './upload-sessions-helpers.ts';

// The bash client of the bucket era (test/compat/publish-folder.sh: curl and jq, nothing of
// ours) stores a folder through an upload session in batches of 25, publishes it with
// metadata.publication_root_directory, polls the publication until ready and fetches the site,
// against the real app, unmodified. See docs/compat.md.

const SCRIPT = path.join(path.dirname(fileURLToPath(import.meta.url)), 'compat', 'publish-folder.sh');
const haveTools = ['curl', 'jq', 'openssl'].every((t) => process.env.PATH?.split(':').some((d) => fs.existsSync(path.join(d, t))));

function run(args: string[], env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile('bash', [SCRIPT, ...args], { env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: os.tmpdir(), ...env }, timeout: 120_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

/** A folder as a client has it: a site under site/ (60 files in all, nested) and files beside it. */
function makeFolder(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cubby-compat-folder-'));
  const write = (rel: string, content: string) => {
    fs.mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
    fs.writeFileSync(path.join(dir, rel), content);
  };
  write('site/index.html', '<!doctype html><title>Folder site</title><h1>Stored by the bash client</h1>');
  write('site/css/main.css', 'h1 { color: teal }');
  for (let i = 0; i < 50; i++) write(`site/pages/page-${String(i).padStart(2, '0')}.html`, `<h1>page ${i}</h1>`);
  for (let i = 0; i < 7; i++) write(`notes/note ${i}.txt`, `note ${i}\n`);
  write('README.md', '# not published\n');
  return dir;
}

describe.skipIf(!haveTools)('compat: the bash client (curl + jq)', () => {
  describeEachDatabase('publish-folder.sh', (app) => {
    it('stores a folder in batches of 25, publishes the root folder from metadata, polls until ready and fetches the site', async () => {
      const u = await publisher(app());
      const bucket = await newBucket(app(), u.key, 'my-folder');
      const dir = makeFolder();
      try {
        const res = await run([dir, bucket.id, 'site'], { CUBBY_URL: app().base, CUBBY_API_KEY: u.key, PUBLISH_POLL_INTERVAL_S: '0.2' });
        expect(res.code, res.stderr).toBe(0);
        const summary = JSON.parse(res.stdout.trim().split('\n').at(-1)!);
        expect(summary).toMatchObject({ files: 60, site_status: 200, kind: 'bucket_bundle', root: 'site' });
        expect(summary.session_id).toMatch(/^bus_[A-Za-z0-9]+$/);

        // Every file stored, in one mailbox version; the lock released.
        const paths = await filePaths(app(), u.key, bucket.id);
        expect(paths).toHaveLength(60);
        expect(paths).toContain('notes/note 3.txt');
        const m = await mailboxOf(app(), u.key, bucket.id);
        expect(m).toMatchObject({ files_count: 60, version_number: 1, lock: { locked: false } });
        expect((await versionRows(app(), bucket.id)).map((v: any) => v.action)).toEqual(['upload_session.finalize']);

        // The site serves site/ as its root: the home page and a nested page; README.md is outside it.
        const home = await siteFetch(summary.public_url);
        expect(home.status).toBe(200);
        expect(home.text).toContain('Stored by the bash client');
        expect((await siteFetch(`${summary.public_url}/pages/page-42.html`)).text).toBe('<h1>page 42</h1>');
        expect((await siteFetch(`${summary.public_url}/README.md`)).status).toBe(404);
      } finally {
        fs.rmSync(dir, { recursive: true, force: true });
      }
    });

    it('stops with a clear failure when the key is wrong (nothing stored)', async () => {
      const u = await publisher(app());
      const bucket = await newBucket(app(), u.key);
      const dir = makeFolder();
      try {
        const res = await run([dir, bucket.id], { CUBBY_URL: app().base, CUBBY_API_KEY: 'cubby_wrong', PUBLISH_POLL_INTERVAL_S: '0.2' });
        expect(res.code).not.toBe(0);
        expect(res.stderr).toContain('failed');
        expect(res.stderr).toContain('"code"');
        expect(await filePaths(app(), u.key, bucket.id)).toEqual([]);
      } finally {
        fs.rmSync(dir, { recursive: true, force: true });
      }
    });
  });
});
