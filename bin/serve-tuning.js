// How `cubby serve` tunes the Node process it runs in, before the program's modules load. Each
// setting is left alone when the operator set it. docs/operations.md ("Process tuning") and
// docs/bench-smtp.md (the measurements) say why each one is there.
import v8 from 'node:v8';

/**
 * V8 optimizes a function once it has run a budget of bytecode (`--interrupt-budget`, 67,584 in
 * Node 20's V8). A server's hot paths get there within seconds at that budget too, but under load
 * the first tens of seconds then run unoptimized code; a quarter of it lets the optimizing compiler
 * catch up sooner: 5 KiB messages faster in eight of ten pairs and a lower peak RSS in every pair,
 * 100 KiB messages unchanged. The flag is process-wide, so the worker threads get it as well.
 */
export const INTERRUPT_BUDGET = 16_896;

/** Sets up the process for serving; `execArgv` is node's own command line (process.execArgv). */
export function tuneForServing(env = process.env, execArgv = process.execArgv) {
  // Each received message and upload syncs its blobs and their directories on libuv's pool; the
  // default of 4 threads queues those fsyncs behind each other while the disk could take more.
  // Read once, when the pool starts: set before any file I/O.
  if (!env.UV_THREADPOOL_SIZE) env.UV_THREADPOOL_SIZE = '16';
  // Node does not take V8's tiering flags in NODE_OPTIONS, so only its command line can hold the
  // operator's own value.
  if (!execArgv.some((arg) => /^--interrupt[-_]budget(=|$)/.test(arg))) v8.setFlagsFromString(`--interrupt-budget=${INTERRUPT_BUDGET}`);
}
