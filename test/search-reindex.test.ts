import { execFile } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { expect, it } from 'vitest';
import { describeEachDatabase } from './harness.ts';
import { inbox, receive } from './emails-helpers.ts';
import { labelNow } from './smtp-helpers.ts';
import { searchIndex } from '../src/search/search-index.ts';

// `cubby admin reindex` rebuilds the documents of stored mail (here: mail whose documents were
// removed, as for data stored before search existed), run as an operator would, beside the server.

const ROOT = path.resolve(import.meta.dirname, '..');

function cubby(env: Record<string, string>, ...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const childEnv: Record<string, string> = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? os.tmpdir(), CUBBY_LOG_LEVEL: 'silent', ...env };
  return new Promise((resolve) => {
    execFile(process.execPath, [path.join(ROOT, 'bin/cubby.js'), ...args], { cwd: ROOT, env: childEnv, timeout: 60_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr });
    });
  });
}

describeEachDatabase('cubby admin reindex', (app) => {
  it('indexes stored emails again, for one mailbox', async () => {
    const u = await app().user();
    const box = await inbox(app(), u);
    const other = await inbox(app(), u);
    const secret = `zq${Math.random().toString(36).slice(2, 9)}`;
    const id = await receive(app(), box, { subject: `Old ${secret}`, text: 'from before search' });
    const otherId = await receive(app(), other, { subject: `Other ${secret}`, text: 'elsewhere' });
    await labelNow(app());
    const deps = app().started.deps;
    await deps.db.transaction().execute((trx) => searchIndex(deps).removeEmails(trx, [id, otherId]));
    const found = async () => (await app().request('GET', '/v1/search', { key: u.key, query: { q: secret } })).body.data.results.map((r: any) => r.id);
    expect(await found()).toEqual([]);

    const env = Object.fromEntries(Object.entries(app().env).filter(([k]) => ['CUBBY_DATA_DIR', 'CUBBY_DATABASE_URL', 'CUBBY_DATABASE_SCHEMA', 'CUBBY_SECRET_KEY'].includes(k)));
    const r = await cubby(env, 'admin', 'reindex', '--mailbox', box.id);
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout.trim());
    expect(out).toMatchObject({ mailbox_id: box.id, emails_indexed: 1 });
    expect(r.stderr).toContain('indexed 1 emails');
    expect(await found()).toEqual([id]);
  });
});
