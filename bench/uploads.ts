// `npm run bench:uploads`: upload throughput of the real server (`node bin/cubby.js serve`, SQLite,
// fs store) in a fresh `chattr +T` run dir under bench/.tmp (see /work/shared/bench/README.md).
//   (a) 1,000 × 4 KiB random files through one surface A upload session: descriptors in batches
//       of BATCH (12, the figure every earlier run used; the SDK and `cubby sync` send 50), PUTs 8 at
//       a time with exactly the returned headers, finalize_batch of the batch after its PUTs, then
//       finalize {complete:true} until not pending. Each save runs while the next batch is declared
//       and uploaded, as the SDK does (PIPELINE=0: waits for it, as figures before 2026-11-27 did);
//       the next declaration is sent just before the save (DECLARE_FIRST=0: just after, as figures
//       before 2026-12-03). Each call's time from the client's side is in `call_ms`.
//   (c) the same through the real CLI: `cubby sync DIR MAILBOX:` of SMALL_FILES × 4 KiB files on
//       disk, and of a folder holding the 1 GiB file, each a child process timed from spawn to
//       exit (its start-up included) and by its own `seconds`, beside (a) and (b) of the same
//       run, with the ratios. The CLI also hashes (both checksums, one pass) before it PUTs;
//       (b)'s client knew the digests already. CLI=0 skips it.
//   (b) one 1 GiB PUT of random data (generated into /dev/shm first) and its download through
//       the download link, with the server's RSS; and `dd … conv=fsync` of the same bytes to the
//       same folder just before and just after the PUT, as the limit (their mean).
//   After (a), its peer: as many 4 KiB PUTs to a plain durable file server (bench/upload-peer.mjs,
//       a durable create per PUT), with `small_files_to_peer_ratio`; PEER=0 skips it.
// Progress goes to stderr; one JSON line to stdout. Env: SMALL_FILES, WARMUP_FILES, BATCH, PIPELINE, DECLARE_FIRST, PUTS (PUTs in flight, default 8), PEER, LARGE_MIB, BENCH_SCRATCH,
// KEEP_RUN_DIR=1 (keep the run dir), SERVE_NODE_ARGS (node options for the server, e.g.
// "--cpu-prof --cpu-prof-dir=/tmp/prof"), SERVE_STDOUT_FILE (keeps the server's stdout: V8's traces).
import { spawn, spawnSync } from 'node:child_process';
import { createCipheriv, createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { adminUserAndKey, serveEnv, startServe, type ServeProcess } from '../test/serve-process.ts';
import { getHashed, putStream } from '../test/stream-http.ts';
import { percentile } from './smtp-client.ts';
import { client, clientCpu, cpuSeconds, cpuSince, cpuSplit, gitCommit, hostCpu, hostCpuBetween, inParallel, log, machineSpeed, makeRunDir, round, send, serveOptions } from './lib.ts';

const SMALL_FILES = Number(process.env.SMALL_FILES ?? 1000);
const SMALL_BYTES = 4096;
/**
 * WARMUP_FILES=N: N files through a session of their own (another mailbox) before (a) is timed, as
 * the SMTP harness sends 300 messages before it times: (a) then measures a server whose upload
 * path V8 has already compiled, as a server that has been up a while. Default 0: (a) is the first
 * upload after boot, as every figure before 2026-12-03 was taken.
 */
const WARMUP_FILES = Number(process.env.WARMUP_FILES ?? 0);
if (!Number.isInteger(WARMUP_FILES) || WARMUP_FILES < 0 || WARMUP_FILES > 100_000) throw new Error(`WARMUP_FILES must be a whole number from 0 to 100000, not ${process.env.WARMUP_FILES}`);
/** Files per declaration and per finalize_batch (the API takes 1–100). */
const BATCH = Number(process.env.BATCH ?? 12);
if (!Number.isInteger(BATCH) || BATCH < 1 || BATCH > 100) throw new Error(`BATCH must be a whole number from 1 to 100, not ${process.env.BATCH}`);
/**
 * PIPELINE=1: each finalize_batch runs while the next batch is declared and uploaded (one save at a
 * time, awaited before the next), as the SDK and `cubby sync` do since 2026-11-27; PIPELINE=0 waits
 * for each save before the next batch, as every earlier figure was taken.
 */
const PIPELINE = process.env.PIPELINE !== '0';
/**
 * Once a batch's PUTs are done, the next batch's declaration is sent before this batch's
 * finalize_batch (the service answers it first, and the next PUTs start while the batch is saved),
 * as the SDK and `cubby sync` do since 2026-12-03; DECLARE_FIRST=0 sends it after, as before.
 */
const DECLARE_FIRST = process.env.DECLARE_FIRST !== '0';
/** PUTs in flight (the SDK's default concurrency is 8). */
const PUTS = Number(process.env.PUTS ?? 8);
if (!Number.isInteger(PUTS) || PUTS < 1 || PUTS > 64) throw new Error(`PUTS must be a whole number from 1 to 64, not ${process.env.PUTS}`);
const LARGE_MIB = Number(process.env.LARGE_MIB ?? 1024);
const LARGE_BYTES = LARGE_MIB * 1024 * 1024;
const MB = 1e6;

const md5 = (b: Buffer) => createHash('md5').update(b).digest('base64');
const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

async function timed<T>(fn: () => Promise<T>): Promise<[T, number]> {
  const t = performance.now();
  const out = await fn();
  return [out, (performance.now() - t) / 1000];
}

/** (a) Small files through one upload session, as the CLI does it. */
async function smallFiles(server: ServeProcess, api: ReturnType<typeof client>, count = SMALL_FILES) {
  const files = Array.from({ length: count }, (_, i) => {
    const bytes = randomBytes(SMALL_BYTES);
    return { path: `small/${String(Math.floor(i / 100)).padStart(2, '0')}/f-${String(i).padStart(4, '0')}.bin`, bytes };
  });
  const bucket = (await api('POST', '/api/v1/buckets', { bucket: { title: `bench ${Date.now()}` } })).data.bucket;
  const base = `/api/v1/buckets/${bucket.id}/upload_sessions`;
  const phases = { session: 0, descriptors: 0, puts: 0, finalize_batch: 0, finalize: 0 };
  const phaseCpu = { ...phases };
  /** Each call's time from the client's side, by kind: where the session's wall time goes. */
  const calls = { declare: [] as number[], put: [] as number[], finalize_batch: [] as number[] };
  const clocked = async <T>(kind: keyof typeof calls, call: () => Promise<T>): Promise<T> => {
    const t = performance.now();
    const out = await call();
    calls[kind].push(performance.now() - t);
    return out;
  };
  const host0 = hostCpu();
  const cpu0 = cpuSplit(server.pid);
  const client0 = process.cpuUsage();
  const t0 = performance.now();
  let phase = performance.now();
  let phaseMain = cpu0.main;
  /** Wall time and server main-thread CPU, per phase. */
  const lap = (k: keyof typeof phases) => {
    const now = performance.now();
    const main = cpuSeconds(server.pid, server.pid);
    phases[k] += (now - phase) / 1000;
    phaseCpu[k] += main - phaseMain;
    phase = now;
    phaseMain = main;
  };
  const session = (await api('POST', base, { client_session_key: `bench-${Date.now()}`, expected_file_count: files.length, delete_missing: false })).data.upload_session;
  lap('session');
  let saved = 0;
  let saving: Promise<number> = Promise.resolve(0);
  const declare = (i: number) => {
    const descriptors = files.slice(i, i + BATCH).map((f) => ({ path: f.path, byte_size: f.bytes.length, content_type: 'application/octet-stream', checksum: md5(f.bytes), sha256: sha256(f.bytes) }));
    const p = clocked('declare', () => api('POST', `${base}/${session.id}/uploads`, { files: descriptors }));
    p.catch(() => undefined); // awaited at the top of its batch
    return p;
  };
  let declaring = declare(0);
  for (let i = 0; i < files.length; i += BATCH) {
    const batch = files.slice(i, i + BATCH);
    const declared = await declaring;
    lap('descriptors');
    await inParallel(declared.data.uploads as { input_index: number; upload: { url: string; headers: Record<string, string> } }[], PUTS, async (u) => {
      const res = await clocked('put', () => send('PUT', u.upload.url, u.upload.headers, batch[u.input_index]!.bytes));
      if (res.status !== 200) throw new Error(`PUT: ${res.status} ${res.text}`);
    });
    lap('puts');
    // With PIPELINE, this phase is the wait for the previous batch's save.
    saved += await saving;
    const more = i + BATCH < files.length;
    if (more && DECLARE_FIRST) declaring = declare(i + BATCH);
    saving = clocked('finalize_batch', () => api('POST', `${base}/${session.id}/finalize_batch`, { limit: batch.length })).then((r) => r.data.uploaded_count as number);
    saving.catch(() => undefined); // awaited with the next batch; not an unhandled rejection meanwhile
    if (!PIPELINE) {
      saved += await saving;
      saving = Promise.resolve(0);
    }
    if (more && !DECLARE_FIRST) declaring = declare(i + BATCH);
    lap('finalize_batch');
    if (i % 240 === 0) log(`  small files: ${i + batch.length}/${files.length}`);
  }
  saved += await saving;
  lap('finalize_batch');
  for (;;) {
    const fin = await api('POST', `${base}/${session.id}/finalize`, { complete: true });
    saved += fin.data.uploaded_count;
    if (!fin.data.finalize_pending) {
      if (fin.data.upload_session.status !== 'finalized') throw new Error(`session ended ${fin.data.upload_session.status}`);
      break;
    }
    await new Promise((r) => setTimeout(r, 1000 * Number(fin.headers['retry-after'] ?? 1)));
  }
  lap('finalize');
  const wall = (performance.now() - t0) / 1000;
  if (saved !== files.length) throw new Error(`saved ${saved} of ${files.length}`);
  return {
    files: files.length,
    bytes_each: SMALL_BYTES,
    wall_s: round(wall, 3),
    batch: BATCH,
    pipeline: PIPELINE,
    declare_first: DECLARE_FIRST,
    puts_in_flight: PUTS,
    files_per_s: round(files.length / wall, 0),
    goal_files_per_s: 800,
    server_cpu_s: cpuSince(server.pid, cpu0),
    client_cpu_s: clientCpu(process.cpuUsage(client0)),
    // The whole machine meanwhile (client and server busy, time stolen by the host): a figure taken
    // with more than a few percent stolen was not taken on a quiet machine.
    host_cpu: hostCpuBetween(host0),
    phases_s: Object.fromEntries(Object.entries(phases).map(([k, v]) => [k, round(v, 3)])),
    phases_server_main_thread_cpu_s: Object.fromEntries(Object.entries(phaseCpu).map(([k, v]) => [k, round(v, 2)])),
    // With PIPELINE, a finalize_batch runs beside the next declaration: the two share the server.
    call_ms: Object.fromEntries(Object.entries(calls).map(([k, v]) => [k, { calls: v.length, p50: round(percentile(v, 50) ?? 0, 1), p90: round(percentile(v, 90) ?? 0, 1), max: round(v.reduce((m, x) => Math.max(m, x), 0), 1) }])),
  };
}

/** Runs `cubby ARGS` against the server; wall time from spawn to exit, and its JSON answer. */
async function cubbyCli(server: ServeProcess, key: string, args: string[]): Promise<{ s: number; json: any }> {
  const t = performance.now();
  const child = spawn(process.execPath, [path.resolve(import.meta.dirname, '../bin/cubby.js'), ...args, '--json'], {
    env: { PATH: process.env.PATH ?? '', HOME: os.tmpdir(), CUBBY_URL: server.base, CUBBY_API_KEY: key, CUBBY_CONFIG_DIR: path.join(os.tmpdir(), `cubby-bench-cli-${process.pid}`) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (err += d));
  const code = await new Promise<number | null>((r) => child.on('close', r));
  if (code !== 0) throw new Error(`cubby ${args.join(' ')}: exit ${code}: ${err}`);
  return { s: (performance.now() - t) / 1000, json: JSON.parse(out) };
}

/** (c) The CLI: `cubby sync` of the small files from disk, and of a folder holding the large file. */
async function cliFigures(server: ServeProcess, api: ReturnType<typeof client>, key: string, runDir: string, largeDir: string | null) {
  const dir = path.join(runDir, 'cli-small');
  for (let i = 0; i < SMALL_FILES; i++) {
    const sub = path.join(dir, String(Math.floor(i / 100)).padStart(2, '0'));
    if (i % 100 === 0) fs.mkdirSync(sub, { recursive: true });
    fs.writeFileSync(path.join(sub, `f-${String(i).padStart(4, '0')}.bin`), randomBytes(SMALL_BYTES));
  }
  const box = (await api('POST', '/api/v1/buckets', { bucket: { title: `bench cli ${Date.now()}` } })).data.bucket;
  const sync = await cubbyCli(server, key, ['sync', dir, `${box.id}:`]);
  if (sync.json.uploaded !== SMALL_FILES) throw new Error(`cli sync uploaded ${sync.json.uploaded}`);
  // wall: spawn to exit (start-up included); inner: the sync itself, as the CLI timed it.
  const out: Record<string, unknown> = {
    sync_wall_s: round(sync.s, 3),
    sync_files_per_s: round(SMALL_FILES / sync.s, 0),
    sync_inner_s: round(sync.json.seconds, 3),
    sync_inner_files_per_s: round(SMALL_FILES / sync.json.seconds, 0),
  };
  if (largeDir) {
    const big = (await api('POST', '/api/v1/buckets', { bucket: { title: `bench cli large ${Date.now()}` } })).data.bucket;
    const large = await cubbyCli(server, key, ['sync', largeDir, `${big.id}:`]);
    if (large.json.uploaded !== 1 || large.json.bytes !== LARGE_BYTES) throw new Error(`cli sync of the large file: ${JSON.stringify(large.json)}`);
    out.sync_large_wall_s = round(large.s, 3);
    out.sync_large_mb_s = round(LARGE_BYTES / MB / large.s, 0);
    out.sync_large_inner_s = round(large.json.seconds, 3);
    out.sync_large_inner_mb_s = round(LARGE_BYTES / MB / large.json.seconds, 0);
  }
  const start = await cubbyCli(server, key, ['mailboxes', 'show', box.id]);
  out.cli_start_and_one_call_s = round(start.s, 3);
  return out;
}

/** 1 GiB of random bytes in /dev/shm (AES-CTR keystream), with its digests. */
function randomFile(file: string) {
  const cipher = createCipheriv('aes-256-ctr', randomBytes(32), randomBytes(16));
  const zeros = Buffer.alloc(8 * 1024 * 1024);
  const fd = fs.openSync(file, 'w', 0o600);
  const m = createHash('md5');
  const s = createHash('sha256');
  try {
    for (let left = LARGE_BYTES; left > 0; left -= zeros.length) {
      const chunk = cipher.update(zeros.subarray(0, Math.min(zeros.length, left)));
      m.update(chunk);
      s.update(chunk);
      fs.writeSync(fd, chunk);
    }
  } finally {
    fs.closeSync(fd);
  }
  return { md5Base64: m.digest('base64'), sha256: s.digest('hex') };
}

/** dd of the same bytes to the same folder with fsync; MB/s from dd's own figures. */
function dd(input: string, runDir: string, name: string) {
  const out = path.join(runDir, name);
  const res = spawnSync('dd', [`if=${input}`, `of=${out}`, 'bs=1M', `count=${LARGE_MIB}`, 'conv=fsync'], { encoding: 'utf8' });
  if (res.status !== 0) throw new Error(`dd failed: ${res.stderr}`);
  const m = /(\d+) bytes .* copied, ([\d.,]+) s/.exec(res.stderr);
  if (!m) throw new Error(`cannot read dd's output: ${res.stderr}`);
  const seconds = Number(m[2]!.replace(',', '.'));
  return { bytes: Number(m[1]), s: round(seconds, 3), mb_s: round(Number(m[1]) / MB / seconds, 0) };
}

/**
 * (a)'s peer (bench/upload-peer.mjs, PEER=0 skips it): the same number of 4 KiB files PUT to a
 * plain durable file server, PUTS at a time over the same client, right after (a): what the least
 * durable upload server does on this machine at that moment. It does not follow (a)'s swings from
 * run to run (docs/bench-smtp.md, 2026-12-07): the ratio is context, not a corrected figure.
 */
async function peerFigures(runDir: string, count = SMALL_FILES) {
  const dir = path.join(runDir, 'peer');
  fs.mkdirSync(dir);
  const files = Array.from({ length: count }, () => randomBytes(SMALL_BYTES));
  // The same libuv pool as `cubby serve` sets up for its fsyncs.
  const child = spawn(process.execPath, [path.join(import.meta.dirname, 'upload-peer.mjs'), dir], { env: { ...process.env, UV_THREADPOOL_SIZE: '16' }, stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    const port = await new Promise<number>((resolve, reject) => {
      let out = '';
      child.stdout.on('data', (d: Buffer) => {
        out += d.toString();
        if (out.includes('\n')) resolve(JSON.parse(out.split('\n')[0]!).port);
      });
      child.once('exit', (code) => reject(new Error(`upload peer exited with ${code}`)));
    });
    const cpu0 = cpuSplit(child.pid!);
    const client0 = process.cpuUsage();
    const t0 = performance.now();
    await inParallel(files, PUTS, async (bytes) => {
      const res = await send('PUT', `http://127.0.0.1:${port}/f`, { 'content-type': 'application/octet-stream', 'content-md5': md5(bytes) }, bytes);
      if (res.status !== 200) throw new Error(`peer PUT: ${res.status} ${res.text}`);
    });
    const wall = (performance.now() - t0) / 1000;
    const stored = fs.readdirSync(dir).length;
    if (stored !== new Set(files.map(sha256)).size) throw new Error(`the peer stored ${stored} of ${count} files`);
    return { files: count, wall_s: round(wall, 3), files_per_s: round(count / wall, 0), server_cpu_s: cpuSince(child.pid!, cpu0), client_cpu_s: clientCpu(process.cpuUsage(client0)) };
  } finally {
    child.kill();
  }
}

/** (b) One large PUT, save and download, with the server's memory. */
async function largeFile(server: ServeProcess, api: ReturnType<typeof client>, file: string, digests: { md5Base64: string; sha256: string }) {
  const bucket = (await api('POST', '/api/v1/buckets', { bucket: { title: `bench large ${Date.now()}` } })).data.bucket;
  const before = server.memory();
  server.resetPeak();
  const du = await api('POST', '/api/v1/direct_uploads', {
    bucket_id: bucket.id,
    path: 'large.bin',
    blob: { filename: 'large.bin', byte_size: LARGE_BYTES, checksum: digests.md5Base64, content_type: 'application/octet-stream', sha256: digests.sha256 },
  });
  const target = du.data.direct_upload;
  const cpu0 = cpuSplit(server.pid);
  const client0 = process.cpuUsage();
  const [put, putS] = await timed(() => putStream(target.url, target.headers, fs.createReadStream(file, { highWaterMark: 1024 * 1024 }), LARGE_BYTES));
  if (put.status !== 200) throw new Error(`PUT: ${put.status} ${put.text}`);
  const putCpu = cpuSince(server.pid, cpu0);
  const putClient = process.cpuUsage(client0);
  const [saved, saveS] = await timed(() => api('POST', `/api/v1/buckets/${bucket.id}/files`, { path: 'large.bin', signed_blob_id: du.data.signed_id }));
  const link = (await api('GET', `/v1/mailboxes/${bucket.id}/files/${saved.data.file.id}/download`)).data.download.url;
  const cpu1 = cpuSplit(server.pid);
  const client1 = process.cpuUsage();
  const [got, getS] = await timed(() => getHashed(link));
  if (got.status !== 200 || got.bytes !== LARGE_BYTES || got.sha256 !== digests.sha256) throw new Error(`download: ${got.status}, ${got.bytes} bytes, sha256 ${got.sha256}`);
  const getCpu = cpuSince(server.pid, cpu1);
  const getClient = process.cpuUsage(client1);
  const after = server.memory();
  const mib = (n: number) => round(n / 1024 / 1024, 0);
  return {
    bytes: LARGE_BYTES,
    put_s: round(putS, 3),
    put_mb_s: round(LARGE_BYTES / MB / putS, 0),
    put_server_cpu_s: putCpu,
    put_client_cpu_s: clientCpu(putClient),
    save_s: round(saveS, 3),
    download_s: round(getS, 3),
    download_mb_s: round(LARGE_BYTES / MB / getS, 0),
    download_server_cpu_s: getCpu,
    download_client_cpu_s: clientCpu(getClient),
    server_rss_mib: { before: mib(before.rss), after: mib(after.rss), peak_during: mib(after.hwm), growth: mib(Math.max(after.hwm, after.rss) - before.rss) },
  };
}

async function main() {
  const runDir = makeRunDir('uploads');
  // The large file alone in a folder, for `cubby sync` of it (c).
  const shmDir = fs.mkdtempSync(path.join(fs.existsSync('/dev/shm') ? '/dev/shm' : os.tmpdir(), 'cubby-bench-'));
  const shmFile = path.join(shmDir, 'large.bin');
  let server: ServeProcess | undefined;
  const cleanup = () => {
    fs.rmSync(shmDir, { recursive: true, force: true });
    if (!process.env.KEEP_RUN_DIR) fs.rmSync(runDir, { recursive: true, force: true });
  };
  process.once('SIGINT', () => {
    void server?.stop().finally(() => {
      cleanup();
      process.exit(130);
    });
  });
  try {
    const env = serveEnv(path.join(runDir, 'data'));
    log(`run dir ${runDir}`);
    const { key } = await adminUserAndKey(env, 'paid');
    server = await startServe(env, serveOptions());
    log(`cubby serve pid ${server.pid} at ${server.base}`);
    const api = client(server.base, key);

    log(`(a) ${SMALL_FILES} × ${SMALL_BYTES} B through one upload session`);
    let warmUp: Awaited<ReturnType<typeof smallFiles>> | null = null;
    if (WARMUP_FILES) {
      log(`    warm-up: ${WARMUP_FILES} files through a session of their own, in another mailbox`);
      warmUp = await smallFiles(server, api, WARMUP_FILES);
      log(`    warm-up: ${warmUp.files_per_s} files/s`);
    }
    const speedBefore = machineSpeed(runDir);
    const small = await smallFiles(server, api);
    const speedAfter = machineSpeed(runDir);
    log(`    ${small.files_per_s} files/s (${small.wall_s} s)`);
    const peer = process.env.PEER === '0' ? null : await peerFigures(runDir);
    if (peer) log(`    peer (durable creates over HTTP, same client): ${peer.files_per_s} files/s; Cubby ${round(small.files_per_s / peer.files_per_s, 2)}× of it`);

    log(`(b) generating ${LARGE_MIB} MiB of random data in ${shmFile}`);
    const digests = randomFile(shmFile);
    // dd right before and right after the PUT (this machine's disk speed drifts within a minute).
    log('    dd conv=fsync of the same bytes to the run dir');
    const ddBefore = dd(shmFile, runDir, 'dd-before.out');
    log(`    dd: ${ddBefore.mb_s} MB/s`);
    log('    PUT, save and download through cubby');
    const large = await largeFile(server, api, shmFile, digests);
    log(`    PUT ${large.put_mb_s} MB/s, download ${large.download_mb_s} MB/s, RSS growth ${large.server_rss_mib.growth} MiB`);
    const ddAfter = dd(shmFile, runDir, 'dd-after.out');
    log(`    dd again: ${ddAfter.mb_s} MB/s`);
    const ddMean = round((ddBefore.mb_s + ddAfter.mb_s) / 2, 0);

    let cli: Record<string, unknown> | null = null;
    if (process.env.CLI !== '0') {
      log(`(c) the CLI: cubby sync of ${SMALL_FILES} files, and of a folder with the ${LARGE_MIB} MiB file`);
      cli = await cliFigures(server, api, key, runDir, shmDir);
      cli.sync_to_api_ratio = round(Number(cli.sync_files_per_s) / small.files_per_s, 2);
      cli.sync_inner_to_api_ratio = round(Number(cli.sync_inner_files_per_s) / small.files_per_s, 2);
      cli.sync_large_to_put_ratio = round(Number(cli.sync_large_mb_s) / large.put_mb_s, 2);
      cli.sync_large_inner_to_put_ratio = round(Number(cli.sync_large_inner_mb_s) / large.put_mb_s, 2);
      cli.goal_ratio = 0.8;
      log(`    small: ${cli.sync_files_per_s} files/s (${cli.sync_to_api_ratio}× the API figure; ${cli.sync_inner_to_api_ratio}× without start-up)`);
      log(`    large: ${cli.sync_large_mb_s} MB/s (${cli.sync_large_to_put_ratio}× the PUT; ${cli.sync_large_inner_to_put_ratio}× without start-up; hashing included)`);
    }

    const result = {
      bench: 'uploads',
      at: new Date().toISOString(),
      node: process.version,
      cpus: os.cpus().length,
      commit: gitCommit(),
      small_files: small,
      // Fixed work timed just before and after (a): was the machine slower than on another day?
      machine_speed: { before: speedBefore, after: speedAfter },
      // (a)'s peer in the same run (null with PEER=0), and (a) as a share of it.
      small_files_peer: peer,
      small_files_to_peer_ratio: peer && round(small.files_per_s / peer.files_per_s, 2),
      // The same measurement of the warm-up session (null without WARMUP_FILES): the first after boot.
      warm_up: warmUp && { files: warmUp.files, files_per_s: warmUp.files_per_s, server_cpu_s: warmUp.server_cpu_s, client_cpu_s: warmUp.client_cpu_s, host_cpu: warmUp.host_cpu },
      large_file: large,
      dd_random_fsync: { mb_s: ddMean, before: ddBefore, after: ddAfter },
      put_to_dd_ratio: round(large.put_mb_s / ddMean, 2),
      cli,
      goal_put_to_dd_ratio: 0.7,
      goal_server_rss_growth_mib: 100,
    };
    process.stdout.write(`${JSON.stringify(result)}\n`);
  } finally {
    await server?.stop();
    cleanup();
  }
}

await main();
