import fs from 'node:fs';
import path from 'node:path';
import type { Command } from 'commander';
import { CubbyError, type MailboxFile } from '../../../packages/sdk/src/node.ts';
import { action, cleanRemotePath, parseRemote, requireRemote, type Ctx } from './context.ts';
import { CliError, EXIT, formatBytes, notFound, usage } from './output.ts';
import { uploadFolder } from './sync.ts';

// Files: cubby ls | cp | cat | append | versions | restore | mv | rm, with MAILBOX:PATH naming a
// file in a mailbox (MAILBOX is its id, title or address).

async function fileAt(ctx: Ctx, mailboxId: string, p: string): Promise<MailboxFile> {
  try {
    return await ctx.cubby().files.byPath(mailboxId, p);
  } catch (err) {
    if (err instanceof CubbyError && err.status === 404) throw notFound(`No file ${p} in this mailbox.`, 'MAILBOX_FILE_NOT_FOUND');
    throw err;
  }
}

/** Files whose path starts with `prefix` (all files for ""), page by page. */
async function* filesUnder(ctx: Ctx, mailboxId: string, prefix: string): AsyncGenerator<MailboxFile> {
  for await (const f of ctx.cubby().files.list(mailboxId, { limit: 100, ...(prefix ? { q: prefix } : {}) })) {
    if (f.path.startsWith(prefix)) yield f;
  }
}

const fileRow = (f: MailboxFile) => ({ path: f.path, size: f.current_file_version?.byte_size ?? 0, updated_at: f.updated_at, id: f.id });

export function registerFiles(program: Command): void {
  program
    .command('ls')
    .argument('[target]', 'MAILBOX or MAILBOX:PREFIX (no argument: your mailboxes)')
    .description('List mailboxes, or the files in a mailbox under a path prefix')
    .addHelpText('after', '\nExamples:\n  cubby ls\n  cubby ls Invoices:\n  cubby ls Invoices:2026/ --json')
    .action(
      action(async (ctx, target?: string) => {
        if (!target) {
          const rows = [];
          for await (const m of ctx.cubby().mailboxes.list({ limit: 100 })) rows.push(m);
          if (ctx.out.json) return ctx.out.result(rows);
          const { mailboxRow } = await import('./mailboxes.ts');
          return ctx.out.table(rows.map(mailboxRow), ['id', 'title', 'address', 'files', 'size', 'unread', 'status']);
        }
        const r = parseRemote(target) ?? { mailbox: target, path: '' };
        const box = await ctx.mailbox(r.mailbox);
        // Streamed page by page: a mailbox with many files prints as it goes, in flat memory.
        let n = 0;
        for await (const f of filesUnder(ctx, box.id, r.path)) {
          n++;
          const row = fileRow(f);
          ctx.out.item(row, `${formatBytes(row.size).padStart(9)}  ${row.updated_at.slice(0, 16).replace('T', ' ')}  ${row.path}`);
        }
        if (!n) ctx.out.note(r.path ? `Nothing under ${r.path}` : 'No files yet.');
      }),
    );

  program
    .command('cp')
    .argument('<source>', 'local file or folder, or MAILBOX:PATH')
    .argument('<dest>', 'MAILBOX:PATH, or a local path (- for standard output)')
    .description('Copy files and folders between this computer and a mailbox')
    .option('--concurrency <n>', 'parallel uploads', '8')
    .addHelpText('after', '\nExamples:\n  cubby cp report.pdf Invoices:2026/\n  cubby cp ./photos Invoices:photos\n  cubby cp Invoices:2026/report.pdf .\n  cubby cp Invoices:2026/ ./backup')
    .action(
      action(async (ctx, source: string, dest: string, o: { concurrency: string }) => {
        const from = parseRemote(source);
        const to = parseRemote(dest);
        if (from && to) throw usage('Copy within a mailbox with `cubby mv` or the API; cp copies between this computer and a mailbox.');
        if (!from && !to) throw usage('One side must be MAILBOX:PATH.');
        const cubby = ctx.cubby();
        if (to) {
          const box = await ctx.mailbox(to.mailbox);
          const st = fs.statSync(source, { throwIfNoEntry: false });
          if (!st) throw notFound(`No such local file or folder: ${source}`, 'LOCAL_NOT_FOUND');
          if (st.isDirectory()) {
            const result = await uploadFolder(ctx, box.id, source, to.path, { concurrency: Number(o.concurrency) });
            return ctx.out.result(result, () => process.stdout.write(`Copied ${source} → ${box.title ?? box.id}:${to.path} (${result.uploaded} uploaded, ${result.skipped} unchanged)\n`));
          }
          const remote = !to.path || to.path.endsWith('/') ? `${to.path}${path.basename(source)}` : to.path;
          const saved = await cubby.uploadPath(box.id, remote, source);
          return ctx.out.result(saved, () => process.stdout.write(`${saved.skipped ? 'Unchanged' : 'Copied'} ${source} → ${box.title ?? box.id}:${remote}\n`));
        }
        const box = await ctx.mailbox(from!.mailbox);
        const single = from!.path && !from!.path.endsWith('/') ? await cubby.files.byPath(box.id, from!.path).catch((err) => (err instanceof CubbyError && err.status === 404 ? null : Promise.reject(err))) : null;
        if (single) {
          if (dest === '-') {
            process.stdout.write(await cubby.files.read(box.id, single.id));
            return;
          }
          const local = fs.statSync(dest, { throwIfNoEntry: false })?.isDirectory() || dest.endsWith('/') ? path.join(dest, single.basename) : dest;
          await cubby.downloadTo(box.id, single.id, local);
          return ctx.out.result({ path: single.path, local }, () => process.stdout.write(`Copied ${box.title ?? box.id}:${single.path} → ${local}\n`));
        }
        const prefix = from!.path && !from!.path.endsWith('/') ? `${from!.path}/` : from!.path;
        const copied: { path: string; local: string }[] = [];
        for await (const f of filesUnder(ctx, box.id, prefix)) {
          const rel = f.path.slice(prefix.length);
          const local = path.join(dest, ...rel.split('/'));
          if (!path.resolve(local).startsWith(path.resolve(dest))) throw new CliError(`Refusing to write outside ${dest}: ${f.path}`, EXIT.error, 'UNSAFE_PATH');
          await cubby.downloadTo(box.id, f.id, local);
          copied.push({ path: f.path, local });
          ctx.out.note(`${f.path} → ${local}`);
        }
        if (!copied.length) throw notFound(`Nothing at ${from!.path || '(root)'} in ${box.title ?? box.id}.`, 'MAILBOX_FILE_NOT_FOUND');
        ctx.out.result({ copied: copied.length, files: copied }, () => process.stdout.write(`Copied ${copied.length} files to ${dest}\n`));
      }),
    );

  program
    .command('cat')
    .argument('<file>', 'MAILBOX:PATH')
    .description('Print a file')
    .addHelpText('after', '\nExamples:\n  cubby cat Notes:todo.md\n  cubby cat Invoices:2026/a.pdf > a.pdf')
    .action(
      action(async (ctx, file: string) => {
        const r = requireRemote(file);
        const box = await ctx.mailbox(r.mailbox);
        const f = await fileAt(ctx, box.id, r.path);
        process.stdout.write(await ctx.cubby().files.read(box.id, f.id));
      }),
    );

  program
    .command('append')
    .argument('<file>', 'MAILBOX:PATH of an existing text file')
    .argument('[text]', 'text to add (default: standard input)')
    .option('--newline', 'start on a new line if the file does not end with one')
    .description('Append text to a file (a new version)')
    .addHelpText('after', '\nExamples:\n  cubby append Notes:log.txt "deployed v2"\n  date | cubby append Notes:log.txt --newline')
    .action(
      action(async (ctx, file: string, text: string | undefined, o: { newline?: boolean }) => {
        const r = requireRemote(file);
        const box = await ctx.mailbox(r.mailbox);
        const content = text ?? fs.readFileSync(0, 'utf8');
        if (!content) throw usage('Nothing to append.');
        const res = await ctx.cubby().files.appendText(box.id, r.path, content, { newlineBefore: Boolean(o.newline) });
        ctx.out.result(res, () => process.stdout.write(`Appended ${res.appended_bytes} bytes to ${r.path}\n`));
      }),
    );

  program
    .command('versions')
    .argument('<file>', 'MAILBOX:PATH')
    .description('List the versions of a file, newest first')
    .action(
      action(async (ctx, file: string) => {
        const r = requireRemote(file);
        const box = await ctx.mailbox(r.mailbox);
        const f = await fileAt(ctx, box.id, r.path);
        const rows = await ctx.cubby().files.versions(box.id, f.id, { limit: 100 }).toArray();
        if (ctx.out.json) return ctx.out.result(rows);
        ctx.out.table(
          rows.map((v) => ({ version: v.version_number, id: v.id, size: v.deleted ? 'deleted' : formatBytes(v.byte_size), created_at: v.created_at, sha256: v.sha256?.slice(0, 12) ?? '' })),
          ['version', 'id', 'size', 'created_at', 'sha256'],
        );
      }),
    );

  program
    .command('restore')
    .argument('<file>', 'MAILBOX:PATH')
    .argument('<version>', 'version number or id (see `cubby versions`)')
    .description('Make an earlier version current again (as a new version)')
    .addHelpText('after', '\nExamples:\n  cubby versions Notes:todo.md\n  cubby restore Notes:todo.md 3')
    .action(
      action(async (ctx, file: string, version: string) => {
        const r = requireRemote(file);
        const box = await ctx.mailbox(r.mailbox);
        const f = await fileAt(ctx, box.id, r.path);
        let versionId = version;
        if (/^\d+$/.test(version)) {
          const all = await ctx.cubby().files.versions(box.id, f.id, { limit: 100 }).toArray();
          const hit = all.find((v) => v.version_number === Number(version));
          if (!hit) throw notFound(`${r.path} has no version ${version}.`, 'FILE_VERSION_NOT_FOUND');
          versionId = hit.id;
        }
        const res = await ctx.cubby().files.restore(box.id, f.id, versionId);
        ctx.out.result(res, () => process.stdout.write(`Restored ${r.path} to version ${version} (now version ${res.version?.version_number ?? '?'})\n`));
      }),
    );

  program
    .command('mv')
    .argument('<from>', 'MAILBOX:PATH')
    .argument('<to>', 'MAILBOX:NEWPATH (same mailbox) or just NEWPATH')
    .description('Move or rename a file within its mailbox')
    .action(
      action(async (ctx, fromArg: string, toArg: string) => {
        const from = requireRemote(fromArg);
        const to = parseRemote(toArg) ?? { mailbox: from.mailbox, path: cleanRemotePath(toArg) };
        const box = await ctx.mailbox(from.mailbox);
        if ((await ctx.mailbox(to.mailbox)).id !== box.id) throw usage('mv works within one mailbox; use cp to copy between mailboxes.');
        const f = await fileAt(ctx, box.id, from.path);
        const dest = !to.path || to.path.endsWith('/') ? `${to.path}${f.basename}` : to.path;
        const res = await ctx.cubby().files.move(box.id, f.id, dest);
        ctx.out.result(res, () => process.stdout.write(`Moved ${from.path} → ${dest}\n`));
      }),
    );

  program
    .command('rm')
    .argument('<files...>', 'MAILBOX:PATH (with -r, MAILBOX:FOLDER/)')
    .option('-r, --recursive', 'remove everything under the path')
    .description('Delete files (their versions stay restorable until purged)')
    .addHelpText('after', '\nExamples:\n  cubby rm Notes:old.txt\n  cubby rm -r Notes:drafts/')
    .action(
      action(async (ctx, files: string[], o: { recursive?: boolean }) => {
        const removed: string[] = [];
        for (const arg of files) {
          const r = requireRemote(arg);
          const box = await ctx.mailbox(r.mailbox);
          if (o.recursive) {
            const prefix = r.path && !r.path.endsWith('/') ? `${r.path}/` : r.path;
            if (!prefix) throw usage('Refusing to remove a whole mailbox with rm -r; name a folder.');
            const targets: MailboxFile[] = [];
            for await (const f of filesUnder(ctx, box.id, prefix)) if (!f.path.startsWith('_email/')) targets.push(f);
            for (const f of targets) {
              await ctx.cubby().files.delete(box.id, f.id);
              removed.push(f.path);
            }
            continue;
          }
          const f = await fileAt(ctx, box.id, r.path);
          await ctx.cubby().files.delete(box.id, f.id);
          removed.push(f.path);
        }
        ctx.out.result({ removed }, () => process.stdout.write(removed.map((p) => `Removed ${p}\n`).join('')));
      }),
    );
}
