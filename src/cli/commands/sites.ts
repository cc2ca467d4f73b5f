import fs from 'node:fs';
import path from 'node:path';
import type { Command } from 'commander';
import { type Publication } from '../../../packages/sdk/src/node.ts';
import { walkDirectory } from '../../../packages/sdk/src/node.ts';
import { action, type Ctx } from './context.ts';
import { CliError, EXIT, notFound, usage } from './output.ts';
import { uploadFolder } from './sync.ts';

// Sites: `cubby publish DIR [MAILBOX]` uploads the folder under site/ in the mailbox (removing
// files of an earlier upload that are gone from the folder), publishes that folder, and waits
// for the build with a spinner; `cubby unpublish`, `cubby sites ls`.

const SITE_PREFIX = 'site';

async function spinner<T>(ctx: Ctx, text: string, work: (set: (t: string) => void) => Promise<T>, done: (r: T) => string): Promise<T> {
  if (!process.stderr.isTTY || ctx.out.json || ctx.opts.quiet) {
    ctx.out.note(text);
    return work((t) => ctx.out.note(t));
  }
  const { default: ora } = await import('ora'); // loaded only when a spinner is shown
  const s = ora({ text, stream: process.stderr, color: ctx.out.opts.color ? 'cyan' : false, isEnabled: true }).start();
  try {
    const r = await work((t) => (s.text = t));
    s.succeed(done(r));
    return r;
  } catch (err) {
    s.fail(err instanceof Error ? err.message : String(err));
    throw err;
  }
}

async function findOrCreate(ctx: Ctx, ref: string) {
  try {
    return await ctx.mailbox(ref);
  } catch (err) {
    if (err instanceof CliError && err.exitCode === EXIT.notFound && !ref.startsWith('bkt_')) {
      const m = await ctx.cubby().mailboxes.create({ title: ref });
      ctx.out.note(`Created mailbox ${m.title} (${m.id}) for the site.`);
      return m;
    }
    throw err;
  }
}

export function registerSites(program: Command): void {
  program
    .command('publish')
    .argument('<dir>', 'folder with the site (index.html at its root, or see --root)')
    .argument('[mailbox]', 'mailbox that holds the site (default: one named after the folder, created if needed)')
    .option('--preview', 'publish a temporary preview instead of the main site')
    .option('--spa', 'single-page app: unknown paths serve the entry page')
    .option('--password [password]', 'protect with a password (generated when not given; paid plans)')
    .option('--require-email', 'visitors confirm an email address first (paid plans)')
    .option('--root <subdir>', 'serve this folder inside DIR as the site root')
    .description('Upload a folder and publish it as a website')
    .addHelpText('after', '\nExamples:\n  cubby publish ./dist\n  cubby publish ./dist Website --spa\n  cubby publish ./docs Docs --password --preview')
    .action(
      action(async (ctx, dir: string, ref: string | undefined, o: { preview?: boolean; spa?: boolean; password?: string | boolean; requireEmail?: boolean; root?: string }) => {
        if (!fs.statSync(dir, { throwIfNoEntry: false })?.isDirectory()) throw notFound(`No such folder: ${dir}`, 'LOCAL_NOT_FOUND');
        if (o.password && o.requireEmail) throw usage('Choose --password or --require-email, not both.');
        const root = (o.root ?? '').replace(/^\/+|\/+$/g, '');
        if (root.split('/').includes('..')) throw usage('--root may not contain ..');
        if (root && !fs.statSync(path.join(dir, root), { throwIfNoEntry: false })?.isDirectory()) throw notFound(`No folder ${root} inside ${dir}`, 'LOCAL_NOT_FOUND');
        const cubby = ctx.cubby();
        const box = await findOrCreate(ctx, ref ?? path.basename(path.resolve(dir)));

        const uploaded = await uploadFolder(ctx, box.id, dir, SITE_PREFIX);
        // Files from an earlier publish that are no longer in the folder would still be served.
        const local = new Set<string>();
        for await (const f of walkDirectory(dir)) local.add(`${SITE_PREFIX}/${f.relativePath}`);
        let removed = 0;
        const stale = [];
        for await (const f of cubby.files.list(box.id, { q: `${SITE_PREFIX}/`, limit: 100 })) if (f.path.startsWith(`${SITE_PREFIX}/`) && !local.has(f.path)) stale.push(f);
        for (const f of stale) {
          await cubby.files.delete(box.id, f.id);
          removed++;
        }

        const body = {
          publication_root_directory: root ? `${SITE_PREFIX}/${root}` : SITE_PREFIX,
          ...(o.spa ? { site_mode: 'spa' as const } : {}),
          ...(o.password ? { access_mode: 'password' as const, ...(typeof o.password === 'string' ? { password: o.password } : {}) } : {}),
          ...(o.requireEmail ? { access_mode: 'require_email' as const } : {}),
        };
        const queued = o.preview ? await cubby.publications.preview(box.id, body) : await cubby.publications.publish(box.id, body);
        const site = await spinner(
          ctx,
          'Building the site…',
          (set) => cubby.publications.waitUntilSettled(queued.id, { intervalMs: 400, onState: (p) => set(`Building the site (${p.publish_state})…`) }),
          (p) => (p.publish_state === 'ready' ? `Published ${p.public_url}` : `Publishing ${p.publish_state}`),
        );
        if (site.publish_state !== 'ready') throw new CliError(`The build ${site.publish_state}: ${site.publish_error ?? 'see the dashboard'}`, EXIT.error, 'PUBLISH_FAILED');
        ctx.out.result({ ...site, uploaded: uploaded.uploaded, unchanged: uploaded.skipped, removed }, () => {
          process.stdout.write(`${site.public_url}\n`);
          if (site.password) process.stdout.write(`Password: ${site.password}  (shown once; keep it)\n`);
        });
      }),
    );

  program
    .command('unpublish')
    .argument('<mailbox>')
    .option('--preview', 'take down the preview instead of the main site')
    .description('Take a site down')
    .action(
      action(async (ctx, ref: string, o: { preview?: boolean }) => {
        const box = await ctx.mailbox(ref);
        const r = o.preview ? await ctx.cubby().publications.unpublishPreview(box.id) : await ctx.cubby().publications.unpublish(box.id);
        ctx.out.result(r, () => process.stdout.write(`Unpublished ${o.preview ? 'the preview of ' : ''}${box.title ?? box.id}\n`));
      }),
    );

  const sites = program.command('sites').description('Published websites');
  sites
    .command('ls', { isDefault: true })
    .description('List your sites')
    .action(
      action(async (ctx) => {
        const rows: Publication[] = [];
        for await (const p of ctx.cubby().publications.list({ limit: 100 })) rows.push(p);
        if (ctx.out.json) return ctx.out.result(rows);
        if (!rows.length) return ctx.out.note('No sites yet: cubby publish ./folder');
        ctx.out.table(
          rows.map((p) => ({ url: p.public_url, state: p.publish_state, kind: p.kind, access: p.access_mode, mailbox: p.bucket_id })),
          ['url', 'state', 'kind', 'access', 'mailbox'],
        );
      }),
    );
}
