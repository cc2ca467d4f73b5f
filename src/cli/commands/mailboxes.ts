import readline from 'node:readline/promises';
import type { Command } from 'commander';
import type { Mailbox } from '../../../packages/sdk/src/index.ts';
import { action } from './context.ts';
import { CliError, EXIT, formatBytes, usage } from './output.ts';

// cubby mailboxes ls|create|show|rename|archive|unarchive|delete

export const mailboxRow = (m: Mailbox) => ({
  id: m.id,
  title: m.title ?? '',
  address: m.email.address ?? '',
  files: m.files_count,
  size: formatBytes(m.storage_bytes),
  unread: m.email.unread_count,
  status: m.archived ? 'archived' : 'active',
});

function showMailbox(m: Mailbox): string {
  return [
    `${m.title ?? '(untitled)'}  ${m.id}${m.archived ? '  [archived]' : ''}`,
    `  Address:   ${m.email.address ?? '—'}`,
    `  Files:     ${m.files_count} (${formatBytes(m.storage_bytes)})`,
    `  Mail:      ${m.email.message_count} messages, ${m.email.unread_count} unread`,
    `  Version:   ${m.version_number}`,
    `  Dashboard: ${m.dashboard_url}`,
  ].join('\n');
}

async function confirm(question: string): Promise<string> {
  if (!process.stdin.isTTY) throw usage('Confirmation needed: pass --yes (no terminal to ask on).');
  const rl = readline.createInterface({ input: process.stdin, output: process.stderr });
  try {
    return (await rl.question(question)).trim();
  } finally {
    rl.close();
  }
}

export function registerMailboxes(program: Command): void {
  const mb = program.command('mailboxes').alias('mailbox').description('List and manage mailboxes');

  mb.command('ls', { isDefault: true })
    .description('List mailboxes')
    .option('--archived', 'archived mailboxes only')
    .option('--all', 'active and archived')
    .option('--query <text>', 'text in title, address or id')
    .addHelpText('after', '\nExamples:\n  cubby mailboxes ls\n  cubby mailboxes ls --all --json')
    .action(
      action(async (ctx, o: { archived?: boolean; all?: boolean; query?: string }) => {
        const status = o.all ? 'all' : o.archived ? 'archived' : 'active';
        const rows: Mailbox[] = [];
        for await (const m of ctx.cubby().mailboxes.list({ status, ...(o.query ? { q: o.query } : {}), limit: 100 })) rows.push(m);
        if (ctx.out.json) return ctx.out.result(rows);
        if (!rows.length) return ctx.out.note('No mailboxes. Create one: cubby mailboxes create "Name"');
        ctx.out.table(rows.map(mailboxRow), ['id', 'title', 'address', 'files', 'size', 'unread', 'status']);
      }),
    );

  mb.command('create')
    .argument('<title>')
    .description('Create a mailbox (it gets its own email address)')
    .option('--description <text>')
    .option('--username <name>', 'local part of the address')
    .addHelpText('after', '\nExamples:\n  cubby mailboxes create Invoices\n  cubby mailboxes create "Team notes" --username notes')
    .action(
      action(async (ctx, title: string, o: { description?: string; username?: string }) => {
        const m = await ctx.cubby().mailboxes.create({ title, ...(o.description ? { description: o.description } : {}), ...(o.username ? { email: { username: o.username } } : {}) });
        ctx.out.result(m, () => process.stdout.write(`Created ${m.title} (${m.id}), address ${m.email.address}\n`));
      }),
    );

  mb.command('show')
    .argument('<mailbox>', 'id, title or address')
    .description('Show one mailbox')
    .action(
      action(async (ctx, ref: string) => {
        const m = await ctx.cubby().mailboxes.get((await ctx.mailbox(ref)).id);
        ctx.out.result(m, () => process.stdout.write(`${showMailbox(m)}\n`));
      }),
    );

  mb.command('rename')
    .argument('<mailbox>')
    .argument('<title>')
    .description('Change a mailbox title')
    .action(
      action(async (ctx, ref: string, title: string) => {
        const m = await ctx.cubby().mailboxes.update((await ctx.mailbox(ref)).id, { title });
        ctx.out.result(m, () => process.stdout.write(`Renamed ${m.id} to ${m.title}\n`));
      }),
    );

  for (const verb of ['archive', 'unarchive'] as const) {
    mb.command(verb)
      .argument('<mailbox>')
      .description(verb === 'archive' ? 'Archive a mailbox (stops receiving; needed before delete)' : 'Bring an archived mailbox back')
      .action(
        action(async (ctx, ref: string) => {
          const id = (await ctx.mailbox(ref)).id;
          const m = await ctx.cubby().mailboxes[verb](id);
          ctx.out.result(m, () => process.stdout.write(`${verb === 'archive' ? 'Archived' : 'Unarchived'} ${m.title ?? m.id} (${m.id})\n`));
        }),
      );
  }

  mb.command('delete')
    .argument('<mailbox>')
    .description('Delete an archived mailbox and everything in it (asks for its confirmation string)')
    .option('-y, --yes', 'do not ask (scripts)')
    .addHelpText('after', '\nExamples:\n  cubby mailboxes archive Old && cubby mailboxes delete Old\n  cubby mailboxes delete bkt_… --yes')
    .action(
      action(async (ctx, ref: string, o: { yes?: boolean }) => {
        const m = await ctx.cubby().mailboxes.get((await ctx.mailbox(ref)).id);
        const expected = m.delete?.confirmation;
        if (!m.archived) throw new CliError(`Archive it first: cubby mailboxes archive ${m.id}`, EXIT.conflict, 'MAILBOX_NOT_ARCHIVED');
        if (!expected) throw new CliError('This key may not delete the mailbox.', EXIT.permission, 'PERMISSION_DENIED');
        if (!o.yes) {
          const typed = await confirm(`This deletes ${m.title ?? m.id} with ${m.files_count} files for good. Type "${expected}" to confirm: `);
          if (typed !== expected) throw new CliError('Not confirmed; nothing deleted.', EXIT.error, 'NOT_CONFIRMED');
        }
        const r = await ctx.cubby().mailboxes.delete(m.id, expected);
        ctx.out.result(r, () => process.stdout.write(`Deleted ${m.title ?? m.id} (${m.id})\n`));
      }),
    );
}
