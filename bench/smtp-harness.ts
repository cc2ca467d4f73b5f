// `npm run bench:smtp` with the shared peer harness (smtp-peers.sh: Postfix smtp-source, 20
// sessions, one message per connection, no pipelining, as MTAs deliver): Postfix smtp-sink,
// Haraka discarding and Haraka with an fsync'd file per message are measured first, then Cubby in
// the same run with the same load (EXTRA_SMTP). Cubby runs from a fresh `chattr +T` run dir with
// CUBBY_MAIL_DOMAIN=bench.test (Haraka accepts only that domain, and the script sends every server
// the same RCPT), receiving everything in one mailbox.
// While the script runs, Cubby's /metrics and /proc are sampled every 500 ms, which splits Cubby's
// part into warm-up, 5 KiB and 100 KiB by its accepted-message count: CPU per message (all threads
// and the event loop's thread), the end-of-DATA → 250 latency percentiles from the
// cubby_smtp_data_end_to_reply_seconds histogram, and the resident memory by kind (anonymous,
// file-backed, shared: /proc/PID/status) with each phase's largest sample. The peers' figure is
// the harness's own, VmHWM.
// PROBE=1 adds a 21st client during Cubby's 5 KiB phase (from 10 % to 90 % of it) that times each
// step of its sessions (bench/smtp-probe.ts), sending to a second mailbox; its messages are left out
// of Cubby's counts, and the JSON gets `cubby.5k.session_steps_ms`.
// The harness is found in BENCH_PEERS_DIR or ../shared/bench beside the repository; it is copied
// to the scratch dir (the shared folder may be read-only; its downloaded tools are kept there).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { adminUserAndKey, serveEnv, startServe, type ServeProcess } from '../test/serve-process.ts';
import { BENCH_DIR, client, cpuSplit, gitCommit, hostCpu, hostCpuBetween, log, machineSpeed, makeRunDir, processTreeCpuSeconds, round, SCRATCH, serveOptions } from './lib.ts';
import { benchDatabase } from './database.ts';
import { makeMessages } from './smtp-messages.ts';
import { SessionProbe } from './smtp-probe.ts';

const DOMAIN = 'bench.test';

/** The shared harness, or null when it is not beside the repository and BENCH_PEERS_DIR is unset. */
export function findPeerHarness(): string | null {
  const candidates = [process.env.BENCH_PEERS_DIR, path.resolve(BENCH_DIR, '..', '..', 'shared', 'bench')].filter(Boolean) as string[];
  return candidates.find((dir) => fs.existsSync(path.join(dir, 'smtp-peers.sh'))) ?? null;
}

interface Sample {
  t: number;
  accepted: number;
  /** cubby_smtp_group_commits_total: transactions that stored received mail. */
  commits: number;
  cpuAll: number;
  cpuMain: number;
  /** Cumulative bucket counts of cubby_smtp_data_end_to_reply_seconds, by upper bound (s). */
  buckets: [number, number][];
  /** Resident memory by kind (MiB, /proc/PID/status): anonymous (heaps, buffers), file-backed (code, memory maps of the database), shared (SQLite's WAL index). */
  rss: { anon: number; file: number; shmem: number };
  /** The machine's CPU time so far (bench/lib.ts hostCpu). */
  host: ReturnType<typeof hostCpu>;
  /** The Postgres server's CPU seconds so far (its postmaster and backends), when Cubby runs on a Postgres on this machine. */
  databaseCpu: number | null;
}

/** RssAnon, RssFile and RssShmem of a process, in MiB (zeros where /proc is not readable). */
function rssSplit(pid: number): Sample['rss'] {
  const kb = (text: string, field: string) => Number(new RegExp(`^${field}:\\s+(\\d+)`, 'm').exec(text)?.[1] ?? 0);
  try {
    const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    return { anon: kb(status, 'RssAnon') / 1024, file: kb(status, 'RssFile') / 1024, shmem: kb(status, 'RssShmem') / 1024 };
  } catch {
    return { anon: 0, file: 0, shmem: 0 };
  }
}

/** `leaveOut`: messages accepted for someone other than the harness (the session probe's). */
async function scrape(base: string, pid: number, leaveOut = 0, postmaster: number | null = null): Promise<Sample> {
  const res = await fetch(`${base}/metrics`);
  const text = await res.text();
  const cpu = cpuSplit(pid);
  let accepted = 0;
  let commits = 0;
  const buckets: [number, number][] = [];
  for (const line of text.split('\n')) {
    if (line.startsWith('cubby_smtp_messages_total{') && line.includes('outcome="accepted"')) accepted += Number(line.slice(line.lastIndexOf(' ') + 1));
    else if (line.startsWith('cubby_smtp_group_commits_total ')) commits = Number(line.slice(line.lastIndexOf(' ') + 1));
    else if (line.startsWith('cubby_smtp_data_end_to_reply_seconds_bucket{')) {
      const le = /le="([^"]+)"/.exec(line)![1]!;
      buckets.push([le === '+Inf' ? Infinity : Number(le), Number(line.slice(line.lastIndexOf(' ') + 1))]);
    }
  }
  return { t: performance.now(), accepted: accepted - leaveOut, commits, cpuAll: cpu.all, cpuMain: cpu.main, buckets, rss: rssSplit(pid), host: hostCpu(), databaseCpu: postmaster ? processTreeCpuSeconds(postmaster) : null };
}

/** The p-th percentile (ms) of the observations between two scrapes, interpolated inside its bucket. */
function percentileMs(from: Sample, to: Sample, p: number): number | null {
  const counts = to.buckets.map(([le, n], i) => [le, n - (from.buckets[i]?.[1] ?? 0)] as [number, number]);
  const total = counts.at(-1)?.[1] ?? 0;
  if (!total) return null;
  const rank = (p / 100) * total;
  let prevLe = 0;
  let prevN = 0;
  for (const [le, n] of counts) {
    if (n >= rank) {
      if (le === Infinity) return round(prevLe * 1000, 1);
      return round((prevLe + ((le - prevLe) * (rank - prevN)) / Math.max(1, n - prevN)) * 1000, 1);
    }
    prevLe = le;
    prevN = n;
  }
  return null;
}

/** The first sample at or past `count` accepted messages (the scrape interval bounds the error). */
const firstAt = (samples: Sample[], count: number) => samples.find((s) => s.accepted >= count) ?? samples.at(-1)!;

function phase(samples: Sample[], fromCount: number, toCount: number) {
  const a = firstAt(samples, fromCount);
  const b = firstAt(samples, toCount);
  const n = b.accepted - a.accepted;
  const s = (b.t - a.t) / 1000;
  return {
    messages_sampled: n,
    cpu_ms_per_msg: n ? round(((b.cpuAll - a.cpuAll) * 1000) / n, 2) : null,
    cpu_main_thread_ms_per_msg: n ? round(((b.cpuMain - a.cpuMain) * 1000) / n, 2) : null,
    // On Postgres: the database server's CPU per message (its own processes, beside Cubby's).
    ...(a.databaseCpu !== null && b.databaseCpu !== null ? { database_cpu_ms_per_msg: n ? round(((b.databaseCpu - a.databaseCpu) * 1000) / n, 2) : null } : {}),
    cpu_cores_busy: s ? round((b.cpuAll - a.cpuAll) / s, 2) : null,
    msgs_per_commit: b.commits > a.commits ? round(n / (b.commits - a.commits), 2) : null,
    data_end_to_250_ms: { p50: percentileMs(a, b, 50), p95: percentileMs(a, b, 95), p99: percentileMs(a, b, 99) },
    // The largest resident memory sampled in this phase (anonymous + file-backed + shared, MiB).
    rss_mb_max: round(Math.max(...samples.filter((x) => x.t >= a.t && x.t <= b.t).map((x) => x.rss.anon + x.rss.file + x.rss.shmem)), 0),
    // The whole machine meanwhile: load generator and server busy, and time stolen by the host.
    host_cpu: hostCpuBetween(a.host, b.host),
  };
}

/** The session probe (PROBE=1): a mailbox of its own and a 5 KiB message like the harness's. */
async function sessionProbe(api: ReturnType<typeof client>, smtpPort: number): Promise<SessionProbe> {
  const box = (await api('POST', '/v1/mailboxes', { mailbox: { title: 'probe', email: { username: 'probe' } } })).data.mailbox;
  const [message] = makeMessages({ count: 1, firstIndex: 0, recipients: [box.email.address], attachmentRatio: 0, from: 'probe@source.test' });
  return new SessionProbe(smtpPort, box.email.address, message!.data);
}

/** A private copy of the harness in the scratch dir, kept between runs for its downloaded tools. */
function harnessCopy(source: string): string {
  const copy = path.join(SCRATCH, 'peer-harness');
  fs.mkdirSync(copy, { recursive: true });
  fs.cpSync(source, copy, { recursive: true, filter: (src) => !/[/](\.tools|\.tmp)$/.test(src) });
  // Its scripts are CommonJS; inside this repository's tree ("type": "module") node would read them as ESM.
  fs.writeFileSync(path.join(copy, 'package.json'), '{ "type": "commonjs" }\n');
  return copy;
}

export async function runWithPeerHarness(harness: string): Promise<void> {
  const msgs5k = Number(process.env.MSGS_5K ?? 10000);
  const msgs100k = Number(process.env.MSGS_100K ?? 4000);
  const warmup = Number(process.env.WARMUP ?? 300);
  const runDir = makeRunDir('smtp');
  const database = benchDatabase('smtp');
  let server: ServeProcess | undefined;
  const stopAll = async () => {
    await server?.stop();
    await database.drop();
    if (!process.env.KEEP_RUN_DIR) fs.rmSync(runDir, { recursive: true, force: true });
  };
  process.once('SIGINT', () => void stopAll().finally(() => process.exit(130)));
  try {
    const env = serveEnv(path.join(runDir, 'data'), { CUBBY_MAIL_DOMAIN: DOMAIN, CUBBY_SMTP_HOSTNAME: 'mx.bench.test', ...database.env });
    const { key } = await adminUserAndKey(env, process.env.PLAN ?? 'pilot');
    server = await startServe(env, serveOptions());
    if (!server.smtpPort) throw new Error('cubby serve printed no SMTP port');
    const api = client(server.base, key);
    const box = (await api('POST', '/v1/mailboxes', { mailbox: { title: 'bench', email: { username: 'mailbox' } } })).data.mailbox;
    log(`cubby serve pid ${server.pid}, SMTP 127.0.0.1:${server.smtpPort}, receiving at ${box.email.address}`);

    // The probe's mailbox is its own, so that the harness's mailbox still counts the harness's messages.
    const probe = process.env.PROBE === '1' ? await sessionProbe(api, server.smtpPort) : null;
    const speedBefore = machineSpeed(runDir);
    const copy = harnessCopy(harness);
    const scratch = path.join(runDir, 'peers');
    fs.mkdirSync(scratch);
    const samples: Sample[] = [];
    const pid = server.pid;
    const base = server.base;
    // A Postgres on this machine: its postmaster's and backends' CPU per message, beside Cubby's.
    const postmaster = await database.postmasterPid();
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        // Read before the scrape: a probe message counted by the server but not yet answered is at most one.
        const sample = await scrape(base, pid, probe?.accepted ?? 0, postmaster);
        samples.push(sample);
        if (probe && sample.accepted >= warmup + msgs5k * 0.1) probe.start();
        if (probe && sample.accepted >= warmup + msgs5k * 0.9) await probe.stop();
        await new Promise((r) => setTimeout(r, 500));
      }
      await probe?.stop();
      samples.push(await scrape(base, pid, probe?.accepted ?? 0, postmaster));
    })();
    const child = spawn('bash', [path.join(copy, 'smtp-peers.sh')], {
      env: { ...process.env, EXTRA_SMTP: `127.0.0.1:${server.smtpPort}`, EXTRA_NAME: 'cubby', EXTRA_PID: String(pid), RCPT: box.email.address, BENCH_SCRATCH: scratch, MSGS_5K: String(msgs5k), MSGS_100K: String(msgs100k), WARMUP: String(warmup) },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    sampling = false;
    await sampler;
    if (code !== 0) throw new Error(`smtp-peers.sh exited with ${code}`);
    const peers = JSON.parse(out.trim().split('\n').pop()!);
    const results = peers.results as Record<string, Record<string, { msgs_per_s: number; server_cpu_s: number; msgs: number; ok: boolean }> & { server_max_rss_mb: number }>;
    const cubby = results.cubby!;
    const stored = Number((await api('GET', `/v1/mailboxes/${box.id}`)).data.mailbox.email.message_count);
    const speedAfter = machineSpeed(runDir);
    const expected = warmup + msgs5k + msgs100k;
    const ratios: Record<string, Record<string, number | null>> = {};
    for (const size of ['5k', '100k']) {
      ratios[size] = {};
      for (const [name, r] of Object.entries(results)) {
        if (name === 'cubby') continue;
        ratios[size]![`cubby_to_${name}`] = r[size]?.msgs_per_s ? round(cubby[size]!.msgs_per_s / r[size]!.msgs_per_s, 2) : null;
      }
    }
    const cpuPerMsg = (r: { server_cpu_s: number; msgs: number }) => round((r.server_cpu_s * 1000) / r.msgs, 2);
    const result = {
      bench: 'smtp',
      harness: 'smtp-peers.sh (smtp-source, 20 sessions, one message per connection)',
      at: new Date().toISOString(),
      commit: gitCommit(),
      database: database.kind,
      node: process.version,
      cpus: os.cpus().length,
      loadavg_at_end: os.loadavg().map((n) => round(n, 2)),
      // Over the whole run, every server's turn included (each phase of Cubby's has its own).
      host_cpu: hostCpuBetween(samples[0]!.host, samples.at(-1)!.host),
      // Fixed work timed before and after the run (bench/lib.ts machineSpeed): was the machine slower today?
      machine_speed: { before: speedBefore, after: speedAfter },
      cubby: {
        '5k': { msgs_per_s: cubby['5k']!.msgs_per_s, ok: cubby['5k']!.ok, ...phase(samples, warmup, warmup + msgs5k), ...(probe ? { session_steps_ms: probe.summary() } : {}) },
        '100k': { msgs_per_s: cubby['100k']!.msgs_per_s, ok: cubby['100k']!.ok, ...phase(samples, warmup + msgs5k, expected) },
        rss_mb_max: cubby.server_max_rss_mb,
        // The largest of each kind seen in the 500 ms samples (their peaks need not coincide).
        rss_mb_max_by_kind: Object.fromEntries((['anon', 'file', 'shmem'] as const).map((k) => [k, round(Math.max(...samples.map((s) => s.rss[k])), 0)])),
        durability: { accepted: samples.at(-1)!.accepted, message_count: stored, ok: stored === expected && samples.at(-1)!.accepted === expected },
      },
      peers: Object.fromEntries(
        Object.entries(results)
          .filter(([name]) => name !== 'cubby')
          .map(([name, r]) => [name, { '5k': { msgs_per_s: r['5k']?.msgs_per_s, cpu_ms_per_msg: r['5k'] ? cpuPerMsg(r['5k']) : null }, '100k': { msgs_per_s: r['100k']?.msgs_per_s, cpu_ms_per_msg: r['100k'] ? cpuPerMsg(r['100k']) : null }, rss_mb_max: r.server_max_rss_mb }]),
      ),
      ratios,
      goal: { '5k_to_haraka_fsync': 1, cpu_ms_per_msg_5k: 1.5, rss_mb: 250, p99_ms: 50 },
      raw: peers,
    };
    process.stdout.write(`${JSON.stringify(result)}\n`);
  } finally {
    await stopAll();
  }
}
