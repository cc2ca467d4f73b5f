import type { AppDeps } from '../context.ts';
import { backfillStep } from './tasks.ts';

// `cubby admin reindex [--mailbox ID]`: rebuilds the search documents of emails now, in batches,
// and queues text extraction for current files that have no extraction result yet (the worker of a
// running server does those). Progress goes to stderr; the totals are the command's JSON answer.

export async function reindex(deps: Pick<AppDeps, 'db' | 'dialect' | 'config' | 'now'>, opts: { mailboxId?: string | null }, progress: (line: string) => void) {
  let payload: Parameters<typeof backfillStep>[1] = { mailbox_id: opts.mailboxId ?? null };
  let emails = 0;
  let files = 0;
  for (;;) {
    const step = await backfillStep(deps, payload);
    emails += step.emails;
    files += step.files;
    progress(`indexed ${emails} emails, checked ${files} files`);
    if (step.done) break;
    payload = step.next;
  }
  const queued = await deps.db.selectFrom('jobs').select((eb) => eb.fn.countAll<number>().as('n')).where('task', '=', 'search.extract').where('status', 'in', ['queued', 'running']).executeTakeFirstOrThrow();
  return { mailbox_id: opts.mailboxId ?? null, emails_indexed: emails, files_checked: files, extractions_pending: Number(queued.n) };
}
