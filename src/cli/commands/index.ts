import { Command, Option, type CommanderError } from 'commander';
import { CLIENT_VERSION } from '../../version.ts';
import { registerAuth } from './auth.ts';
import { registerMailboxes } from './mailboxes.ts';
import { registerFiles } from './files.ts';
import { registerSync } from './sync.ts';
import { registerMail } from './mail.ts';
import { registerSites } from './sites.ts';
import { registerSettings } from './settings.ts';
import { registerCompletion } from './completion.ts';
import { addExamples, registerHelp } from './examples.ts';
import { EXIT } from './output.ts';

// The user commands of `cubby` (over @cubby/sdk), beside the operator's `serve` and `admin`.

function exitCodes(cmd: Command): void {
  cmd.exitOverride((err: CommanderError) => {
    // help and --version exit 0; everything commander rejects is a usage error (2)
    process.exit(err.exitCode === 0 ? 0 : EXIT.usage);
  });
  for (const sub of cmd.commands) exitCodes(sub);
}

/** The options every user command takes, added to each command itself: the operator's `admin`
 * commands have options of the same names (--account) with other meanings, so they are not
 * program-wide. */
function addCommonOptions(cmd: Command): void {
  if (cmd.commands.length) {
    for (const sub of cmd.commands) addCommonOptions(sub);
    return;
  }
  cmd
    .option('--json', 'print JSON (one document, or JSON lines for streams)')
    .option('-q, --quiet', 'print only results, no notes or progress')
    .option('--no-color', 'no colours (also with NO_COLOR set, or when not a terminal)')
    .option('-p, --profile <name>', 'saved profile to use (default: the default profile, or CUBBY_PROFILE)')
    .option('--account <id>', 'act on another account the key was granted (CUBBY_ACCOUNT)')
    .addOption(new Option('--url <url>', 'Cubby server URL (CUBBY_URL)'))
    .addOption(new Option('--api-key <key>', 'API key (CUBBY_API_KEY)'));
}

export function registerUserCommands(program: Command): void {
  // Both entry points (src/cli/main.ts, src/cli/user-main.ts) answer --version; set it once.
  if (!program.options.some((o) => o.long === '--version')) program.version(CLIENT_VERSION, '-V, --version', 'print the version');
  const before = new Set(program.commands);
  registerAuth(program);
  registerMailboxes(program);
  registerFiles(program);
  registerSync(program);
  registerMail(program);
  registerSites(program);
  registerSettings(program);
  for (const cmd of program.commands) if (!before.has(cmd)) addCommonOptions(cmd);
  registerCompletion(program);
  addExamples(program);
  registerHelp(program);
  program.showSuggestionAfterError(true);
  program.addHelpText(
    'after',
    '\nStart with `cubby login`, then `cubby ls`. `cubby help COMMAND` shows examples.\nEvery user command takes --json, --quiet, --profile, --account, --url, --api-key.\nExit codes: 0 ok, 1 error, 2 usage, 3 not found, 4 permission, 5 conflict, 75 temporary (retry later).',
  );
  exitCodes(program);
}
