// Starts an analysis thread (src/inbound/analyze-pool.ts). The thread runs TypeScript, and the
// app's loader does not reach worker threads: register tsx's loader here, then load the module.
import { workerData } from 'node:worker_threads';
import { register } from 'tsx/esm/api';

register();
await import(workerData.module);
