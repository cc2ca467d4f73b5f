import type { Command } from 'commander';

// Examples for `cubby help COMMAND` (and COMMAND --help) of the commands whose definitions do not
// carry their own: one table, so every command shows some.

const EXAMPLES: Record<string, string[]> = {
  'mailboxes ls': ['cubby mailboxes ls', 'cubby mailboxes ls --archived --json'],
  'mailboxes create': ['cubby mailboxes create Invoices', 'cubby mailboxes create "Team inbox" --json'],
  'mailboxes show': ['cubby mailboxes show Invoices', 'cubby mailboxes show invoices-7f3k@cubby.example --json'],
  'mailboxes rename': ['cubby mailboxes rename Invoices "Invoices 2026"'],
  'mailboxes archive': ['cubby mailboxes archive Invoices'],
  'mailboxes unarchive': ['cubby mailboxes unarchive Invoices'],
  'mailboxes delete': ['cubby mailboxes delete Invoices            # asks for the confirmation string', 'cubby mailboxes delete bkt_01J… --yes     # scripts'],
  versions: ['cubby versions Notes:todo.md', 'cubby versions Notes:todo.md --json'],
  mv: ['cubby mv Notes:todo.md done/todo.md', 'cubby mv Notes:draft.md Notes:posts/'],
  'mail ls': ['cubby mail ls Invoices', 'cubby mail ls Invoices --unread --from billing@example.com', 'cubby mail ls Invoices --subject invoice --since 2026-11-01 --json'],
  'mail show': ['cubby mail show eml_01J…', 'cubby mail show eml_01J… --json'],
  'mail get': ['cubby mail get eml_01J… --out ./mail'],
  'mail watch': ['cubby mail watch Invoices', 'cubby mail watch Invoices --json | jq .subject'],
  'mail send': ['cubby mail send Invoices --to ann@example.com --subject Hello --text "Hi Ann"', 'cubby mail send Invoices --to ann@example.com -s Report --text-file body.txt --attach report.pdf', 'echo "Hi" | cubby mail send Invoices --to ann@example.com -s Hello'],
  'mail reply': ['cubby mail reply eml_01J… --text "Thanks, paid."'],
  'mail read': ['cubby mail read eml_01J… eml_01K…'],
  'mail unread': ['cubby mail unread eml_01J…'],
  unpublish: ['cubby unpublish Website', 'cubby unpublish Website --preview'],
  'sites ls': ['cubby sites ls', 'cubby sites ls --json'],
  'webhook set': ['cubby webhook set Invoices https://example.com/hooks/cubby', 'cubby webhook set Invoices https://example.com/hooks/cubby --rotate-secret'],
  'webhook show': ['cubby webhook show Invoices'],
  'webhook rm': ['cubby webhook rm Invoices'],
  'webhook deliveries': ['cubby webhook deliveries Invoices', 'cubby webhook deliveries Invoices --status failed --json'],
  'address show': ['cubby address show Invoices'],
  'address rotate': ['cubby address rotate Invoices', 'cubby address rotate Invoices --username billing --domain mail.example.com --keep-old'],
  'domains ls': ['cubby domains ls'],
  'domains add': ['cubby domains add mail.example.com'],
  'domains show': ['cubby domains show mail.example.com'],
  'domains verify': ['cubby domains verify mail.example.com'],
  'domains rm': ['cubby domains rm mail.example.com'],
  profiles: ['cubby profiles', 'cubby profiles --json'],
};

const pathOf = (cmd: Command): string => {
  const names: string[] = [];
  for (let c: Command | null = cmd; c?.parent; c = c.parent) names.unshift(c.name());
  return names.join(' ');
};

/** Adds the table's examples to every command that has none of its own. */
export function addExamples(program: Command): void {
  const visit = (cmd: Command) => {
    const examples = EXAMPLES[pathOf(cmd)];
    // afterHelp listeners are the commands' own help texts (addHelpText('after')): keep those.
    if (examples && (cmd as unknown as NodeJS.EventEmitter).listenerCount('afterHelp') === 0) cmd.addHelpText('after', `\nExamples:\n${examples.map((e) => `  ${e}`).join('\n')}`);
    for (const sub of cmd.commands) visit(sub);
  };
  for (const cmd of program.commands) visit(cmd);
}

/** `cubby help [COMMAND...]`: help of nested commands too (`cubby help mail send`). */
export function registerHelp(program: Command): void {
  program.helpCommand(false);
  program
    .command('help')
    .argument('[command...]', 'a command, e.g. sync or mail send')
    .description('Show help for a command, with examples')
    .action((names: string[]) => {
      let cmd: Command = program;
      for (const name of names) {
        const next = cmd.commands.find((c) => c.name() === name || c.aliases().includes(name));
        if (!next) {
          process.stderr.write(`error: unknown command '${names.join(' ')}' (see cubby help)\n`);
          process.exit(2);
        }
        cmd = next;
      }
      cmd.outputHelp();
    });
}
