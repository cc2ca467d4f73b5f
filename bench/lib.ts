// Small helpers shared by the benchmarks in bench/ (uploads.ts, smtp.ts). The server itself is
// started with test/serve-process.ts; this file holds what the bench scripts need around it.
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const BENCH_DIR = path.dirname(fileURLToPath(import.meta.url));
export const SCRATCH = process.env.BENCH_SCRATCH ?? path.join(BENCH_DIR, '.tmp');

export const log = (msg: string) => process.stderr.write(`[${new Date().toISOString().slice(11, 19)}] ${msg}\n`);
export const round = (n: number, d = 1) => Math.round(n * 10 ** d) / 10 ** d;

/**
 * How the benchmarks start `cubby serve`, from the runner's environment: SERVE_NODE_ARGS (node
 * options, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof" or "--trace-gc-nvp") and SERVE_STDOUT_FILE
 * (a file that keeps what the server prints on stdout: V8's traces go there).
 */
export function serveOptions(): { nodeArgs?: string[]; stdoutFile?: string } {
  return { nodeArgs: process.env.SERVE_NODE_ARGS?.split(/\s+/).filter(Boolean), stdoutFile: process.env.SERVE_STDOUT_FILE || undefined };
}

/**
 * The fields of /proc/…/stat after the command name, for a process or one of its threads: [0] the
 * state, [1] the parent's pid, [7] minor faults, [11] and [12] user and system time, [13] and [14]
 * the time of children it has waited for (clock ticks of 1/100 s). The name may hold spaces and
 * parentheses: the fields start after its last `)`.
 */
export function procStat(pid: number, tid?: number): string[] {
  const stat = fs.readFileSync(tid ? `/proc/${pid}/task/${tid}/stat` : `/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
}

/** user+system CPU seconds from /proc/…/stat's fields (clock ticks of 1/100 s). */
const statCpuSeconds = (fields: string[]) => (Number(fields[11]) + Number(fields[12])) / 100;

/** user+system CPU seconds so far of a process or thread. */
export const cpuSeconds = (pid: number, tid?: number): number => statCpuSeconds(procStat(pid, tid));

/**
 * CPU seconds so far of the whole process and of its main (JavaScript) thread; of the whole, the
 * kernel's part (system calls, page faults), and the process's minor page faults.
 */
export function cpuSplit(pid: number) {
  const fields = procStat(pid);
  return { all: statCpuSeconds(fields), main: cpuSeconds(pid, pid), system: Number(fields[12]) / 100, minorFaults: Number(fields[7]) };
}

/**
 * CPU seconds so far of a process and its children (e.g. a Postgres postmaster and its backends),
 * to set a database's work per message beside the server's: each process's own user+system time,
 * and the root's children's time that it has collected (cutime+cstime), so that a backend that
 * exits between two readings (an idle pooled connection closed after 10 s) keeps its seconds in the
 * total.
 */
export function processTreeCpuSeconds(root: number): number {
  let total = 0;
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const pid = Number(entry);
      const fields = procStat(pid);
      if (pid === root) total += statCpuSeconds(fields) + (Number(fields[13]) + Number(fields[14])) / 100;
      else if (Number(fields[1]) === root) total += statCpuSeconds(fields);
    } catch {
      // gone meanwhile: its seconds are in the root's collected time
    }
  }
  return total;
}

/**
 * CPU seconds since `from` (cpuSplit): the whole process's, its main thread's and the kernel's part;
 * `minor_faults` counts the pages the process touched for the first time meanwhile (a fresh heap's
 * growth costs kernel time, not the program's own).
 */
export const cpuSince = (pid: number, from: ReturnType<typeof cpuSplit>) => {
  const now = cpuSplit(pid);
  return { all: round(now.all - from.all, 2), main_thread: round(now.main - from.main, 2), system: round(now.system - from.system, 2), minor_faults: now.minorFaults - from.minorFaults };
};

/**
 * The whole machine's CPU time so far, in clock ticks (the first line of /proc/stat): all of it,
 * the idle part (idle and iowait) and the part the hypervisor gave to other guests (steal). Zeros
 * where /proc/stat is not readable.
 */
export function hostCpu(): { total: number; idle: number; steal: number } {
  try {
    const [user, nice, system, idle, iowait, irq, softirq, steal] = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1, 9).map(Number) as number[];
    return { total: user! + nice! + system! + idle! + iowait! + irq! + softirq! + steal!, idle: idle! + iowait!, steal: steal! };
  } catch {
    return { total: 0, idle: 0, steal: 0 };
  }
}

/**
 * How busy the machine was between two readings, as shares of all its cores' time: `busy_pct`
 * (every process, the benchmark's own included) and `steal_pct` (time the hypervisor ran other
 * guests instead: a figure taken with more than a few percent stolen was not taken on a quiet
 * machine). Nulls when nothing could be read.
 */
export function hostCpuBetween(from: ReturnType<typeof hostCpu>, to: ReturnType<typeof hostCpu> = hostCpu()): { busy_pct: number | null; steal_pct: number | null } {
  const total = to.total - from.total;
  if (total <= 0) return { busy_pct: null, steal_pct: null };
  const steal = to.steal - from.steal;
  return { busy_pct: round((100 * (total - (to.idle - from.idle) - steal)) / total, 1), steal_pct: round((100 * steal) / total, 1) };
}

/** Where machineSpeed's work leaves a result, so that V8 cannot drop the work as unused. */
const speedSink = { value: 0 };

/**
 * How fast this machine runs fixed work right now, in ms: `js_ms`, a loop of integer arithmetic in
 * JavaScript; `sha256_ms`, hashing 16 MiB; `copy_ms`, copying 64 MiB in memory (each the fastest
 * of five tries, after one untimed try); and `fsync_ms`, the median of 20 writes of 4 KiB each
 * followed by fdatasync, in `dir` (on the disk the server writes to). One program's figures on one
 * machine drift by a third from one quarter-hour to the next with no stolen time to show for it
 * (docs/bench-smtp.md, 2026-12-07); these tell a slower machine or disk from a slower run (that
 * day they stayed flat while the upload figure swung). Lower is faster; about a quarter of a second.
 */
export function machineSpeed(dir: string): { js_ms: number; sha256_ms: number; copy_ms: number; fsync_ms: number } {
  const data = Buffer.alloc(16 * 1024 * 1024, 7);
  const from = Buffer.alloc(64 * 1024 * 1024, 1);
  const to = Buffer.allocUnsafe(from.length);
  const fastest = (work: () => number) => {
    speedSink.value += work();
    let min = Infinity;
    for (let i = 0; i < 5; i++) {
      const t = performance.now();
      speedSink.value += work();
      min = Math.min(min, performance.now() - t);
    }
    return round(min, 2);
  };
  return {
    js_ms: fastest(() => {
      let x = 1;
      for (let i = 0; i < 5_000_000; i++) x = (x * 31 + i) % 1_000_003;
      return x;
    }),
    sha256_ms: fastest(() => createHash('sha256').update(data).digest()[0]!),
    copy_ms: fastest(() => from.copy(to)),
    fsync_ms: fsyncMedian(dir),
  };
}

function fsyncMedian(dir: string): number {
  const file = path.join(dir, `.fsync-probe-${process.pid}`);
  const fd = fs.openSync(file, 'w');
  const block = Buffer.alloc(4096, 1);
  const times: number[] = [];
  try {
    for (let i = 0; i < 20; i++) {
      const t = performance.now();
      fs.writeSync(fd, block, 0, block.length, i * block.length);
      fs.fdatasyncSync(fd);
      times.push(performance.now() - t);
    }
  } finally {
    fs.closeSync(fd);
    fs.rmSync(file, { force: true });
  }
  return round(times.sort((a, b) => a - b)[10]!, 2);
}

export const clientCpu = (u: NodeJS.CpuUsage) => round((u.user + u.system) / 1e6, 2);

/** A fresh run dir under the scratch dir, which gets `chattr +T` first (see the bench README). */
export function makeRunDir(name: string): string {
  fs.mkdirSync(SCRATCH, { recursive: true });
  // ext4 without a journal: +T spreads each new run dir to another block group, away from the
  // inodes that earlier runs deleted (creates there are 10-50x slower for minutes).
  spawnSync('chattr', ['+T', SCRATCH]);
  return fs.mkdtempSync(path.join(SCRATCH, `${name}.`));
}

/** The checked-out commit, or null outside a git checkout (e.g. a release tarball). */
export function gitCommit(): string | null {
  try {
    return execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: BENCH_DIR, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return null;
  }
}

/**
 * HTTP/1.1 with keep-alive over node:http: on two cores the client shares the machine with the
 * server, and fetch (undici) costs the client about twice the CPU per small request.
 */
const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });

export function send(method: string, url: string, headers: Record<string, string>, body?: Buffer): Promise<{ status: number; headers: http.IncomingHttpHeaders; text: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, agent, headers: body ? { ...headers, 'content-length': String(body.length) } : headers }, (res) => {
      const parts: Buffer[] = [];
      res.on('data', (d: Buffer) => parts.push(d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(parts).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** A JSON API caller with a bearer key; throws on any status ≥ 300. */
export function client(base: string, key: string) {
  return async function api(method: string, url: string, body?: unknown): Promise<any> {
    const headers: Record<string, string> = { authorization: `Bearer ${key}`, accept: 'application/json' };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const res = await send(method, new URL(url, base).href, headers, body === undefined ? undefined : Buffer.from(JSON.stringify(body)));
    if (res.status >= 300) throw new Error(`${method} ${url}: ${res.status} ${res.text.slice(0, 500)}`);
    return { status: res.status, headers: res.headers, ...JSON.parse(res.text) };
  };
}

export async function inParallel<T>(items: T[], n: number, fn: (item: T) => Promise<void>) {
  let next = 0;
  await Promise.all(Array.from({ length: Math.min(n, items.length) }, async () => {
    while (next < items.length) await fn(items[next++]!);
  }));
}

/** A TCP port free on 127.0.0.1 right now (for a server the benchmark starts). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}
