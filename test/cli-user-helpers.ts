import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

// The `cubby` user commands as people and scripts run them: a child process with its own config
// folder (CUBBY_CONFIG_DIR) and no terminal, talking to the test app over HTTP.

export const ROOT = path.resolve(import.meta.dirname, '..');

export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
  /** stdout parsed as one JSON document, when it is one. */
  json: any;
}

export function cliEnv(extra: Record<string, string> = {}): Record<string, string> {
  // Only what the CLI needs: nothing of the test runner's CUBBY_* settings leaks in.
  return { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? os.tmpdir(), ...extra };
}

/** Starts `cubby ARGS`, or with `bin` another program (e.g. script(1) for a terminal) with ARGS as they are. */
export function startCli(args: string[], env: Record<string, string>, opts: { cwd?: string; bin?: string } = {}): ChildProcess {
  const [cmd, argv] = opts.bin ? [opts.bin, args] : [process.execPath, [path.join(ROOT, 'bin/cubby.js'), ...args]];
  const child = spawn(cmd, argv, { cwd: opts.cwd ?? ROOT, env, stdio: ['pipe', 'pipe', 'pipe'] });
  // Everything printed from the start, so that a wait begun late still sees output that came early
  // (a line can arrive while the test is still awaiting the action that caused it).
  const printed = { stdout: '', stderr: '' };
  child.stdout!.on('data', (d) => (printed.stdout += d));
  child.stderr!.on('data', (d) => (printed.stderr += d));
  printedBy.set(child, printed);
  return child;
}

const printedBy = new WeakMap<ChildProcess, { stdout: string; stderr: string }>();

export function finished(child: ChildProcess, input?: string | Buffer): Promise<CliRun> {
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d) => (stdout += d));
  child.stderr!.on('data', (d) => (stderr += d));
  if (input !== undefined) child.stdin!.end(input);
  else child.stdin!.end();
  return new Promise((resolve) => {
    child.on('close', (code, signal) => {
      let json: any;
      try {
        json = stdout.trim() ? JSON.parse(stdout) : undefined;
      } catch {
        json = undefined;
      }
      resolve({ code: code ?? (signal ? 128 : 1), stdout, stderr, json });
    });
  });
}

export function cli(args: string[], env: Record<string, string>, opts: { input?: string | Buffer; cwd?: string; bin?: string } = {}): Promise<CliRun> {
  return finished(startCli(args, env, opts), opts.input);
}

/** Resolves with all the child has printed (stdout or stderr) since it started, once `pred` matches it. */
export function waitForOutput(child: ChildProcess, pred: (text: string) => boolean, which: 'stdout' | 'stderr' = 'stdout'): Promise<string> {
  const printed = printedBy.get(child);
  if (!printed) throw new Error('waitForOutput needs a child started with startCli');
  return new Promise((resolve, reject) => {
    const check = () => {
      if (!pred(printed[which])) return false;
      child[which]!.off('data', onData);
      child.off('close', onClose);
      resolve(printed[which]);
      return true;
    };
    // Runs after startCli's own listener (added first), so `printed` already holds this chunk.
    const onData = () => void check();
    const onClose = () => {
      if (!check()) reject(new Error(`exited before the expected output; got: ${printed[which]}`));
    };
    if (check()) return;
    child[which]!.on('data', onData);
    child.once('close', onClose);
  });
}

export function tempDir(prefix = 'cubby-cli-'): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}
