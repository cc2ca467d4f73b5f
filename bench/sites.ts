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
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import fs from 'node:fs';
import { admin, adminUserAndKey, serveEnv, startServe, type ServeProcess } from '../test/serve-process.ts';
import { client, cpuSince, cpuSplit, gitCommit, log, makeRunDir, round, send, BENCH_DIR } from './lib.ts';
import { createHash } from 'node:crypto';

const STATIC_PEERS = process.env.STATIC_PEERS ?? path.resolve(BENCH_DIR, '../../shared/bench/static-peers.sh');
const md5 = (b: Buffer) => createHash('md5').update(b).digest('base64');
const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

/** Uploads the two files through an upload session and publishes them; resolves with the site URL. */
async function publishSite(api: ReturnType<typeof client>, files: Record<string, Buffer>): Promise<string> {
  const bucket = (await api('POST', '/api/v1/buckets', { bucket: { title: `bench site ${Date.now()}` } })).data.bucket;
  const base = `/api/v1/buckets/${bucket.id}/upload_sessions`;
  const session = (await api('POST', base, { expected_file_count: 2, delete_missing: false })).data.upload_session;
  const entries = Object.entries(files);
  const declared = await api('POST', `${base}/${session.id}/uploads`, {
    files: entries.map(([p, b]) => ({ path: p, name: p, byte_size: b.length, content_type: 'application/octet-stream', checksum: md5(b), sha256: sha256(b) })),
  });
  for (const u of declared.data.uploads) {
    const res = await send('PUT', u.upload.url, u.upload.headers, entries[u.input_index]![1]);
    if (res.status !== 200) throw new Error(`PUT ${res.status} ${res.text}`);
  }
  await api('POST', `${base}/${session.id}/finalize_batch`, { limit: 12 });
  while ((await api('POST', `${base}/${session.id}/finalize`, { complete: true })).data.finalize_pending);
  let p = (await api('POST', `/api/v1/buckets/${bucket.id}/publication`, { site_mode: 'static', access_mode: 'public', slug_suggestions: ['127'] })).data.publication;
  if (p.public_slug !== '127') throw new Error(`slug 127 was not free: ${p.public_slug}`);
  // The CLI polls every 2 s; a bench may poll faster.
  while (p.publish_state === 'queued' || p.publish_state === 'processing') {
    await new Promise((r) => setTimeout(r, 100));
    p = (await api('GET', `/api/v1/publications/${p.id}`)).data.publication;
  }
  if (p.publish_state !== 'ready') throw new Error(`build ${p.publish_state}: ${p.publish_error}`);
  return `${p.public_url}/`;
}

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
