// `npm run bench:sites-instructions`: CPU instructions the sites server executes per served
// request, counted by valgrind's callgrind (repeatable whatever the machine's load, unlike
// wall-clock figures). For an A/B of site analytics: run with SITE_ANALYTICS=on and =off (same
// build), or from another checkout (copy this file and bench/site-publish.ts there).
//
// 1. The real server (`node bin/cubby.js serve`, SQLite, roles api,sites,worker) publishes a public
//    site holding 10k.bin, 100k.bin and index.html (bench/site-publish.ts), then stops.
// 2. `valgrind --tool=callgrind --instr-atstart=no node --no-memory-reducer --single-threaded-gc bin/cubby.js serve` on the same data dir
//    with the sites role alone: nothing but the sites server runs in that process.
// 3. A client in this process (node:http, one keep-alive connection, one request at a time: the
//    same work for every run) sends WARMUP requests (instrumentation off: the JIT settles), then
//    `callgrind_control -i on`, N requests, `callgrind_control -i off`, per kind of request:
//    `asset` (GET /10k.bin: what bench:sites serves), `asset100k` (GET /100k.bin) and `page`
//    (GET /index.html with a browser user agent and an outside Referer: a page view; 50 distinct
//    client addresses via X-Forwarded-For so visitors are hashed and counted).
//    Each window is dumped on its own (`callgrind_control -d`); Ir of the dump / N is the figure,
//    REPEAT windows per kind (a major GC falls into some windows only: mean, median and range).
//
// One JSON line on stdout; the callgrind files stay in the run dir with KEEP_RUN_DIR=1
// (`callgrind_annotate FILE` shows where the instructions went). Env: N (default 2000), WARMUP
// (default 4000), REPEAT (measured windows per kind, default 5), SITE_ANALYTICS=off, KINDS (default
// asset,asset100k,page).
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { admin, adminUserAndKey, serveEnv, startServe } from '../test/serve-process.ts';
import { client, gitCommit, log, makeRunDir, round, freePort } from './lib.ts';
import { publishSite } from './site-publish.ts';

const N = Number(process.env.N ?? 2000);
const WARMUP = Number(process.env.WARMUP ?? 4000);
const REPEAT = Number(process.env.REPEAT ?? 5);
const KINDS = (process.env.KINDS ?? 'asset,asset100k,page').split(',');
// V8's memory reducer starts full GCs when the allocation rate per second of wall time is low, which
// it is under valgrind (10-50x slower): they would count against whichever window they fall into.
// Single-threaded GC keeps the collector's work on the main thread, the same from run to run.
const NODE_FLAGS = ['--no-memory-reducer', '--single-threaded-gc'];
const BIN = fileURLToPath(new URL('../bin/cubby.js', import.meta.url));
const mode = process.env.SITE_ANALYTICS === 'off' ? 'off' : 'on';

const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
const UA = 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36';

/** One GET; a kept-alive connection the server closed while idle (a dump can take seconds) is retried once. */
async function get(port: number, p: string, headers: Record<string, string>): Promise<number> {
  try {
    return await getOnce(port, p, headers);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ECONNRESET') throw err;
    return getOnce(port, p, headers);
  }
}

function getOnce(port: number, p: string, headers: Record<string, string>): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path: p, agent, headers: { host: `127.0.0.1:${port}`, ...headers } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
      res.on('error', reject);
    });
    req.on('error', reject);
  });
}

async function requests(port: number, kind: string, n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    const status =
      kind === 'page'
        ? await get(port, '/index.html', { 'user-agent': UA, referer: 'https://news.example.com/item?id=1', 'x-forwarded-for': `198.51.100.${i % 50}` })
        : await get(port, kind === 'asset' ? '/10k.bin' : '/100k.bin', { 'user-agent': UA });
    if (status !== 200) throw new Error(`${kind}: status ${status}`);
  }
}

function totalIr(file: string): number {
  const text = fs.readFileSync(file, 'utf8');
  const m = /^totals:\s+(\d+)/m.exec(text);
  if (!m) throw new Error(`no totals in ${file}`);
  return Number(m[1]);
}

async function main() {
  const runDir = makeRunDir('sites-instr');
  const port = await freePort();
  const env = serveEnv(path.join(runDir, 'data'), { CUBBY_SITES_PORT: String(port), CUBBY_SITES_HOST: `0.0.1:${port}`, CUBBY_ROLES: 'api,sites,worker' });
  log(`run dir ${runDir}`);
  const { email, key } = await adminUserAndKey(env, 'paid');
  const account = (await admin(env, ['create-key', '--email', email])).account_id as string;
  await admin(env, ['set-publishing', '--account', account, '--enabled', 'true']);
  const publisher = await startServe(env);
  const page = Buffer.from(`<!doctype html><title>bench</title><p>${'x'.repeat(2000)}</p>\n`);
  await publishSite(client(publisher.base, key), { '10k.bin': randomBytes(10 * 1024), '100k.bin': randomBytes(100 * 1024), 'index.html': page });
  await publisher.stop();

  const out = path.join(runDir, 'callgrind.out');
  const childEnv = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('CUBBY_')));
  const child = spawn('valgrind', ['--tool=callgrind', '--instr-atstart=no', `--callgrind-out-file=${out}.%p`, process.execPath, ...NODE_FLAGS, BIN, 'serve'], {
    env: { ...childEnv, ...env, CUBBY_ROLES: 'sites', CUBBY_TRUST_PROXY_HOPS: '1', CUBBY_SITE_ANALYTICS: mode },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let seen = '';
  const started = new Promise<void>((resolve, reject) => {
    const on = (d: Buffer) => {
      seen = (seen + d.toString()).slice(-50_000);
      if (/^\s+Data:\s+\S+/m.test(seen)) resolve();
    };
    child.stdout.on('data', on);
    child.stderr.on('data', on);
    child.once('exit', (code) => reject(new Error(`server under valgrind exited with ${code}:\n${seen}`)));
  });
  const result: Record<string, unknown> = { bench: 'sites-instructions', at: new Date().toISOString(), node: process.version, commit: gitCommit(), site_analytics: mode, n: N, warmup: WARMUP, measure: 'valgrind --tool=callgrind Ir (instructions executed) of the server process', node_flags: NODE_FLAGS };
  try {
    await started;
    log(`server under callgrind, pid ${child.pid}, analytics ${mode}`);
    const ctl = (...args: string[]) => execFileSync('callgrind_control', [...args, String(child.pid)], { stdio: 'ignore' });
    for (const kind of KINDS) {
      await requests(port, kind, WARMUP);
      const windows: number[] = [];
      for (let w = 0; w < REPEAT; w++) {
        ctl('-z');
        ctl('-i', 'on');
        await requests(port, kind, N);
        ctl('-i', 'off');
        const before = new Set(fs.readdirSync(runDir));
        ctl('-d', `${kind}-${w}`);
        const dump = fs.readdirSync(runDir).find((f) => !before.has(f) && f.startsWith('callgrind.out'));
        if (!dump) throw new Error('callgrind_control -d wrote no file');
        const ir = totalIr(path.join(runDir, dump));
        windows.push(Math.round(ir / N));
        log(`${kind} window ${w + 1}/${REPEAT}: ${round(ir / N / 1000, 1)} k instructions per request (${dump})`);
      }
      const sorted = [...windows].sort((a, b) => a - b);
      // Mean: the whole run's instructions over its requests (a major GC lands in some windows only).
      result[kind] = { mean_per_request: Math.round(windows.reduce((a, b) => a + b, 0) / windows.length), median_per_request: sorted[Math.floor(sorted.length / 2)], min: sorted[0], max: sorted.at(-1), windows };
    }
  } finally {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
    }
    agent.destroy();
    if (!process.env.KEEP_RUN_DIR) fs.rmSync(runDir, { recursive: true, force: true });
  }
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

await main();
