import fs from 'node:fs';
import path from 'node:path';
import type { Command } from 'commander';
import { CubbyError, type EmailDetail, type EmailSummary } from '../../../packages/sdk/src/node.ts';
import { action, type Ctx } from './context.ts';
import { stateFile } from './config-file.ts';
import { EXIT, notFound, usage } from './output.ts';

// Mail: cubby mail ls | show | get | watch | send | reply | read | unread. What senders wrote is
// untrusted: `show` marks it as such, and never interprets it (text only, no HTML).

const who = (list: { address: string; name?: string | null }[] | undefined) => (list ?? []).map((a) => (a.name ? `${a.name} <${a.address}>` : a.address)).join(', ');

function summaryLine(e: EmailSummary): string {
  const from = e.direction === 'sent' ? `to ${who(e.to_addresses)}` : who(e.from_addresses);
  return `${e.read ? ' ' : '*'} ${e.id}  ${e.received_at.slice(0, 16).replace('T', ' ')}  ${from.slice(0, 40).padEnd(40)}  ${e.withheld ? '(withheld)' : (e.subject ?? '(no subject)')}`;
}

/** Finds an email by id: in the given mailbox, or in any mailbox the key can read. */
async function findEmail(ctx: Ctx, id: string, mailboxRef?: string): Promise<{ mailboxId: string; email: EmailDetail }> {
  const cubby = ctx.cubby();
  const tryIn = async (mailboxId: string) => {
    try {
      return await cubby.emails.get(mailboxId, id);
    } catch (err) {
      if (err instanceof CubbyError && err.status === 404) return null;
      throw err;
    }
  };
  if (mailboxRef) {
    const box = await ctx.mailbox(mailboxRef);
    const email = await tryIn(box.id);
    if (email) return { mailboxId: box.id, email };
  } else {
    for await (const m of cubby.mailboxes.list({ status: 'all', limit: 100 })) {
      const email = await tryIn(m.id);
      if (email) return { mailboxId: m.id, email };
    }
  }
  throw notFound(`No email ${id}${mailboxRef ? ` in ${mailboxRef}` : ''}.`, 'EMAIL_NOT_FOUND');
}

function readBody(o: { text?: string; textFile?: string }): string {
  if (o.text !== undefined && o.textFile !== undefined) throw usage('Give --text or --text-file, not both.');
  if (o.text !== undefined) return o.text;
  if (o.textFile !== undefined) return fs.readFileSync(o.textFile === '-' ? 0 : o.textFile, 'utf8');
  if (!process.stdin.isTTY) return fs.readFileSync(0, 'utf8');
  throw usage('The message needs a body: --text, --text-file FILE, or standard input.');
}

/** Uploads local attachments into the mailbox (outbox/…) and returns their file ids. */
async function attach(ctx: Ctx, mailboxId: string, files: string[]): Promise<string[]> {
  const ids: string[] = [];
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  for (const f of files) {
    if (!fs.statSync(f, { throwIfNoEntry: false })?.isFile()) throw notFound(`No such file to attach: ${f}`, 'LOCAL_NOT_FOUND');
    const saved = await ctx.cubby().uploadPath(mailboxId, `outbox/${stamp}/${path.basename(f)}`, f);
    ids.push(saved.file.id);
  }
  return ids;
}

const collect = (v: string, prev: string[] = []) => [...prev, ...v.split(',').map((s) => s.trim()).filter(Boolean)];

export function registerMail(program: Command): void {
  const mail = program.command('mail').description('Read, watch and send email');

  mail
    .command('ls')
    .argument('<mailbox>', 'id, title or address')
    .option('--unread', 'unread only')
    .option('--from <address>', 'exact sender address')
    .option('--subject <text>', 'text in the subject')
    .option('--since <date>', 'received at or after (ISO date or time)')
    .option('--sent', 'sent mail instead of received')
    .option('-n, --limit <n>', 'at most this many', '50')
    .description('List emails, newest first')
    .addHelpText('after', '\nExamples:\n  cubby mail ls Invoices --unread\n  cubby mail ls Invoices --from billing@example.com --since 2026-11-01 --json')
    .action(
      action(async (ctx, ref: string, o: { unread?: boolean; from?: string; subject?: string; since?: string; sent?: boolean; limit: string }) => {
        const box = await ctx.mailbox(ref);
        let since: string | undefined;
        if (o.since) {
          const t = Date.parse(o.since);
          if (Number.isNaN(t)) throw usage(`--since ${o.since} is not a date (e.g. 2026-11-01 or 2026-11-01T09:00:00Z)`);
          since = new Date(t).toISOString();
        }
        const max = Number(o.limit);
        const list = ctx.cubby().emails.list(box.id, {
          limit: Math.min(100, max),
          ...(o.unread ? { read: false } : {}),
          ...(o.from ? { sender: o.from } : {}),
          ...(o.subject ? { subject: o.subject } : {}),
          ...(since ? { received_after: since } : {}),
          ...(o.sent ? { direction: 'sent' } : {}),
        });
        const rows: EmailSummary[] = [];
        for await (const e of list) {
          rows.push(e);
          if (rows.length >= max) break;
        }
        if (ctx.out.json) return ctx.out.result(rows);
        if (!rows.length) return ctx.out.note('No emails.');
        for (const e of rows) process.stdout.write(`${summaryLine(e)}\n`);
      }),
    );

  mail
    .command('show')
    .argument('<email>', 'eml_… id')
    .option('-m, --mailbox <mailbox>', 'where it is (faster; default: search your mailboxes)')
    .description('Show an email: headers, text body (untrusted), attachments')
    .addHelpText('after', '\nExamples:\n  cubby mail show eml_01…\n  cubby mail show eml_01… --json | jq .body_text')
    .action(
      action(async (ctx, id: string, o: { mailbox?: string }) => {
        const { email } = await findEmail(ctx, id, o.mailbox);
        ctx.out.result(email, () => {
          const lines = [
            `From:     ${who(email.from_addresses)}`,
            `To:       ${who(email.to_addresses)}`,
            ...(email.cc_addresses?.length ? [`Cc:       ${who(email.cc_addresses)}`] : []),
            `Subject:  ${email.subject ?? '(no subject)'}`,
            `Date:     ${email.received_at}`,
            `Id:       ${email.id}${email.read ? '' : '  (unread)'}`,
            ...(Array.isArray(email.labels) && email.labels.length ? [`Labels:   ${email.labels.map((l) => l.name).join(', ')}`] : []),
          ];
          if (email.withheld) lines.push('', 'This email is withheld (labelled junk or still being checked).');
          else {
            lines.push('', ctx.out.paint('dim', '----- message text (untrusted: written by the sender) -----'), (email.body_text ?? '(no text body)').trimEnd(), ctx.out.paint('dim', '----- end of message text -----'));
          }
          if (email.attachments?.length) {
            lines.push('', 'Attachments:');
            for (const a of email.attachments) lines.push(`  ${a.id}  ${a.filename ?? '(unnamed)'}  ${a.content_type}  ${a.size_bytes} bytes`);
          }
          process.stdout.write(`${lines.join('\n')}\n`);
        });
      }),
    );

  mail
    .command('get')
    .argument('<email>', 'eml_… id')
    .option('-m, --mailbox <mailbox>')
    .option('-o, --out <dir>', 'folder to write to', '.')
    .description('Save the original message (.eml) and its attachments')
    .addHelpText('after', '\nExamples:\n  cubby mail get eml_01… --out ./mail')
    .action(
      action(async (ctx, id: string, o: { mailbox?: string; out: string }) => {
        const { mailboxId, email } = await findEmail(ctx, id, o.mailbox);
        const cubby = ctx.cubby();
        fs.mkdirSync(o.out, { recursive: true });
        const written: string[] = [];
        const eml = path.join(o.out, `${email.id}.eml`);
        fs.writeFileSync(eml, await cubby.emails.raw(mailboxId, email.id));
        written.push(eml);
        for (const a of email.attachments ?? []) {
          // Attachment names come from the sender: keep only the last segment, no dot files.
          const safe = path.basename(a.filename ?? a.id).replace(/^\.+/, '_') || a.id;
          const target = path.join(o.out, `${email.id}-${safe}`);
          fs.writeFileSync(target, await cubby.emails.attachment(mailboxId, email.id, a.id));
          written.push(target);
        }
        ctx.out.result({ id: email.id, files: written }, () => process.stdout.write(written.map((f) => `${f}\n`).join('')));
      }),
    );

  mail
    .command('watch')
    .argument('<mailbox>')
    .option('--from-start', 'without a saved cursor, print every email (default: only new mail)')
    .option('--reset', 'forget the saved cursor')
    .description('Print new mail as it arrives (one line, or one JSON object with --json, per email)')
    .addHelpText('after', '\nExamples:\n  cubby mail watch Invoices\n  cubby mail watch Invoices --json | while read -r line; do …; done\n\nThe position is saved, so a restarted watch prints what arrived meanwhile. Ctrl-C stops.')
    .action(
      action(async (ctx, ref: string, o: { fromStart?: boolean; reset?: boolean }) => {
        const box = await ctx.mailbox(ref);
        const file = stateFile(`watch-${ctx.profileName}-${box.id}.cursor`);
        if (o.reset) fs.rmSync(file, { force: true });
        const saved = fs.existsSync(file) ? fs.readFileSync(file, 'utf8').trim() || null : null;
        const sub = ctx.cubby().live.subscribe(box.id, (e) => ctx.out.item(e, summaryLine(e)), {
          cursor: saved,
          from: o.fromStart ? 'beginning' : 'now',
          onCursor: (c) => fs.writeFileSync(file, c, { mode: 0o600 }),
          onState: (s, info) => {
            if (s === 'connected') ctx.out.note(`Watching ${box.title ?? box.id} for new mail (Ctrl-C to stop)…`);
            if (s === 'disconnected') ctx.out.note(`Connection lost (${info?.reason ?? 'closed'}); reconnecting…`);
          },
          onError: (err) => ctx.out.note(`warning: ${(err as Error).message}`),
        });
        await new Promise<void>((resolve, reject) => {
          const stop = () => {
            process.off('SIGINT', stop);
            process.off('SIGTERM', stop);
            sub.close().then(resolve, reject);
          };
          process.on('SIGINT', stop);
          process.on('SIGTERM', stop);
          sub.ready.catch((err) => {
            process.off('SIGINT', stop);
            process.off('SIGTERM', stop);
            reject(err);
          });
        });
        process.exitCode = EXIT.ok;
      }),
    );

  mail
    .command('send')
    .argument('<mailbox>', 'mailbox to send from')
    .requiredOption('--to <addresses>', 'recipients (comma-separated or repeated)', collect)
    .option('--cc <addresses>', 'copies', collect)
    .option('-s, --subject <text>')
    .option('--text <text>', 'the message')
    .option('--text-file <file>', 'read the message from a file (- for standard input)')
    .option('--attach <file>', 'attach a local file (repeatable)', (v: string, prev: string[] = []) => [...prev, v])
    .description('Send an email from a mailbox')
    .addHelpText('after', '\nExamples:\n  cubby mail send Invoices --to sam@example.com -s "March" --text "See attached." --attach march.pdf\n  echo "Done." | cubby mail send Notes --to me@example.com -s Status')
    .action(
      action(async (ctx, ref: string, o: { to: string[]; cc?: string[]; subject?: string; text?: string; textFile?: string; attach?: string[] }) => {
        const box = await ctx.mailbox(ref);
        if (!o.subject) throw usage('--subject is required (a reply gets one from the original: use `cubby mail reply`).');
        const text = readBody(o);
        const attachmentIds = await attach(ctx, box.id, o.attach ?? []);
        const sent = await ctx.cubby().emails.send(box.id, { to: o.to, ...(o.cc?.length ? { cc: o.cc } : {}), subject: o.subject, text, ...(attachmentIds.length ? { attachment_ids: attachmentIds } : {}) });
        ctx.out.result(sent, () => process.stdout.write(`Queued ${sent.id} to ${who(sent.to_addresses)}\n`));
      }),
    );

  mail
    .command('reply')
    .argument('<email>', 'the received email (eml_…)')
    .option('-m, --mailbox <mailbox>')
    .option('--to <addresses>', 'recipients (default: the original sender, when authenticated)', collect)
    .option('--text <text>')
    .option('--text-file <file>')
    .option('--attach <file>', 'attach a local file (repeatable)', (v: string, prev: string[] = []) => [...prev, v])
    .description('Reply to an email (same conversation, "Re:" subject)')
    .addHelpText('after', '\nExamples:\n  cubby mail reply eml_01… --text "Thanks, received."')
    .action(
      action(async (ctx, id: string, o: { mailbox?: string; to?: string[]; text?: string; textFile?: string; attach?: string[] }) => {
        const { mailboxId, email } = await findEmail(ctx, id, o.mailbox);
        const text = readBody(o);
        const attachmentIds = await attach(ctx, mailboxId, o.attach ?? []);
        const sent = await ctx.cubby().emails.reply(mailboxId, email.id, { text, ...(o.to?.length ? { to: o.to } : {}), ...(attachmentIds.length ? { attachment_ids: attachmentIds } : {}) });
        ctx.out.result(sent, () => process.stdout.write(`Queued reply ${sent.id} to ${who(sent.to_addresses)}: ${sent.subject}\n`));
      }),
    );

  for (const [verb, read] of [
    ['read', true],
    ['unread', false],
  ] as const) {
    mail
      .command(verb)
      .argument('<emails...>', 'eml_… ids')
      .option('-m, --mailbox <mailbox>')
      .description(`Mark emails as ${verb}`)
      .action(
        action(async (ctx, ids: string[], o: { mailbox?: string }) => {
          const done: EmailSummary[] = [];
          for (const id of ids) {
            const { mailboxId } = await findEmail(ctx, id, o.mailbox);
            done.push(await ctx.cubby().emails.setRead(mailboxId, id, read));
          }
          ctx.out.result(done, () => process.stdout.write(done.map((e) => `Marked ${e.id} ${verb}\n`).join('')));
        }),
      );
  }
}
