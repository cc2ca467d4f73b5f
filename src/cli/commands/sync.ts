import fs from 'node:fs';
import path from 'node:path';
import { createHash } from 'node:crypto';
import type { Command } from 'commander';
import type { UploadManyResult, UploadProgress } from '../../../packages/sdk/src/node.ts';
import { action, requireRemote, type Ctx } from './context.ts';
import { CliError, EXIT, formatBytes, notFound, usage } from './output.ts';

// `cubby sync DIR MAILBOX:PREFIX` (and `cp` of a folder): one upload session, declarations in
// batches, parallel PUTs, both checksums, identical files skipped by the service. A progress bar
// on a terminal (files, bytes, rate, ETA), plain lines otherwise. Ctrl-C cancels the session (the
// mailbox is never left locked; saved files stay saved) and running the same command again
// resumes: saved files are skipped as identical. A run killed outright leaves its session
// pending; the same command finds it again through its client_session_key.

export interface FolderOptions {
  deleteMissing?: boolean;
  concurrency?: number;
  batchSize?: number;
}

async function progressReporter(ctx: Ctx) {
  const started = Date.now();
  if (ctx.out.json || ctx.opts.quiet) return { update: (_p: UploadProgress) => undefined, stop: () => undefined };
  if (process.stderr.isTTY) {
    const { default: cliProgress } = await import('cli-progress'); // only on a terminal
    const bar = new cliProgress.SingleBar(
      {
        format: '{bar} {percentage}% | {value}/{total} files | {bytes} | {rate} | ETA {eta_formatted}',
        stream: process.stderr,
        hideCursor: true,
        barsize: 24,
        etaBuffer: 50,
      },
      cliProgress.Presets.shades_classic,
    );
    let begun = false;
    return {
      update(p: UploadProgress) {
        const secs = Math.max(0.001, (Date.now() - started) / 1000);
        const payload = { bytes: `${formatBytes(p.bytesDone)}/${formatBytes(p.bytesTotal)}`, rate: `${formatBytes(p.bytesDone / secs)}/s` };
        if (!begun) {
          bar.start(p.filesTotal ?? 0, 0, payload);
          begun = true;
        }
        if (p.filesTotal !== null) bar.setTotal(p.filesTotal);
        bar.update(p.filesDone, payload);
      },
      stop: () => begun && bar.stop(),
    };
  }
  // Not a terminal: a plain line at most once a second (and the last one), for logs.
  let last = 0;
  let lastDone = -1;
  return {
    update(p: UploadProgress) {
      const now = Date.now();
      if (p.phase !== 'done' && now - last < 1000) return;
      if (p.filesDone === lastDone && p.phase !== 'done') return;
      last = now;
      lastDone = p.filesDone;
      const secs = Math.max(0.001, (now - started) / 1000);
      process.stderr.write(`${p.phase}: ${p.filesDone}/${p.filesTotal ?? '?'} files, ${formatBytes(p.bytesDone)}/${formatBytes(p.bytesTotal)}, ${(p.filesDone / secs).toFixed(0)} files/s\n`);
    },
    stop: () => undefined,
  };
}

/** Uploads a local folder under `prefix`; Ctrl-C cancels cleanly. */
export async function uploadFolder(ctx: Ctx, mailboxId: string, dir: string, prefix: string, opts: FolderOptions = {}): Promise<UploadManyResult & { pruned?: number }> {
  const st = fs.statSync(dir, { throwIfNoEntry: false });
  if (!st?.isDirectory()) throw notFound(`No such local folder: ${dir}`, 'LOCAL_NOT_FOUND');
  const key = createHash('sha256').update(`${mailboxId}\0${prefix}\0${path.resolve(dir)}`).digest('hex').slice(0, 40);
  const abort = new AbortController();
  let interrupted = false;
  const onSigint = () => {
    if (interrupted) process.exit(EXIT.interrupted);
    interrupted = true;
    process.stderr.write('\nInterrupted: cancelling the upload session (saved files stay; run the same command to resume)…\n');
    abort.abort();
  };
  process.on('SIGINT', onSigint);
  const progress = await progressReporter(ctx);
  try {
    return await ctx.cubby().uploadDirectory(mailboxId, dir, {
      prefix,
      deleteMissing: opts.deleteMissing,
      concurrency: opts.concurrency && opts.concurrency > 0 ? opts.concurrency : 8,
      batchSize: opts.batchSize,
      clientSessionKey: `cli-sync-${key}`,
      signal: abort.signal,
      onProgress: (p) => progress.update(p),
    });
  } catch (err) {
    if (interrupted) throw new CliError('Interrupted; the session was cancelled. Run the same command again to resume.', EXIT.interrupted, 'INTERRUPTED');
    throw err;
  } finally {
    progress.stop();
    process.off('SIGINT', onSigint);
  }
}

export function registerSync(program: Command): void {
  program
    .command('sync')
    .argument('<dir>', 'local folder')
    .argument('<target>', 'MAILBOX:PREFIX (MAILBOX: for the whole mailbox)')
    .option('--delete', 'delete mailbox files that are not in the folder (whole-mailbox syncs only; never _email/)')
    .option('--concurrency <n>', 'parallel uploads', '8')
    .option('--batch-size <n>', 'files per declaration and per save (1–100)', '50')
    .description('Upload a folder through one upload session, skipping unchanged files')
    .addHelpText('after', '\nExamples:\n  cubby sync ./site Website:\n  cubby sync ./site Website: --delete\n  cubby sync ./reports Invoices:reports --json')
    .action(
      action(async (ctx, dir: string, target: string, o: { delete?: boolean; concurrency: string; batchSize: string }) => {
        const r = requireRemote(target, 'MAILBOX:PREFIX');
        const prefix = r.path.replace(/\/+$/, '');
        // The service's delete_missing prunes the whole mailbox, not just a prefix.
        if (o.delete && prefix) throw usage('--delete mirrors the whole mailbox; use it with MAILBOX: (no prefix).');
        const box = await ctx.mailbox(r.mailbox);
        const started = Date.now();
        const result = await uploadFolder(ctx, box.id, dir, prefix, { deleteMissing: o.delete, concurrency: Number(o.concurrency), batchSize: Number(o.batchSize) });
        const seconds = (Date.now() - started) / 1000;
        ctx.out.result({ mailbox_id: box.id, prefix, uploaded: result.uploaded, skipped: result.skipped, ...(result.pruned !== undefined ? { pruned: result.pruned } : {}), bytes: result.bytes, seconds, sessions: result.sessions, session_id: result.sessionId, session: result.session }, () =>
          process.stdout.write(`Synced ${dir} → ${box.title ?? box.id}:${prefix} (${result.uploaded} uploaded, ${result.skipped} unchanged, ${formatBytes(result.bytes)} in ${seconds.toFixed(1)} s)\n`),
        );
      }),
    );
}
