import type { Command } from 'commander';
import { usage } from './output.ts';

// `cubby completion bash|zsh|fish`: a completion script built from the command tree itself, so it
// never falls behind the commands.

function tree(program: Command): { name: string; description: string; subs: { name: string; description: string }[]; options: string[] }[] {
  return program.commands
    .filter((c) => c.name() !== 'help')
    .map((c) => ({
      name: c.name(),
      description: c.description().replace(/[\n'"]/g, ' '),
      subs: c.commands.map((s) => ({ name: s.name(), description: s.description().replace(/[\n'"]/g, ' ') })),
      options: [...c.options, ...program.options].map((o) => o.long).filter((x): x is string => Boolean(x)),
    }));
}

export function completionScript(program: Command, shell: string): string {
  const cmds = tree(program);
  const top = cmds.map((c) => c.name).join(' ');
  if (shell === 'bash' || shell === 'zsh') {
    const cases = cmds
      .map((c) => `    ${c.name}) opts="${[...c.subs.map((s) => s.name), ...c.options].join(' ')}" ;;`)
      .join('\n');
    const body = `# cubby completion (${shell}); add to your shell: source <(cubby completion ${shell})
${shell === 'zsh' ? 'autoload -U +X bashcompinit && bashcompinit\n' : ''}_cubby() {
  local cur cmd opts
  cur="\${COMP_WORDS[COMP_CWORD]}"
  cmd="\${COMP_WORDS[1]}"
  if [ "$COMP_CWORD" -eq 1 ]; then
    COMPREPLY=( $(compgen -W "${top} --help --version" -- "$cur") )
    return
  fi
  case "$cmd" in
${cases}
    *) opts="" ;;
  esac
  COMPREPLY=( $(compgen -W "$opts" -- "$cur") $(compgen -f -- "$cur") )
}
complete -o filenames -F _cubby cubby
`;
    return body;
  }
  if (shell === 'fish') {
    const lines = ['# cubby completion (fish); save as ~/.config/fish/completions/cubby.fish', 'complete -c cubby -f'];
    for (const c of cmds) {
      lines.push(`complete -c cubby -n '__fish_use_subcommand' -a '${c.name}' -d '${c.description}'`);
      for (const s of c.subs) lines.push(`complete -c cubby -n '__fish_seen_subcommand_from ${c.name}' -a '${s.name}' -d '${s.description}'`);
      for (const o of new Set(c.options)) lines.push(`complete -c cubby -n '__fish_seen_subcommand_from ${c.name}' -l '${o.replace(/^--/, '')}'`);
    }
    return `${lines.join('\n')}\n`;
  }
  throw usage(`No completion for "${shell}": use bash, zsh or fish.`);
}

export function registerCompletion(program: Command): void {
  program
    .command('completion')
    .argument('<shell>', 'bash, zsh or fish')
    .description('Print a shell completion script')
    .addHelpText('after', '\nExamples:\n  source <(cubby completion bash)     # in ~/.bashrc\n  source <(cubby completion zsh)      # in ~/.zshrc\n  cubby completion fish > ~/.config/fish/completions/cubby.fish')
    .action((shell: string) => {
      try {
        process.stdout.write(completionScript(program, shell));
      } catch (err) {
        process.stderr.write(`error: ${(err as Error).message}\n`);
        process.exitCode = 2;
      }
    });
}
