import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestApp, type TestApp } from './harness.ts';

// The published form of @cubby/sdk: `npm pack` (which builds it with tsc), installed into a fresh
// folder with nothing else, imported as a package by plain Node (no TypeScript loader), talking
// to the real app. Its dependencies come from npm's cache, filled by the repository's install.

// Asynchronous: the app under test runs in this process and must keep answering.
const run = async (cmd: string, args: string[], opts: { cwd: string; env?: NodeJS.ProcessEnv }) => (await promisify(execFile)(cmd, args, { ...opts, encoding: 'utf8', maxBuffer: 16 << 20 })).stdout;
const root = path.resolve(import.meta.dirname, '..');
let app: TestApp;
let dir: string;
beforeAll(async () => {
  app = await startTestApp('sqlite');
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cubby-sdk-pack-'));
});
afterAll(async () => {
  await app?.stop();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

it('npm pack of @cubby/sdk installs in a fresh folder and works from plain JavaScript', { timeout: 180_000 }, async () => {
  const out = await run('npm', ['pack', '--json', '--pack-destination', dir, '-w', '@cubby/sdk'], { cwd: root });
  const [{ filename, files }] = JSON.parse(out.slice(out.indexOf('[')));
  const names = files.map((f: { path: string }) => f.path);
  expect(names).toContain('dist/index.js');
  expect(names).toContain('dist/index.d.ts');
  expect(names).toContain('dist/node.js');
  expect(names.some((n: string) => n.startsWith('src/'))).toBe(false);

  const project = path.join(dir, 'project');
  fs.mkdirSync(project);
  fs.writeFileSync(path.join(project, 'package.json'), JSON.stringify({ name: 'try-cubby', private: true, type: 'module' }));
  await run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', path.join(dir, path.basename(filename))], { cwd: project });

  const user = await app.user();
  fs.writeFileSync(
    path.join(project, 'try.mjs'),
    `import { Cubby, CubbyError } from '@cubby/sdk/node';
import * as core from '@cubby/sdk';
const cubby = new Cubby({ baseUrl: process.env.CUBBY_URL, apiKey: process.env.CUBBY_API_KEY });
const box = await cubby.mailboxes.create({ title: 'From the tarball' });
const saved = await cubby.uploadFile(box.id, 'hello.txt', 'hello from a fresh folder');
const text = new TextDecoder().decode(await cubby.files.read(box.id, saved.file.id));
let code = null;
try { await cubby.mailboxes.get('bkt_missing'); } catch (e) { code = e instanceof CubbyError ? e.code : 'other'; }
console.log(JSON.stringify({ text, code, core: typeof core.Cubby, verify: typeof core.verifyWebhook }));
`,
  );
  const result = await run('node', ['try.mjs'], { cwd: project, env: { ...process.env, CUBBY_URL: app.base, CUBBY_API_KEY: user.key } });
  expect(JSON.parse(result.trim())).toEqual({ text: 'hello from a fresh folder', code: expect.stringMatching(/NOT_FOUND/), core: 'function', verify: 'function' });

  // The types ship too: a TypeScript user gets them from the package.
  const dts = fs.readFileSync(path.join(project, 'node_modules/@cubby/sdk/dist/client.d.ts'), 'utf8');
  expect(dts).toContain('class Cubby');
});
