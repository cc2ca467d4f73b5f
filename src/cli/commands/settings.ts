import type { Command } from 'commander';
import { action } from './context.ts';
import { usage } from './output.ts';

// Events and settings: cubby webhook set|show|rm|deliveries|test, cubby address show|rotate,
// cubby domains ls|add|verify|rm.

async function hmacB64(secret: string, data: string): Promise<string> {
  const raw = Uint8Array.from(atob(secret.replace(/^whsec_/, '')), (c) => c.charCodeAt(0));
  const key = await crypto.subtle.importKey('raw', raw, { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
  return Buffer.from(await crypto.subtle.sign('HMAC', key, new TextEncoder().encode(data))).toString('base64');
}

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
    .argument('<url>', 'your receiver')
    .requiredOption('--secret <whsec>', 'the signing secret to sign with')
    .option('--mailbox-id <id>', 'mailbox id to put in the sample', 'bkt_sample')
    .description('Send a signed sample email.received event to your receiver (from this computer)')
    .addHelpText('after', '\nExamples:\n  cubby webhook test http://localhost:3000/hooks --secret whsec_…')
    .action(
      action(async (ctx, url: string, o: { secret: string; mailboxId: string }) => {
        if (!/^whsec_/.test(o.secret)) throw usage('--secret must be a whsec_… signing secret');
        const id = `evt_test_${Date.now().toString(36)}`;
        const ts = Math.floor(Date.now() / 1000).toString();
        const body = JSON.stringify({ id, type: 'email.received', created_at: new Date().toISOString(), data: { account_id: 'acct_sample', mailbox_id: o.mailboxId, email_id: 'eml_sample', received_at: new Date().toISOString(), attachment_count: 0 } });
        const signature = `v1,${await hmacB64(o.secret, `${id}.${ts}.${body}`)}`;
        const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', 'webhook-id': id, 'webhook-timestamp': ts, 'webhook-signature': signature }, body });
        const result = { url, event_id: id, status: res.status, ok: res.ok };
        ctx.out.result(result, () => process.stdout.write(`${url} answered ${res.status}${res.ok ? '' : ' (not 2xx: Cubby would retry 408, 429 and 5xx)'}\n`));
        if (!res.ok) process.exitCode = 1;
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
