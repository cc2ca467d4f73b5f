// `npm run bench:api`: what an authenticated API call costs the real server (`node bin/cubby.js
// serve`, SQLite, fs store, in a fresh `chattr +T` run dir under bench/.tmp). Every call carries
// an API key, so each one authenticates (the key, its grants, the account it selects) before its
// own work: this measures that per-call path, which every API client pays.
//   GET /v1/mailboxes/{id} (one mailbox of a key with one account) and GET /api/v1/buckets/{id}
//   (the same on surface A), REQUESTS of each after WARMUP, CONCURRENCY in flight over keep-alive.
// Prints one JSON line: per route, requests/s, client-side latency p50/p90/p99 and the server's CPU
// per request (all threads, and the event loop's thread). Env: REQUESTS (5000), WARMUP (1000),
// CONCURRENCY (8), SERVE_NODE_ARGS (node options for the server, e.g. "--cpu-prof --cpu-prof-dir=…"),
// SERVE_STDOUT_FILE (keeps the server's stdout: V8's traces).
import os from 'node:os';
import path from 'node:path';
import fs from 'node:fs';
import { admin, adminUserAndKey, serveEnv, startServe, type ServeProcess } from '../test/serve-process.ts';
import { percentile } from './smtp-client.ts';
import { client, clientCpu, cpuSince, cpuSplit, gitCommit, inParallel, log, makeRunDir, round, send, serveOptions } from './lib.ts';

const whole = (name: string, fallback: number, max: number) => {
  const n = Number(process.env[name] ?? fallback);
  if (!Number.isInteger(n) || n < 1 || n > max) throw new Error(`${name} must be a whole number from 1 to ${max}, not ${process.env[name]}`);
  return n;
};
const REQUESTS = whole('REQUESTS', 5000, 1_000_000);
const WARMUP = whole('WARMUP', 1000, 1_000_000);
const CONCURRENCY = whole('CONCURRENCY', 8, 8); // lib.ts's agent keeps at most 8 sockets

/**
 * Calls go round the keys: each key may make 6,000 calls a minute (the pilot plan's rate limit, which
 * every call checks, as it should), and a run makes more.
 */
const KEYS = 8;

async function measure(server: ServeProcess, keys: string[], url: string) {
  let turn = 0;
  const one = async () => {
    const key = keys[turn++ % keys.length]!;
    const res = await send('GET', url, { authorization: `Bearer ${key}`, accept: 'application/json' });
    if (res.status !== 200) throw new Error(`GET ${url}: ${res.status} ${res.text.slice(0, 300)}`);
  };
  await inParallel(Array.from({ length: WARMUP }), CONCURRENCY, one);
  const latencies: number[] = [];
  const cpu0 = cpuSplit(server.pid);
  const client0 = process.cpuUsage();
  const t0 = performance.now();
  await inParallel(Array.from({ length: REQUESTS }), CONCURRENCY, async () => {
    const t = performance.now();
    await one();
    latencies.push(performance.now() - t);
  });
  const wall = (performance.now() - t0) / 1000;
  const cpu = cpuSince(server.pid, cpu0);
  const ms = (p: number) => round(percentile(latencies, p)!, 2);
  return {
    requests: REQUESTS,
    requests_per_s: round(REQUESTS / wall, 0),
    latency_ms: { p50: ms(50), p90: ms(90), p99: ms(99) },
    server_cpu_ms_per_request: { all: round((cpu.all * 1000) / REQUESTS, 3), main_thread: round((cpu.main_thread * 1000) / REQUESTS, 3) },
    client_cpu_s: clientCpu(process.cpuUsage(client0)),
  };
}

async function main() {
  const runDir = makeRunDir('api');
  let server: ServeProcess | undefined;
  try {
    const env = serveEnv(path.join(runDir, 'data'));
    const { email, key } = await adminUserAndKey(env, 'pilot');
    const keys = [key];
    while (keys.length < KEYS) keys.push((await admin(env, ['create-key', '--email', email])).api_key);
    server = await startServe(env, serveOptions());
    log(`cubby serve pid ${server.pid} at ${server.base}`);
    const api = client(server.base, key);
    const bucket = (await api('POST', '/api/v1/buckets', { bucket: { title: `bench ${Date.now()}` } })).data.bucket;
    log(`GET /v1/mailboxes/{id}: ${WARMUP} to warm up, then ${REQUESTS}, ${CONCURRENCY} at a time`);
    const mailboxR = await measure(server, keys, `${server.base}/v1/mailboxes/${bucket.id}`);
    log(`    ${mailboxR.requests_per_s} requests/s, ${mailboxR.server_cpu_ms_per_request.all} ms of server CPU each`);
    log(`GET /api/v1/buckets/{id}: the same`);
    const bucketA = await measure(server, keys, `${server.base}/api/v1/buckets/${bucket.id}`);
    log(`    ${bucketA.requests_per_s} requests/s, ${bucketA.server_cpu_ms_per_request.all} ms of server CPU each`);
    const result = {
      bench: 'api',
      at: new Date().toISOString(),
      node: process.version,
      cpus: os.cpus().length,
      commit: gitCommit(),
      concurrency: CONCURRENCY,
      warmup: WARMUP,
      get_mailbox_r: mailboxR,
      get_bucket_a: bucketA,
    };
    process.stdout.write(`${JSON.stringify(result)}\n`);
  } finally {
    await server?.stop();
    if (!process.env.KEEP_RUN_DIR) fs.rmSync(runDir, { recursive: true, force: true });
  }
}

await main();
