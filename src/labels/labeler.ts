import { z } from 'zod';
import type { AppDeps } from '../context.ts';
import type { EmailsTable, JobsTable } from '../db/schema.ts';
import { BlobNotFoundError } from '../blobs/blob-store.ts';
import { PermanentJobError, type Worker } from '../jobs/worker.ts';
import { iso } from '../time.ts';
import { recentMessagesOf } from './recent-messages.ts';
import type { LabelAddress, LabelInput } from './classify.ts';
import type { LabelProvider } from './provider.ts';

// The labeling job: the inbound pipeline enqueues one per received email (in the transaction that
// stores it, with the row's `labeling = 'pending'`); this job gives the email at most one category
// and marks it done. Until then the email is withheld from API keys (docs/labels.md).

import { LABEL_EMAIL_TASK } from './task.ts';
export { LABEL_EMAIL_TASK };

// One job labels the emails stored by one transaction (a group commit stores many at once), so
// its claim, its updates and its completion are shared by all of them.
const Payload = z.union([
  z.object({ email_ids: z.array(z.string().min(1).max(100)).min(1).max(1000) }),
  z.object({ email_id: z.string().min(1).max(100) }),
  // Everything pending: what the inbound pipeline queues (coalesced: one queued run at a time).
  z.object({ pending: z.literal(true) }),
]);

/** Emails labeled per transaction by a pending sweep. */
const SWEEP_BATCH = 200;
export type LabelEmailPayload = { email_id: string };

/** The whole labeling, the model call included, must end well inside the job lease (60 s). */
const LABEL_JOB_LIMIT_MS = 45_000;
/** message.json holds at most a few MiB (capped headers, text and HTML); more is not ours. */
const MAX_MESSAGE_JSON_BYTES = 16 * 1024 * 1024;

type EmailRow = Pick<EmailsTable, 'subject' | 'from_addresses' | 'body_text' | 'attachments' | 'auth_results' | 'spam_flags'>;

function parseJson<T>(text: string | null | undefined, fallback: T): T {
  if (!text) return fallback;
  try {
    return (JSON.parse(text) as T) ?? fallback;
  } catch {
    return fallback;
  }
}

const asArray = <T>(v: unknown): T[] => (Array.isArray(v) ? (v as T[]) : []);
const asString = (v: unknown): string | null => (typeof v === 'string' ? v : null);

function addresses(v: unknown): LabelAddress[] {
  return asArray<any>(v)
    .filter((a) => a && typeof a.address === 'string')
    .map((a) => ({ address: a.address, name: asString(a.name) }));
}

function attachmentsOf(v: unknown): LabelInput['attachments'] {
  return asArray<any>(v)
    .filter((a) => a && typeof a.filename === 'string')
    .map((a) => ({ filename: a.filename, content_type: asString(a.content_type) ?? 'application/octet-stream' }));
}

/** The classifier's input from the row alone (message.json unreadable): no headers, no list headers. */
export function labelInputFromRow(row: EmailRow): LabelInput {
  return {
    subject: row.subject,
    from: addresses(parseJson(row.from_addresses, [])),
    headers: [],
    listHeaders: null,
    bodyText: row.body_text,
    auth: parseJson(row.auth_results, null),
    spamFlags: asArray<unknown>(parseJson(row.spam_flags, [])).filter((f): f is string => typeof f === 'string'),
    attachments: attachmentsOf(parseJson(row.attachments, [])),
  };
}

/** The row's input enriched with message.json (see MessageJson in src/inbound/parse-types.ts). */
export function labelInputFromMessage(row: EmailRow, message: any): LabelInput {
  const base = labelInputFromRow(row);
  if (!message || typeof message !== 'object') return base;
  const lh = message.list_headers && typeof message.list_headers === 'object' ? message.list_headers : null;
  return {
    ...base,
    subject: base.subject ?? asString(message.subject),
    from: base.from.length ? base.from : addresses(message.from),
    headers: asArray<any>(message.headers)
      .filter((h) => h && typeof h.name === 'string' && typeof h.value === 'string')
      .map((h) => ({ name: h.name, value: h.value })),
    listHeaders: lh && {
      list_id: asString(lh.list_id),
      list_unsubscribe: asString(lh.list_unsubscribe),
      list_unsubscribe_post: asString(lh.list_unsubscribe_post),
      precedence: asString(lh.precedence),
      auto_submitted: asString(lh.auto_submitted),
    },
    bodyText: base.bodyText ?? asString(message.text),
    attachments: base.attachments.length ? base.attachments : attachmentsOf(message.attachments),
  };
}

/** message.json parsed, or null when the row has none or its bytes are gone. Other storage errors throw (retry). */
async function readMessageJson(deps: AppDeps, jsonFileId: string | null): Promise<unknown | null> {
  if (!jsonFileId) return null;
  const recent = recentMessagesOf(deps)?.take(jsonFileId);
  if (recent) return recent;
  const version = await deps.db
    .selectFrom('files')
    .innerJoin('file_versions', 'file_versions.id', 'files.current_version_id')
    .select('file_versions.sha256')
    .where('files.id', '=', jsonFileId)
    .executeTakeFirst();
  if (!version?.sha256) return null;
  const chunks: Buffer[] = [];
  let total = 0;
  try {
    for await (const chunk of await deps.blobs.read(version.sha256)) {
      total += (chunk as Buffer).length;
      if (total > MAX_MESSAGE_JSON_BYTES) return null;
      chunks.push(chunk as Buffer);
    }
  } catch (err) {
    if (err instanceof BlobNotFoundError) return null;
    throw err;
  }
  return parseJson<unknown>(Buffer.concat(chunks).toString('utf8'), null);
}

/**
 * Labels one email. Idempotent: the update only applies while the row is still pending, so a retry
 * or a second worker that took over an expired lease changes nothing. On the job's last attempt a
 * storage failure no longer stops it: the email is labeled from its row so it never stays withheld.
 */
export async function labelEmail(deps: AppDeps, provider: LabelProvider, payload: LabelEmailPayload, lastAttempt = false): Promise<void> {
  await labelEmails(deps, provider, [payload.email_id], lastAttempt);
}

/**
 * Labels emails: classifies each still-pending one, then writes every label in one transaction.
 * Idempotent: an update only applies while the row is still pending, so a retry or a second worker
 * that took over an expired lease changes nothing. On the job's last attempt a storage failure no
 * longer stops it: the email is labeled from its row so it never stays withheld.
 */
export async function labelEmails(deps: AppDeps, provider: LabelProvider, emailIds: string[], lastAttempt = false): Promise<void> {
  const rows = await deps.db
    .selectFrom('emails')
    .select(['id', 'labeling', 'subject', 'from_addresses', 'body_text', 'attachments', 'auth_results', 'spam_flags', 'json_file_id'])
    .where('id', 'in', emailIds)
    .where('labeling', '=', 'pending') // deleted or already labeled ones are done
    .execute();
  if (!rows.length) return;
  const signal = AbortSignal.timeout(LABEL_JOB_LIMIT_MS);
  // A model provider gets at most 8 requests at a time; the rules are instant either way. One email
  // that cannot be labeled now (its message.json unreadable, the provider failing) does not hold up
  // the others: they are written, and the job fails afterwards so that it retries the rest.
  type Labeled = { id: string; category: Awaited<ReturnType<LabelProvider['label']>> };
  const labels: Labeled[] = [];
  let firstError: unknown = null;
  const labelOne = async (row: (typeof rows)[number]): Promise<Labeled | null> => {
    try {
      let message: unknown | null;
      try {
        message = await readMessageJson(deps, row.json_file_id);
      } catch (err) {
        if (!lastAttempt) throw err;
        message = null;
      }
      const input = message ? labelInputFromMessage(row, message) : labelInputFromRow(row);
      return { id: row.id, category: await provider.label(input, signal) };
    } catch (err) {
      // On the last attempt an email is released without a category rather than withheld for ever.
      if (lastAttempt) return { id: row.id, category: null };
      firstError ??= err;
      return null;
    }
  };
  for (let i = 0; i < rows.length; i += 8) {
    for (const l of await Promise.all(rows.slice(i, i + 8).map(labelOne))) if (l) labels.push(l);
  }
  const now = iso(deps.now());
  if (labels.length) {
    // One update per category (a handful), not one per email.
    const byCategory = new Map<(typeof labels)[number]['category'], string[]>();
    for (const l of labels) byCategory.set(l.category, [...(byCategory.get(l.category) ?? []), l.id]);
    // Not synced before the job completes (DurableCommits.relaxed): the completion comes later in
    // the WAL, so a power loss that loses these labels loses the completion too, and the job runs again.
    await deps.commits.relaxed((db) => db.transaction().execute(async (trx) => {
      for (const [category, ids] of byCategory) {
        for (let i = 0; i < ids.length; i += 500) {
          await trx.updateTable('emails').set({ label: category, labeling: 'done', labeled_at: now }).where('id', 'in', ids.slice(i, i + 500)).where('labeling', '=', 'pending').execute();
        }
      }
    }));
  }
  if (firstError) throw firstError;
}

/** Labels every pending email, oldest first, a batch per transaction. */
async function labelAllPending(deps: AppDeps, provider: LabelProvider, lastAttempt: boolean): Promise<void> {
  for (;;) {
    const ids = await deps.db.selectFrom('emails').select('id').where('labeling', '=', 'pending').orderBy('created_at').limit(SWEEP_BATCH).execute();
    if (!ids.length) return;
    await labelEmails(deps, provider, ids.map((r) => r.id), lastAttempt);
    if (ids.length < SWEEP_BATCH) return;
  }
}

export function registerLabeler(worker: Worker, deps: AppDeps, provider: LabelProvider): void {
  worker.register(LABEL_EMAIL_TASK, {
    handler: async (payload: unknown, job: JobsTable) => {
      const parsed = Payload.safeParse(payload);
      if (!parsed.success) throw new PermanentJobError(`bad ${LABEL_EMAIL_TASK} payload`);
      const last = job.attempts >= job.max_attempts;
      if ('pending' in parsed.data) return labelAllPending(deps, provider, last);
      const ids = 'email_ids' in parsed.data ? parsed.data.email_ids : [parsed.data.email_id];
      await labelEmails(deps, provider, ids, last);
    },
    // Withheld mail waits on this job: retry soon (1 s, 2 s, 4 s … at most 30 s).
    backoffMs: (attempt) => Math.min(30_000, 1000 * 2 ** Math.max(0, attempt - 1)),
    leaseMs: 60_000,
    // One sweep at a time: two would label the same pending emails twice.
    exclusive: true,
    // A sweep starts 50 ms after it was queued and after the previous one: under a stream of
    // received mail it labels the messages in batches (each sweep costs a claim, two reads, an
    // update and a completion, whatever its size).
    minIntervalMs: 50,
  });
}

/**
 * Seconds a client should wait before reading a still-pending email again (`Retry-After` on
 * `503 EMAIL_LABELING_PENDING`). Labeling normally ends within seconds of arrival, so the answer
 * starts at 2 s; an email pending for longer (a slow model, a backlog, retries) is asked about less
 * often, one more second per 10 s of age, capped at 60 s as the spec promises.
 */
export function labelRetryAfterSeconds(email: Pick<EmailsTable, 'received_at'>, now: Date): number {
  const receivedMs = Date.parse(email.received_at);
  const ageSeconds = Number.isFinite(receivedMs) ? Math.max(0, (now.getTime() - receivedMs) / 1000) : 0;
  return Math.min(60, 2 + Math.floor(ageSeconds / 10));
}
