// Run by test/sqlite-write-gate.test.ts as a child process (`node --import tsx`): a write gate
// closed, a wait on it as the process's only work, and an unref'd thread that opens it 300 ms later
// (as the checkpoint thread does). Prints "opened" if the process lived to see it.
import { Worker } from 'node:worker_threads';
import { WriteGate } from '../src/db/write-gate.ts';

const gate = new WriteGate();
Atomics.store(gate.state, 0, 1);
const opener = new Worker(
  `const { workerData } = require('node:worker_threads');
   setTimeout(() => { const s = new Int32Array(workerData); Atomics.store(s, 0, 0); Atomics.notify(s, 0); }, 300);`,
  { eval: true, workerData: gate.buffer },
);
opener.unref();
void gate.whenOpen().then(() => console.log(gate.closed ? 'gave up' : 'opened'));
