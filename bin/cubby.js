#!/usr/bin/env node
// Runs the TypeScript sources directly through tsx's loader: no build step.
import { register } from 'tsx/esm/api';

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
