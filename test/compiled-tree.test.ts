import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rewriteSpecifiers } from '../bin/compiled.js';
import { adminUserAndKey, childEnv, serveEnv, startServe, type ServeProcess } from './serve-process.ts';
import { sendMail } from './smtp-helpers.ts';
import type { TestApp } from './harness.ts';

// bin/cubby.js runs the program from a compiled tree (bin/compiled.js) that it builds on first use
// and again whenever a source changes, and falls back to tsx when it cannot. Builds run in child
// processes, as bin/cubby.js runs them, into folders of the test's own (CUBBY_BUILD_DIR).

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const COMPILED = path.join(ROOT, 'bin/compiled.js');
const run = promisify(execFile);

/**
 * compiledTree() in a fresh process: its answer (a folder, or null), how it ended, and the child
 * processes it still had afterwards (esbuild's service must be stopped once the tree is built).
 */
async function buildIn(env: Record<string, string>, root?: string): Promise<{ tree: string | null; code: number; stderr: string; children?: string }> {
  const script = [
    `const { compiledTree } = await import(${JSON.stringify(COMPILED)});`,
    `const tree = await compiledTree(process.env${root ? `, ${JSON.stringify(root)}` : ''});`,
    'const fs = await import("node:fs");',
    // esbuild's stop() returns before its process has exited: give it up to 5 s to go.
    'const childrenNow = () => fs.readFileSync("/proc/" + process.pid + "/task/" + process.pid + "/children", "utf8").trim();',
    'let children = childrenNow();',
    'for (const until = Date.now() + 5000; children && Date.now() < until; children = childrenNow()) await new Promise((r) => setTimeout(r, 20));',
    'console.log(JSON.stringify(tree));',
    'console.log(JSON.stringify(children));',
  ].join('\n');
  try {
    const { stdout, stderr } = await run(process.execPath, ['--input-type=module', '-e', script], { env: childEnv(env), cwd: os.tmpdir(), timeout: 60_000 });
    const [tree, left] = stdout.trim().split('\n').map((line) => JSON.parse(line));
    return { tree, code: 0, stderr, children: left };
  } catch (err) {
    const e = err as { code: number; stderr: string };
    return { tree: null, code: e.code, stderr: e.stderr };
  }
}

/** Every .js file under `dir` (not through the tree's link to node_modules). */
function jsFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const full = path.join(dir, e.name);
    if (e.isDirectory()) return jsFiles(full);
    return e.isFile() && e.name.endsWith('.js') ? [full] : [];
  });
}

describe('rewriteSpecifiers', () => {
  it('turns relative .ts specifiers into .js and leaves every other string alone', () => {
    const code = [
      'import { a } from "./a.ts";',
      'export * from "../../db/schema.ts";',
      'const m = await import("../app.ts");',
      'new URL("./analyze-worker.ts", import.meta.url);',
      'import "kysely";',
      'const bare = "schema.ts";',
      'const abs = "/etc/x.ts";',
      'const tsx = "./view.tsx";',
      'const multi = "./a.ts b.ts";',
    ].join('\n');
    expect(rewriteSpecifiers(code).split('\n')).toEqual([
      'import { a } from "./a.js";',
      'export * from "../../db/schema.js";',
      'const m = await import("../app.js");',
      'new URL("./analyze-worker.js", import.meta.url);',
      'import "kysely";',
      'const bare = "schema.ts";',
      'const abs = "/etc/x.ts";',
      'const tsx = "./view.tsx";',
      'const multi = "./a.ts b.ts";',
    ]);
  });
});

describe('the compiled tree', () => {
  let dir: string;
  let tree: string;
  let server: ServeProcess | undefined;

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cubby-compiled-'));
    // Three processes build into one empty folder at once, as parallel first starts do.
    const builds = await Promise.all([1, 2, 3].map(() => buildIn({ CUBBY_BUILD_DIR: path.join(dir, 'cache') })));
    for (const b of builds) {
      expect(b.code, b.stderr).toBe(0);
      expect(b.children, 'esbuild service left running').toBe('');
    }
    tree = builds[0]!.tree!;
    expect(builds.map((b) => b.tree)).toEqual([tree, tree, tree]);
  }, 120_000);

  afterAll(async () => {
    await server?.stop();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('holds every source as JavaScript beside the copied files, with no partial build left behind', () => {
    expect(fs.readdirSync(path.join(dir, 'cache'))).toEqual([path.basename(tree)]);
    for (const rel of ['src/app.js', 'src/cli/main.js', 'src/inbound/analyze-worker.js', 'src/inbound/analyze-worker-boot.mjs', 'src/blobs/blob-writer-thread.mjs', 'src/web/assets/app.css', 'packages/sdk/src/node.js', 'package.json']) {
      expect(fs.existsSync(path.join(tree, rel)), rel).toBe(true);
    }
    expect(fs.existsSync(path.join(tree, 'src/app.ts'))).toBe(false);
    const stale = jsFiles(tree).filter((f) => /"\.{1,2}\/[^"\n]*\.ts"/.test(fs.readFileSync(f, 'utf8')));
    expect(stale).toEqual([]);
    expect(JSON.parse(fs.readFileSync(path.join(tree, 'package.json'), 'utf8')).version).toBe(JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')).version);
  });

  it('is reused while the sources are unchanged', async () => {
    const before = fs.statSync(path.join(tree, 'src/app.js')).mtimeMs;
    const again = await buildIn({ CUBBY_BUILD_DIR: path.join(dir, 'cache') });
    expect(again.tree).toBe(tree);
    expect(fs.statSync(path.join(tree, 'src/app.js')).mtimeMs).toBe(before);
  });

  it('is built afresh when a source is edited, added or removed', async () => {
    // A repository of its own: two modules, one importing the other by its .ts name.
    const repo = path.join(dir, 'repo');
    fs.mkdirSync(path.join(repo, 'src'), { recursive: true });
    fs.writeFileSync(path.join(repo, 'package.json'), JSON.stringify({ type: 'module', version: '9.9.9' }));
    fs.writeFileSync(path.join(repo, 'src/main.ts'), "import { word } from './word.ts';\nconst n: number = 1;\nconsole.log(word, n);\n");
    fs.writeFileSync(path.join(repo, 'src/word.ts'), "export const word: string = 'first';\n");
    const env = { CUBBY_BUILD_DIR: path.join(dir, 'repo-cache') };
    const runMain = async (t: string) => (await run(process.execPath, [path.join(t, 'src/main.js')])).stdout.trim();

    const first = (await buildIn(env, repo)).tree!;
    expect(await runMain(first)).toBe('first 1');
    fs.writeFileSync(path.join(repo, 'src/word.ts'), "export const word: string = 'second!';\n");
    const second = (await buildIn(env, repo)).tree!;
    expect(second).not.toBe(first);
    expect(await runMain(second)).toBe('second! 1');
    fs.writeFileSync(path.join(repo, 'src/extra.ts'), 'export {};\n');
    const third = (await buildIn(env, repo)).tree!;
    expect(third).not.toBe(second);
    fs.rmSync(path.join(repo, 'src/extra.ts'));
    expect((await buildIn(env, repo)).tree).toBe(second);

    // Pruning: trees and partial builds unused for a day go with the next build; anything else
    // in the folder stays, however old (CUBBY_BUILD_DIR may name a folder shared with other files).
    const cache = env.CUBBY_BUILD_DIR;
    const old = new Date(Date.now() - 2 * 24 * 3600_000);
    fs.writeFileSync(path.join(cache, 'keep-me.txt'), 'not a tree');
    fs.mkdirSync(path.join(cache, 'keep-me-too'));
    fs.mkdirSync(path.join(cache, `${'a'.repeat(20)}.partial-123-0badcafe`));
    for (const name of ['keep-me.txt', 'keep-me-too', `${'a'.repeat(20)}.partial-123-0badcafe`, path.basename(first)]) fs.utimesSync(path.join(cache, name), old, old);
    fs.writeFileSync(path.join(repo, 'src/word.ts'), "export const word: string = 'third';\n");
    const fourth = (await buildIn(env, repo)).tree!;
    expect(await runMain(fourth)).toBe('third 1');
    expect(fs.readdirSync(cache).sort()).toEqual([path.basename(fourth), path.basename(second), path.basename(third), 'keep-me-too', 'keep-me.txt'].sort());
  });

  it('falls back to the sources when it cannot be written, unless CUBBY_RUNTIME=compiled insists', async () => {
    const blocker = path.join(dir, 'a-file');
    fs.writeFileSync(blocker, '');
    const unwritable = path.join(blocker, 'cache');
    expect(await buildIn({ CUBBY_BUILD_DIR: unwritable })).toMatchObject({ tree: null, code: 0 });
    const insisted = await buildIn({ CUBBY_BUILD_DIR: unwritable, CUBBY_RUNTIME: 'compiled' });
    expect(insisted.code).not.toBe(0);
    expect(insisted.stderr).toMatch(/ENOTDIR/);
    expect(await buildIn({ CUBBY_BUILD_DIR: path.join(dir, 'cache'), CUBBY_RUNTIME: 'tsx' })).toMatchObject({ tree: null, code: 0 });
    // The program still runs, from its sources.
    const version = await run(process.execPath, [path.join(ROOT, 'bin/cubby.js'), '--version'], { env: childEnv({ CUBBY_BUILD_DIR: unwritable }) });
    expect(version.stdout.trim()).toBe(JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')).version);
    expect(version.stderr).toBe('');
    // A server says why it runs from the sources.
    const fallback = await startServe(serveEnv(path.join(dir, 'data-fallback'), { CUBBY_BUILD_DIR: unwritable, CUBBY_LOG_LEVEL: 'info' }));
    try {
      await fallback.waitForOutput(/running the TypeScript sources through tsx: the compiled tree could not be built \(ENOTDIR/);
      await fallback.waitForOutput(/"runtime":"sources"[^\n]*"msg":"started"/);
    } finally {
      await fallback.stop();
    }
  }, 60_000);

  it('serves from the compiled tree: mail is analyzed on a thread that runs the compiled module', async () => {
    const env = serveEnv(path.join(dir, 'data'), { CUBBY_BUILD_DIR: path.join(dir, 'cache'), CUBBY_LOG_LEVEL: 'info' });
    const { key } = await adminUserAndKey(env, 'paid');
    server = await startServe(env);
    await server.waitForOutput(/"runtime":"compiled"[^\n]*"msg":"started"/);
    const api = async (method: string, url: string, body?: unknown) => {
      const res = await fetch(new URL(url, server!.base), { method, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
      return { status: res.status, body: await res.json() };
    };
    const box = await api('POST', '/v1/mailboxes', { mailbox: { title: 'compiled' } });
    expect(box.status).toBe(201);
    const sent = await sendMail({ started: { ports: { smtp: server.smtpPort } } } as unknown as TestApp, { to: box.body.data.mailbox.email.address, subject: 'From the compiled tree' });
    expect(sent.emailIds).toHaveLength(1);
    const metrics = await (await fetch(new URL('/metrics', server.base))).text();
    expect(metrics).toMatch(/^cubby_smtp_analyses_total\{on="thread"\} 1$/m);
    expect(metrics).not.toMatch(/^cubby_smtp_analyses_total\{on="event_loop"\} [1-9]/m);
    const emails = await api('GET', `/v1/mailboxes/${box.body.data.mailbox.id}/emails`);
    // Parsed by the thread: the headers are there (the subject stays withheld until labeled).
    expect(emails.body.data.emails).toMatchObject([{ id: sent.emailIds[0], to_addresses: [{ address: box.body.data.mailbox.email.address }] }]);
  }, 120_000);
});
