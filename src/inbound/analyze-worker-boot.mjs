// Starts an analysis thread (src/inbound/analyze-pool.ts). From the compiled tree (bin/compiled.js)
// the module is JavaScript; from the sources it is TypeScript, and the app's loader does not reach
// worker threads: register tsx's loader here first, then load the module.
import { workerData } from 'node:worker_threads';

if (String(workerData.module).endsWith('.ts')) {
  const { register } = await import('tsx/esm/api');
  register();
}
await import(workerData.module);
