#!/usr/bin/env node
// Runs the program from its compiled tree (bin/compiled.js: built on first use and whenever a
// source changes, so there is no build step to remember), or, when that cannot be had or
// CUBBY_RUNTIME=tsx asks for it, the TypeScript sources through tsx's loader.
import { pathToFileURL } from 'node:url';

// `serve` waits on many fsyncs at once (each received message and upload syncs its blobs and
// their directories on libuv's pool); the default pool of 4 threads queues them behind each other
// while the disk could take more. Read once, when the pool starts: set before any file I/O, and
// left alone when the operator set it.
const serving = process.argv[2] === 'serve';
if (serving && !process.env.UV_THREADPOOL_SIZE) process.env.UV_THREADPOOL_SIZE = '16';
const { compiledTree, keepFresh } = await import('./compiled.js');
// A server says why it runs from the sources (it then needs more memory); a command stays quiet.
const onFallback = (err) => serving && console.error(`cubby: running the TypeScript sources through tsx: the compiled tree could not be built (${err.message})`);
const tree = await compiledTree(process.env, undefined, { onFallback });
if (tree) keepFresh(tree);
else {
  const { register } = await import('tsx/esm/api');
  register();
}
// `cubby … | head`: the reader went away; stop quietly instead of crashing on EPIPE.
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (err) => {
    if (err.code === 'EPIPE') process.exit(process.exitCode ?? 0);
    throw err;
  });
}
// The user commands (over the SDK) start without loading the server's modules, and so do
// `--version` and `help COMMAND` for a user command (both programs print the same for them); serve,
// admin, the program's own help (`cubby`, `cubby help`, `--help`) and help for serve or admin go
// through the full program.
const [first, second] = process.argv.slice(2);
const alone = process.argv.length === 3;
const full =
  first === undefined ||
  ['serve', 'admin'].includes(first) ||
  (first.startsWith('-') && !(alone && ['--version', '-V'].includes(first))) ||
  (first === 'help' && (second === undefined || second.startsWith('-') || ['serve', 'admin', 'help'].includes(second)));
const entry = full ? 'src/cli/main' : 'src/cli/user-main';
await import(tree ? pathToFileURL(`${tree}/${entry}.js`).href : `../${entry}.ts`);
