// Small helpers shared by the benchmarks in bench/ (uploads.ts, smtp.ts). The server itself is
// started with test/serve-process.ts; this file holds what the bench scripts need around it.
import { execFileSync, spawnSync } from 'node:child_process';
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

/** user+system CPU seconds so far of a process or thread (/proc/…/stat, clock ticks of 1/100 s). */
export function cpuSeconds(pid: number, tid?: number): number {
  const fields = fs.readFileSync(tid ? `/proc/${pid}/task/${tid}/stat` : `/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** CPU seconds of the whole process and of its main (JavaScript) thread. */
export const cpuSplit = (pid: number) => ({ all: cpuSeconds(pid), main: cpuSeconds(pid, pid) });
export const cpuSince = (pid: number, from: { all: number; main: number }) => {
  const now = cpuSplit(pid);
  return { all: round(now.all - from.all, 2), main_thread: round(now.main - from.main, 2) };
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
