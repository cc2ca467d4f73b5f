import type { Command } from 'commander';
import { action } from './context.ts';
import { EXIT, usage } from './output.ts';

// Events and settings: cubby webhook set|show|rm|deliveries|test, cubby address show|rotate,
// cubby domains ls|add|verify|rm.

export function registerSettings(program: Command): void {
  const hook = program.command('webhook').description('The signed webhook of a mailbox (email.received)');
  hook
    .command('set')
    .argument('<mailbox>')
    .argument('<url>', 'public https:// URL')
    .option('--rotate-secret', 'issue a new signing secret')
    .description('Set the webhook URL; prints the signing secret once when one is issued')
    .addHelpText('after', '\nExamples:\n  cubby webhook set Invoices https://example.com/hooks/cubby')
    .action(
      action(async (ctx, ref: string, url: string, o: { rotateSecret?: boolean }) => {
        const box = await ctx.mailbox(ref);
        const w = await ctx.cubby().webhooks.set(box.id, url, { rotateSecret: o.rotateSecret });
        ctx.out.result(w, () => {
          process.stdout.write(`Webhook for ${box.title ?? box.id}: ${w.url}\n`);
          if (w.signing_secret) process.stdout.write(`Signing secret (shown once): ${w.signing_secret}\n`);
        });
      }),
    );
  hook
    .command('show')
    .argument('<mailbox>')
    .description('Show the webhook (never the secret)')
    .action(
      action(async (ctx, ref: string) => {
        const box = await ctx.mailbox(ref);
        const w = await ctx.cubby().webhooks.get(box.id);
        ctx.out.result(w, () => process.stdout.write(w ? `${w.url} (${w.event})\n` : 'No webhook.\n'));
      }),
    );
  hook
    .command('rm')
    .argument('<mailbox>')
    .description('Remove the webhook (waiting deliveries are cancelled)')
    .action(
      action(async (ctx, ref: string) => {
        const box = await ctx.mailbox(ref);
        const r = await ctx.cubby().webhooks.delete(box.id);
        ctx.out.result(r, () => process.stdout.write(`Removed the webhook of ${box.title ?? box.id}\n`));
      }),
    );
  hook
    .command('deliveries')
    .argument('<mailbox>')
    .option('--status <status>', 'pending, retrying, succeeded, failed or cancelled')
    .option('-n, --limit <n>', 'at most this many', '20')
    .description('The delivery log, newest first')
    .action(
      action(async (ctx, ref: string, o: { status?: string; limit: string }) => {
        const box = await ctx.mailbox(ref);
        const rows = [];
        for await (const d of ctx.cubby().webhooks.deliveries(box.id, { ...(o.status ? { status: o.status as never } : {}), limit: Math.min(100, Number(o.limit)) })) {
          rows.push(d);
          if (rows.length >= Number(o.limit)) break;
        }
        if (ctx.out.json) return ctx.out.result(rows);
        ctx.out.table(
          rows.map((d) => ({ id: d.id, event: d.event_id, status: d.status, attempts: d.attempt_count, http: d.last_status_code ?? '', error: d.last_error ?? '' })),
          ['id', 'event', 'status', 'attempts', 'http', 'error'],
        );
      }),
    );
  hook
    .command('test')
    .argument('<mailbox>')
    .option('--no-wait', 'return once the event is queued')
    .option('--timeout <seconds>', 'how long to wait for the first attempt', '30')
    .description('Have Cubby send a signed sample event (webhook.test) to the webhook, and wait for the first attempt')
    .addHelpText('after', '\nThe delivery is signed with the webhook\'s secret and retried like any other; it shows in\n`cubby webhook deliveries`. Exit code 0 when your receiver answered 2xx, 1 when it did not,\n75 when no attempt was made within --timeout.\n\nExamples:\n  cubby webhook test Invoices\n  cubby webhook test Invoices --no-wait --json')
    .action(
      action(async (ctx, ref: string, o: { wait: boolean; timeout: string }) => {
        const timeout = Number(o.timeout);
        if (!Number.isFinite(timeout) || timeout < 0) throw usage('--timeout must be a number of seconds');
        const box = await ctx.mailbox(ref);
        const cubby = ctx.cubby();
        const sent = await cubby.webhooks.sendTest(box.id);
        let delivery = sent.delivery;
        if (o.wait) {
          ctx.out.note(`Queued ${sent.event.id}; waiting for the first attempt…`);
          const deadline = Date.now() + timeout * 1000;
          // The worker makes the first attempt within moments; poll the delivery log for it.
          while (delivery.attempt_count === 0 && Date.now() < deadline) {
            await new Promise((r) => setTimeout(r, 250));
            for await (const d of cubby.webhooks.deliveries(box.id, { limit: 20 })) {
              if (d.id === delivery.id) {
                delivery = d;
                break;
              }
            }
          }
        }
        const last = delivery.attempts[delivery.attempts.length - 1];
        ctx.out.result({ event: sent.event, delivery }, () => {
          if (!o.wait) return void process.stdout.write(`Queued ${sent.event.id} (delivery ${delivery.id}); see cubby webhook deliveries ${ref}\n`);
          if (delivery.status === 'succeeded') process.stdout.write(`Delivered ${sent.event.id}: your receiver answered ${delivery.last_status_code} in ${last?.duration_ms ?? '?'} ms\n`);
          else if (delivery.attempt_count === 0) process.stdout.write(`Not attempted within ${timeout} s; it stays queued (see cubby webhook deliveries ${ref})\n`);
          else process.stdout.write(`Not delivered (${delivery.status}): ${delivery.last_error ?? `HTTP ${delivery.last_status_code}`}${delivery.next_attempt_at ? `; next attempt at ${delivery.next_attempt_at}` : ''}\n`);
        });
        if (o.wait && delivery.status !== 'succeeded') process.exitCode = delivery.attempt_count === 0 ? EXIT.temporary : EXIT.error;
      }),
    );

  const address = program.command('address').description('The email address of a mailbox');
  address
    .command('show')
    .argument('<mailbox>')
    .description('Address, aliases, sender allowlist')
    .action(
      action(async (ctx, ref: string) => {
        const box = await ctx.mailbox(ref);
        const s = await ctx.cubby().addresses.get(box.id);
        ctx.out.result(s, () => {
          const aliases = (s.aliases as { address: string }[] | undefined) ?? [];
          process.stdout.write(`${s.address ?? box.email.address}\n${aliases.map((a) => `  alias ${a.address}\n`).join('')}`);
        });
      }),
    );
  address
    .command('rotate')
    .argument('<mailbox>')
    .option('--username <name>', 'new name (default: generated)')
    .option('--domain <domain>', 'a ready domain of the account, or platform')
    .option('--keep-old', 'keep the old address as an alias')
    .option('--drop-old', 'retire the old address')
    .description('Give the mailbox a new address (paid plans)')
    .action(
      action(async (ctx, ref: string, o: { username?: string; domain?: string; keepOld?: boolean; dropOld?: boolean }) => {
        const box = await ctx.mailbox(ref);
        const current = await ctx.cubby().addresses.get(box.id);
        const s = await ctx.cubby().addresses.rotate(box.id, {
          confirm: true,
          expected_address: (current.address ?? box.email.address)!,
          ...(o.username ? { username: o.username } : {}),
          ...(o.domain ? { domain: o.domain } : {}),
          ...(o.keepOld ? { keep_old_as_alias: true } : o.dropOld ? { keep_old_as_alias: false } : {}),
        } as never);
        ctx.out.result(s, () => process.stdout.write(`New address: ${s.address}\n`));
      }),
    );

  const domains = program.command('domains').description('Custom email domains of the account');
  domains
    .command('ls', { isDefault: true })
    .description('List domains')
    .action(
      action(async (ctx) => {
        const rows = await ctx.cubby().domains.list({ limit: 100 }).toArray();
        if (ctx.out.json) return ctx.out.result(rows);
        if (!rows.length) return ctx.out.note('No custom domains. Add one: cubby domains add mail.example.com');
        ctx.out.table(rows.map((d) => ({ id: d.id, hostname: d.hostname, status: d.status })), ['id', 'hostname', 'status']);
      }),
    );
  const printRecords = (ctx: Parameters<Parameters<typeof action>[0]>[0], d: Record<string, unknown>) => {
    const records = (d.required_dns_records ?? d.dns_records ?? []) as { type?: string; name?: string; host?: string; value?: string; content?: string; priority?: number; purpose?: string }[];
    if (!records.length) return;
    process.stdout.write('\nPublish these DNS records:\n');
    ctx.out.table(
      records.map((r) => ({ type: r.type ?? '', name: r.name ?? r.host ?? '', value: `${r.priority !== undefined ? `${r.priority} ` : ''}${r.value ?? r.content ?? ''}`, purpose: r.purpose ?? '' })),
      ['type', 'name', 'value', 'purpose'],
    );
  };
  domains
    .command('add')
    .argument('<hostname>')
    .description('Claim a domain; prints the DNS records to publish')
    .action(
      action(async (ctx, hostname: string) => {
        const d = await ctx.cubby().domains.create(hostname);
        ctx.out.result(d, () => {
          process.stdout.write(`Added ${d.hostname} (${d.id}), ${d.status}\n`);
          printRecords(ctx, d);
          process.stdout.write(`\nThen: cubby domains verify ${d.hostname}\n`);
        });
      }),
    );
  const domainByRef = async (ctx: Parameters<Parameters<typeof action>[0]>[0], ref: string) => {
    for await (const d of ctx.cubby().domains.list({ limit: 100 })) if (d.id === ref || d.hostname === ref.toLowerCase()) return d;
    const { notFound } = await import('./output.ts');
    throw notFound(`No domain ${ref} (see cubby domains ls).`, 'EMAIL_DOMAIN_NOT_FOUND');
  };
  domains
    .command('show')
    .argument('<domain>', 'hostname or id')
    .description('Status and DNS records')
    .action(
      action(async (ctx, ref: string) => {
        const d = await ctx.cubby().domains.get((await domainByRef(ctx, ref)).id);
        ctx.out.result(d, () => {
          process.stdout.write(`${d.hostname} (${d.id}): ${d.status}\n`);
          printRecords(ctx, d);
        });
      }),
    );
  domains
    .command('verify')
    .argument('<domain>', 'hostname or id')
    .description('Check the DNS records again (queued; see `cubby domains show`)')
    .action(
      action(async (ctx, ref: string) => {
        const d = await ctx.cubby().domains.verify((await domainByRef(ctx, ref)).id);
        ctx.out.result(d, () => process.stdout.write(`Checking ${d.hostname}: ${d.status}\n`));
      }),
    );
  domains
    .command('rm')
    .argument('<domain>', 'hostname or id')
    .description('Remove a domain (not while mailbox addresses use it)')
    .action(
      action(async (ctx, ref: string) => {
        const d = await domainByRef(ctx, ref);
        const r = await ctx.cubby().domains.delete(d.id, d.hostname);
        ctx.out.result(r, () => process.stdout.write(`Removed ${d.hostname}\n`));
      }),
    );
}
