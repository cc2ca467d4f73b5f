#!/usr/bin/env node
// Runs the TypeScript sources directly through tsx's loader: no build step.
// `serve` waits on many fsyncs at once (each received message and upload syncs its blobs and
// their directories on libuv's pool); the default pool of 4 threads queues them behind each other
// while the disk could take more. Read once, when the pool starts: set before any file I/O, and
// left alone when the operator set it.
if (process.argv[2] === 'serve' && !process.env.UV_THREADPOOL_SIZE) process.env.UV_THREADPOOL_SIZE = '16';
const { register } = await import('tsx/esm/api');

register();
// `cubby … | head`: the reader went away; stop quietly instead of crashing on EPIPE.
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (err) => {
    if (err.code === 'EPIPE') process.exit(process.exitCode ?? 0);
    throw err;
  });
}
// The user commands (over the SDK) start without loading the server's modules; serve, admin,
// help and --version go through the full program.
const first = process.argv[2];
const full = first === undefined || first.startsWith('-') || ['serve', 'admin', 'help'].includes(first);
await import(full ? '../src/cli/main.ts' : '../src/cli/user-main.ts');
