import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { INTERRUPT_BUDGET, tuneForServing } from '../bin/serve-tuning.js';

// `cubby serve` lowers V8's tier-up budget (bin/serve-tuning.js) with v8.setFlagsFromString, after
// the process has started. These tests check, in child processes, that this Node takes the flag at
// that point on the event loop and in worker threads (the analysis pool), and that an operator's
// own value on node's command line is kept.

const TUNING = fileURLToPath(new URL('../bin/serve-tuning.js', import.meta.url));
const run = promisify(execFile);

// Calls a small function until V8 reports it optimized (%GetOptimizationStatus bit 16), in this
// thread and then in a worker; compilation is synchronous (--no-concurrent-recompilation), so the
// count depends only on the budget.
const COUNT_CALLS = `
  function work(n) { let s = 0; for (let i = 0; i < 50; i++) s += (n * i) % 7; return s; }
  let calls = 0;
  while (calls < 100000 && !(%GetOptimizationStatus(work) & 16)) work(calls++);
  return calls;
`;

async function callsUntilOptimized(options: { tune: boolean; nodeArgs?: string[] }): Promise<{ main: number; worker: number }> {
  const script = [
    `const { tuneForServing } = await import(${JSON.stringify(TUNING)});`,
    options.tune ? 'tuneForServing({}, process.execArgv);' : '',
    `const count = () => { ${COUNT_CALLS} };`,
    'const main = count();',
    'const { Worker } = await import("node:worker_threads");',
    `const worker = new Worker(${JSON.stringify(`import("node:worker_threads").then(({ parentPort }) => parentPort.postMessage((() => { ${COUNT_CALLS} })()))`)}, { eval: true });`,
    'const inWorker = await new Promise((resolve, reject) => { worker.once("message", resolve); worker.once("error", reject); });',
    'console.log(JSON.stringify({ main, worker: inWorker }));',
  ].join('\n');
  const args = ['--allow-natives-syntax', '--no-concurrent-recompilation', ...(options.nodeArgs ?? []), '--input-type=module', '-e', script];
  const { stdout } = await run(process.execPath, args, { timeout: 30_000 });
  return JSON.parse(stdout);
}

describe('serve tuning', () => {
  it('lowers the tier-up budget after start-up, on the event loop and in worker threads', async () => {
    const untuned = await callsUntilOptimized({ tune: false });
    const tuned = await callsUntilOptimized({ tune: true });
    expect(untuned.main).toBeGreaterThan(0);
    expect(tuned.main).toBeLessThan(untuned.main);
    expect(tuned.worker).toBeLessThan(untuned.worker);
    // The same as the flag given on node's command line.
    expect(await callsUntilOptimized({ tune: false, nodeArgs: [`--interrupt-budget=${INTERRUPT_BUDGET}`] })).toEqual(tuned);
  });

  it("keeps an operator's own budget from node's command line", async () => {
    const untuned = await callsUntilOptimized({ tune: false });
    expect(await callsUntilOptimized({ tune: true, nodeArgs: ['--interrupt-budget=67584'] })).toEqual(untuned);
    expect(await callsUntilOptimized({ tune: true, nodeArgs: ['--interrupt_budget=67584'] })).toEqual(untuned);
  });

  it("sizes libuv's pool unless the operator did", () => {
    const env: Record<string, string> = {};
    tuneForServing(env, [`--interrupt-budget=${INTERRUPT_BUDGET}`]);
    expect(env.UV_THREADPOOL_SIZE).toBe('16');
    const own = { UV_THREADPOOL_SIZE: '4' };
    tuneForServing(own, [`--interrupt-budget=${INTERRUPT_BUDGET}`]);
    expect(own.UV_THREADPOOL_SIZE).toBe('4');
  });
});
