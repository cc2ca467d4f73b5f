import { spawn, execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

// The real server as its own process (`node bin/cubby.js serve`), for measurements where the
// process must be Cubby alone: memory (RSS from /proc) and the benchmarks in bench/. Users and
// keys are made with the operator CLI (`node bin/cubby.js admin …`) against the same data dir.

const BIN = fileURLToPath(new URL('../bin/cubby.js', import.meta.url));
const run = promisify(execFile);

export interface ServeProcess {
  pid: number;
  /** http://127.0.0.1:PORT ('' when the process has no api role) */
  base: string;
  /** The SMTP port (null without the smtp role). */
  smtpPort: number | null;
  /** http://localhost:PORT of the sites listener (null without the sites role). */
  sites: string | null;
  env: Record<string, string>;
  /** Resolves with the exit code (null when a signal ended it) and signal. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Resolves once stdout or stderr (everything since start) matches. */
  waitForOutput(pattern: RegExp): Promise<void>;
  /** Sends a signal (SIGTERM for a graceful stop) and returns at once. */
  signal(sig: NodeJS.Signals): void;
  /** VmRSS and VmHWM of the server process, in bytes. */
  memory(): { rss: number; hwm: number };
  /** Resets VmHWM to the current RSS (Linux: `5` to /proc/PID/clear_refs), so it measures from now. */
  resetPeak(): void;
  stop(): Promise<void>;
}

/** The environment for a server and its admin CLI on one data dir: every port ephemeral, quiet logs. */
export function serveEnv(dataDir: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    CUBBY_DATA_DIR: dataDir,
    CUBBY_HTTP_PORT: '0',
    CUBBY_SMTP_PORT: '0',
    CUBBY_SITES_PORT: '0',
    CUBBY_LOG_LEVEL: 'warn',
    CUBBY_SECRET_KEY: randomBytes(32).toString('hex'),
    ...extra,
  };
}

/** process.env without CUBBY_* (the test runner's own settings must not leak into the server). */
export function childEnv(env: Record<string, string>): NodeJS.ProcessEnv {
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('CUBBY_')));
  return { ...base, ...env };
}

export function procMemory(pid: number): { rss: number; hwm: number } {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN) * 1024;
  return { rss: kb('VmRSS'), hwm: kb('VmHWM') };
}

/**
 * Starts `cubby serve` (with `nodeArgs` for node, e.g. --cpu-prof) and resolves once it has
 * printed its addresses (the banner ends with the Data line). `stdoutFile` keeps a copy of all it
 * prints on stdout, where V8 writes its traces (--trace-gc-nvp and the like), which are otherwise
 * drained and dropped.
 */
export async function startServe(env: Record<string, string>, opts: { timeoutMs?: number; nodeArgs?: string[]; stdoutFile?: string } = {}): Promise<ServeProcess> {
  const child = spawn(process.execPath, [...(opts.nodeArgs ?? []), BIN, 'serve'], { env: childEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  // Keep draining both pipes for the whole run (a full pipe would stall the server); keep a tail.
  const watchers: { pattern: RegExp; resolve: () => void }[] = [];
  let seen = '';
  const onData = (d: Buffer, which: 'out' | 'err') => {
    const text = d.toString();
    if (which === 'out') out = (out + text).slice(-20_000);
    else err = (err + text).slice(-20_000);
    // Matched against a sliding window, so a pattern split across two chunks is still found.
    seen = (seen + text).slice(-200_000);
    for (const w of watchers.splice(0)) {
      if (w.pattern.test(seen)) w.resolve();
      else watchers.push(w);
    }
  };
  child.stdout.on('data', (d: Buffer) => onData(d, 'out'));
  // Piped, so that the copy ends with stdout itself (which may close after the process exits).
  if (opts.stdoutFile) child.stdout.pipe(fs.createWriteStream(opts.stdoutFile));
  child.stderr.on('data', (d: Buffer) => onData(d, 'err'));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  const waitForOutput = (pattern: RegExp) =>
    pattern.test(seen) ? Promise.resolve() : new Promise<void>((resolve) => watchers.push({ pattern, resolve }));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`cubby serve did not start in time:\n${out}\n${err}`)), opts.timeoutMs ?? 60_000);
    void waitForOutput(/^\s+Data:\s+\S+/m).then(() => {
      clearTimeout(timer);
      resolve();
    });
    void exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`cubby serve exited with ${code ?? signal}:\n${out}\n${err}`));
    });
  });
  const base = /API \(R\):\s+(http:\/\/[^\s/]+)\/v1/.exec(out)?.[1] ?? '';
  const smtpPort = /SMTP:\s+smtp:\/\/\S+:(\d+)/.exec(out)?.[1];
  const sites = /Sites:\s+(http:\/\/)<slug>\.(\S+)/.exec(out);
  const pid = child.pid!;
  return {
    pid,
    base,
    smtpPort: smtpPort ? Number(smtpPort) : null,
    sites: sites ? `${sites[1]}${sites[2]}` : null,
    env,
    exited,
    waitForOutput,
    signal: (sig) => void child.kill(sig),
    memory: () => procMemory(pid),
    resetPeak: () => fs.writeFileSync(`/proc/${pid}/clear_refs`, '5'),
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** Runs `cubby admin …` with the server's environment and returns its JSON answer. */
export async function admin(env: Record<string, string>, args: string[]): Promise<any> {
  const { stdout } = await run(process.execPath, [BIN, 'admin', ...args], { env: childEnv(env) });
  const out = JSON.parse(stdout.trim().split('\n').pop()!);
  if (out.error) throw new Error(`cubby admin ${args[0]}: ${out.error}`);
  return out;
}

/** A person on `plan` (default paid: 5 GiB files) and a mailbox_admin key, made with the admin CLI. */
export async function adminUserAndKey(env: Record<string, string>, plan = 'paid'): Promise<{ email: string; key: string }> {
  const email = `bench-${randomBytes(4).toString('hex')}@example.com`;
  await admin(env, ['create-user', '--email', email, '--password', 'a long bench password', '--name', 'Bench', '--plan', plan]);
  const key = await admin(env, ['create-key', '--email', email]);
  return { email, key: key.api_key };
}
