// `npm run bench:sites-syscalls`: system calls and TCP segments per served request of the sites
// server, counted (not timed), so two builds can be compared on a loaded machine. The server is set
// up as for bench:sites (`node bin/cubby.js serve`, roles api,sites,worker, SQLite, a public site
// holding 10k.bin and 100k.bin, slug 127 routed by Host).
//
// A client in this process (node:http, CONNS keep-alive connections, requests back to back on each)
// sends WARMUP requests, then `strace -f -c -p PID` is attached to every thread of the server for N
// requests per file. Per request: the calls of each system call (the summary of strace -c), and from
// `ss -ti` on the server's side of the client's connections (before and after the window): data
// segments sent and bytes sent. With CONNS=1 the figures are exact; with more connections, how many
// ready sockets one epoll_wait returns depends on timing (strace slows the server), the rest does not.
// Time-driven work (timers, the job queue's polling) falls into the window too: IDLE_S seconds of the
// same attachment with no requests are reported beside it (calls per second).
//
// For another build: copy this file, bench/lib.ts and bench/site-publish.ts into its checkout and
// run `npx tsx bench/sites-syscalls.ts` there. Needs strace and ss (iproute2). One JSON line on stdout.
// Env: N (default 5000), WARMUP (default 3000), CONNS (default 1), FILES (default 10k.bin,100k.bin),
// IDLE_S (default 5, 0 to skip), SITE_ANALYTICS=off, KEEP_RUN_DIR=1.
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { admin, adminUserAndKey, serveEnv, startServe, type ServeProcess } from '../test/serve-process.ts';
import { client, freePort, gitCommit, log, makeRunDir, round } from './lib.ts';
import { publishSite } from './site-publish.ts';

const N = Number(process.env.N ?? 5000);
const WARMUP = Number(process.env.WARMUP ?? 3000);
const CONNS = Number(process.env.CONNS ?? 1);
const FILES = (process.env.FILES ?? '10k.bin,100k.bin').split(',');
const IDLE_S = Number(process.env.IDLE_S ?? 5);
const mode = process.env.SITE_ANALYTICS === 'off' ? 'off' : 'on';

const agent = new http.Agent({ keepAlive: true, maxSockets: CONNS });

function get(port: number, p: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path: p, agent, headers: { host: `127.0.0.1:${port}` } }, (res) => {
      if (res.statusCode !== 200) reject(new Error(`${p}: status ${res.statusCode}`));
      res.resume();
      res.on('end', () => resolve());
      res.on('error', reject);
    });
    req.on('error', reject);
  });
}

/** n requests over CONNS connections, each connection one request at a time. */
async function requests(port: number, p: string, n: number): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: CONNS }, async () => {
      while (next < n) {
        next++;
        await get(port, p);
      }
    }),
  );
}

/** Attaches strace -f -c to every thread of pid; stop() detaches and returns calls by system call. */
async function straceCount(pid: number, out: string): Promise<{ stop(): Promise<Record<string, number>> }> {
  const child = spawn('strace', ['-f', '-c', '-p', String(pid), '-o', out], { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  // strace reports each thread it attached to on stderr; wait for the first one.
  await new Promise<void>((resolve, reject) => {
    child.stderr.on('data', (d: Buffer) => {
      err += d.toString();
      if (/attached/.test(err)) resolve();
    });
    child.once('exit', (code) => reject(new Error(`strace exited with ${code}: ${err}`)));
  });
  await new Promise((r) => setTimeout(r, 200)); // the rest of the threads
  return {
    async stop() {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGINT');
      await exited;
      const calls: Record<string, number> = {};
      for (const line of fs.readFileSync(out, 'utf8').split('\n')) {
        // % time, seconds, usecs/call, calls, [errors,] syscall
        const m = /^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?([a-z_0-9]+)\s*$/.exec(line);
        if (m && m[2] !== 'total') calls[m[2]!] = Number(m[1]);
      }
      return calls;
    },
  };
}

/** Data segments and bytes the server sent on its established connections on port. */
function segments(port: number): { segs: number; bytes: number; conns: number } {
  const text = execFileSync('ss', ['-tinH', 'state', 'established', `( sport = :${port} )`], { encoding: 'utf8' });
  let segs = 0;
  let bytes = 0;
  let conns = 0;
  for (const m of text.matchAll(/data_segs_out:(\d+)/g)) (segs += Number(m[1])), conns++;
  for (const m of text.matchAll(/bytes_sent:(\d+)/g)) bytes += Number(m[1]);
  return { segs, bytes, conns };
}

const perRequest = (calls: Record<string, number>, n: number) =>
  Object.fromEntries(
    Object.entries(calls)
      .sort((a, b) => b[1] - a[1])
      .map(([k, v]) => [k, round(v / n, 3)]),
  );

async function main() {
  const runDir = makeRunDir('sites-sys');
  let server: ServeProcess | undefined;
  const result: Record<string, unknown> = { bench: 'sites-syscalls', at: new Date().toISOString(), node: process.version, commit: gitCommit(), site_analytics: mode, n: N, warmup: WARMUP, conns: CONNS };
  try {
    const port = await freePort();
    const env = serveEnv(path.join(runDir, 'data'), { CUBBY_SITES_PORT: String(port), CUBBY_SITES_HOST: `0.0.1:${port}`, CUBBY_ROLES: 'api,sites,worker', CUBBY_SITE_ANALYTICS: mode });
    log(`run dir ${runDir}`);
    const { email, key } = await adminUserAndKey(env, 'paid');
    const account = (await admin(env, ['create-key', '--email', email])).account_id as string;
    await admin(env, ['set-publishing', '--account', account, '--enabled', 'true']);
    server = await startServe(env);
    await publishSite(client(server.base, key), { '10k.bin': randomBytes(10 * 1024), '100k.bin': randomBytes(100 * 1024) });
    log(`cubby serve pid ${server.pid}, site on port ${port}`);
    for (const file of FILES) {
      await requests(port, `/${file}`, WARMUP);
      const before = segments(port);
      const trace = await straceCount(server.pid, path.join(runDir, `strace-${file}.txt`));
      await requests(port, `/${file}`, N);
      const calls = await trace.stop();
      const after = segments(port);
      const total = Object.values(calls).reduce((a, b) => a + b, 0);
      result[file] = {
        syscalls_per_request: round(total / N, 3),
        by_call: perRequest(calls, N),
        data_segments_per_response: round((after.segs - before.segs) / N, 3),
        bytes_per_response: round((after.bytes - before.bytes) / N, 1),
        connections: after.conns,
      };
      log(`${file}: ${round(total / N, 3)} system calls and ${round((after.segs - before.segs) / N, 3)} data segments per request`);
    }
    if (IDLE_S > 0) {
      const trace = await straceCount(server.pid, path.join(runDir, 'strace-idle.txt'));
      await new Promise((r) => setTimeout(r, IDLE_S * 1000));
      const calls = await trace.stop();
      result.idle_calls_per_second = Object.fromEntries(Object.entries(calls).sort((a, b) => b[1] - a[1]).map(([k, v]) => [k, round(v / IDLE_S, 1)]));
    }
  } finally {
    agent.destroy();
    await server?.stop();
    if (!process.env.KEEP_RUN_DIR) fs.rmSync(runDir, { recursive: true, force: true });
  }
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

await main();
