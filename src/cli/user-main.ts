import { Command } from 'commander';
import { registerUserCommands } from './commands/index.ts';

// The entry of the user commands (bin/cubby.js picks it for everything but serve, admin and help):
// it loads only the SDK and the commands, not the server's database and service modules, so that
// `cubby ls` starts in a fraction of the time `cubby serve` needs.

// CUBBY_DEBUG_RSS=1: the process's peak resident memory on stderr at exit, one JSON line (tests
// and benchmarks check that a large sync streams in flat memory).
if (process.env.CUBBY_DEBUG_RSS) {
  process.on('exit', () => process.stderr.write(`${JSON.stringify({ debug_max_rss_kib: process.resourceUsage().maxRSS })}\n`));
}

const program = new Command('cubby').description('Cubby: private file buckets with their own email addresses');
registerUserCommands(program);
await program.parseAsync(process.argv);
