// `npm run bench:sites`: static files from the sites server of the real server (`node bin/cubby.js
// serve`, SQLite, fs store, fresh `chattr +T` run dir), against nginx in the same run, with the shared
// peer script (/work/shared/bench/static-peers.sh, wrk -t2 -c50 10 s per file after a 2 s warm-up).
// A bucket holds 10k.bin and 100k.bin (random bytes) and is published as a public site.
//
// Routing: the sites server routes by Host (`<slug>.<sites host>`), and wrk sends the URL's host and
// cannot resolve *.localhost. So the site's slug is `127` and CUBBY_SITES_HOST is `0.0.1:PORT`: the
// URL http://127.0.0.1:PORT/ is then that site's own origin, served through the normal Host routing.
//
// Progress on stderr; one JSON line on stdout. Env: STATIC_PEERS (path of static-peers.sh),
// DURATION/CONNS/WORKERS (passed to it; WORKERS default "1"), BENCH_SCRATCH, KEEP_RUN_DIR=1,
// SITE_ANALYTICS=off (serve without visit counting, for an A/B of its cost; default on).
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import fs from 'node:fs';
import { admin, adminUserAndKey, serveEnv, startServe, type ServeProcess } from '../test/serve-process.ts';
import { client, cpuSince, cpuSplit, gitCommit, log, makeRunDir, round, send, BENCH_DIR, freePort } from './lib.ts';
import { publishSite } from './site-publish.ts';

const STATIC_PEERS = process.env.STATIC_PEERS ?? path.resolve(BENCH_DIR, '../../shared/bench/static-peers.sh');

function runPeers(extraHttp: string): Promise<any> {
  return new Promise((resolve, reject) => {
    const env = { ...process.env, EXTRA_HTTP: extraHttp, EXTRA_NAME: 'cubby', WORKERS: process.env.WORKERS ?? '1' };
    const child = spawn('bash', [STATIC_PEERS], { env, stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.once('exit', (code) => {
      const line = out.trim().split('\n').pop() ?? '';
      if (code !== 0) return reject(new Error(`static-peers.sh exited with ${code}`));
      resolve(JSON.parse(line));
    });
  });
}

async function main() {
  const runDir = makeRunDir('sites');
  let server: ServeProcess | undefined;
  try {
    const port = await freePort();
    const env = serveEnv(path.join(runDir, 'data'), { CUBBY_SITES_PORT: String(port), CUBBY_SITES_HOST: `0.0.1:${port}`, CUBBY_ROLES: 'api,sites,worker', CUBBY_SITE_ANALYTICS: process.env.SITE_ANALYTICS === 'off' ? 'off' : 'on' });
    log(`run dir ${runDir}`);
    const { email, key } = await adminUserAndKey(env, 'paid');
    const status = (await admin(env, ['create-key', '--email', email])).account_id as string;
    await admin(env, ['set-publishing', '--account', status, '--enabled', 'true']);
    server = await startServe(env);
    log(`cubby serve pid ${server.pid} at ${server.base}, sites on port ${port}`);
    const api = client(server.base, key);
    const url = await publishSite(api, { '10k.bin': randomBytes(10 * 1024), '100k.bin': randomBytes(100 * 1024) });
    log(`site published at ${url}`);
    const check = await send('GET', `${url}10k.bin`, {});
    if (check.status !== 200) throw new Error(`site answers ${check.status}`);

    const cpu0 = cpuSplit(server.pid);
    server.resetPeak();
    const peers = await runPeers(url);
    const cpu = cpuSince(server.pid, cpu0);
    const nginx = peers.results.nginx_workers_1 ?? Object.values(peers.results)[0];
    const cubby = peers.results.cubby;
    const ratio = (f: '10k' | '100k') => round(cubby[f].req_per_s / nginx[f].req_per_s, 2);
    const result = {
      bench: 'sites',
      at: new Date().toISOString(),
      node: process.version,
      cpus: os.cpus().length,
      commit: gitCommit(),
      site_analytics: process.env.SITE_ANALYTICS === 'off' ? 'off' : 'on',
      cubby: { '10k': cubby['10k'], '100k': cubby['100k'], server_cpu_s_during_peers_run: cpu, server_peak_rss_mib: round(server.memory().hwm / 2 ** 20, 0) },
      nginx_workers_1: { '10k': nginx['10k'], '100k': nginx['100k'] },
      ratio_req_per_s: { '10k': ratio('10k'), '100k': ratio('100k') },
      goal_ratio: 0.5,
      peers,
    };
    process.stdout.write(`${JSON.stringify(result)}\n`);
  } finally {
    await server?.stop();
    if (!process.env.KEEP_RUN_DIR) fs.rmSync(runDir, { recursive: true, force: true });
  }
}

await main();
