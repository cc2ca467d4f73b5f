import { CompiledQuery, type Kysely } from 'kysely';
import type { AppDeps } from '../context.ts';
import type { BlobsTable, DB, EmailsTable, EventsTable, FilesTable, FileVersionsTable, MailboxVersionsTable } from '../db/schema.ts';
import type { StoredBlob } from '../blobs/blob-store.ts';
import type { AuthSummary } from './authenticate.ts';
import type { AttachmentSummary } from './parse-types.ts';
import type { InboundFields } from './analyze.ts';
import { recentMessagesOf } from '../labels/recent-messages.ts';
import type { PlanLimits } from '../accounts/plans.ts';
import { checkContentLimits, type GroupUsage } from '../files/files.write.ts';
import { groupUsage } from '../files/files.repo.ts';
import { isForbiddenFileName } from '../files/paths.ts';
import { limitsFor } from '../accounts/limits.service.ts';
import { billingGroupId } from '../accounts/accounts.service.ts';
import { eventInserts, eventRow } from '../events/events.ts';
import { queueWebhookDeliveries, webhookTargets, type WebhookTarget } from '../webhooks/outbox.ts';
import { liveAnnouncements } from '../live/hub.ts';
import { LABEL_EMAIL_TASK, LABEL_PENDING_JOB } from '../labels/task.ts';
import { AppError } from '../errors.ts';
import { newId } from '../ids.ts';
import { iso } from '../time.ts';
import { compiledInsert, compiledListQuery, compiledQuery } from '../db/compiled-query.ts';
import { WriteBatch } from '../db/write-batch.ts';
import type { Dialect } from '../db/database.ts';
import { insertBlobRows } from '../blobs/blob-rows.ts';
import { receivedUsageUpsert } from './usage.ts';
import { emailDirectory } from './layout.ts';
import { ConversationIndex, type ConversationKeys } from './conversations.ts';
import { searchIndex, type PreparedText } from '../search/search-index.ts';
import { emailDocsFor } from '../search/documents.ts';
import { queueExtraction } from '../search/queue-extraction.ts';

/** One received message for one mailbox, with its blobs already durable in the store, or in hand to be kept in their rows. */
export interface InboundDelivery {
  emailId: string;
  mailboxId: string;
  deliveredTo: string;
  receivedAt: Date;
  raw: StoredBlob;
  /** The parsed message (the fields the store uses: it may come from a worker thread). */
  parsed: InboundFields;
  /** message.json for this recipient (delivered_to differs per recipient). */
  messageJson: StoredBlob;
  /** Attachments whose bytes were stored; the others count as omitted. */
  storedAttachments: AttachmentSummary[];
  /** Bytes of the message's small blobs, by address: the commit keeps them in their `blobs` rows (src/blobs/inline-blobs.ts). */
  inlineBlobs: ReadonlyMap<string, Buffer>;
  envelope: { mailFrom: string | null; clientIp: string | null; helo: string | null };
  auth: AuthSummary | null;
  spamFlags: string[];
  /** The body made ready for the search index before the commit (null: nothing to prepare). */
  searchBody?: PreparedText | null;
  /** Set by the store: the message.json file's id. */
  jsonFileId?: string;
}

/** Rows of one transaction, written with one multi-row insert per table at the end. */
interface Batch {
  files: FilesTable[];
  versions: FileVersionsTable[];
  emails: EmailsTable[];
  mailboxVersions: MailboxVersionsTable[];
  events: EventsTable[];
}

interface MailboxState {
  id: string;
  accountId: string;
  /** Its account's billing group (src/accounts/accounts.service.ts billingGroupId). */
  groupId: string;
  limits: PlanLimits;
  /** The group's files and storage, shared by the group's mailboxes in this commit. */
  group: GroupUsage;
  versionNumber: number;
  storage: number;
  files: number;
  seq: number;
  unread: number;
  messages: number;
  last: { at: string; path: string } | null;
  versionId: string | null;
}

/**
 * Stores received messages in one transaction: for each delivery the `_email/…/<id>/` files
 * (message.eml, message.json, attachments) as one mailbox version, the email row, the mailbox
 * counters and monthly usage, and an `email.received` event; one labeling job covers them all.
 * The caller answers 250 only after this resolves; the blobs were fsynced before. Rows are built in
 * memory and written with one insert per table: a group commit of many messages costs a handful of
 * statements more than one message.
 */
export async function storeDeliveries(deps: AppDeps, deliveries: InboundDelivery[]): Promise<void> {
  await (await commitDeliveries(deps, deliveries)).durable;
}

/**
 * The same, resolving once the transaction is committed, with `durable` resolving once it is on
 * disk (src/db/durable-commit.ts): the group commit answers 250 on `durable`, and meanwhile starts
 * the next group instead of waiting for the disk.
 */
export async function commitDeliveries(deps: AppDeps, deliveries: InboundDelivery[]): Promise<{ durable: Promise<void> }> {
  const { durable } = await deps.commits.commit(async (trx) => {
    const at = iso(deps.now());
    // Blobs first, before any lock, in their own statements, as every other writer of blobs does:
    // concurrent transactions (other nodes) inserting shared attachments wait on each other's
    // uncommitted rows, and one order everywhere (blobs sorted, then mailboxes, then usage) means
    // they queue instead of deadlocking. Inside one combined statement Postgres does not promise
    // an order.
    // The last of them goes together with the read of the mailboxes' webhooks (one statement on
    // Postgres; a settings read that needs no lock): a round trip fewer while the group waits.
    const blobs = blobInserts(trx, deliveries, at);
    for (const q of blobs.slice(0, -1)) await trx.executeQuery(q);
    const webhooks = await new WriteBatch(deps.dialect).add(blobs.at(-1)).add(webhookTargets(trx, deliveries.map((d) => d.mailboxId)), { returning: true }).run<WebhookTarget>(trx);
    const mailboxes = await lockMailboxes(deps, trx, [...new Set(deliveries.map((d) => d.mailboxId))]);
    const conversations = new ConversationIndex(trx);
    // Postgres: one round trip for the group's conversation lookups instead of one per message. On
    // SQLite there is no round trip to save, and each lookup alone is a statement prepared once,
    // where the group's combined text differs from group to group.
    if (deps.dialect === 'postgres') await conversations.lookUpAll(deliveries.map(conversationKeysOf));
    const batch: Batch = { files: [], versions: [], emails: [], mailboxVersions: [], events: [] };
    const usage = new Map<string, { count: number; bytes: number }>();

    for (const d of deliveries) {
      const m = mailboxes.get(d.mailboxId)!;
      await addDelivery(batch, d, m, conversations);
      for (const scope of [d.mailboxId, m.groupId]) {
        const u = usage.get(scope) ?? { count: 0, bytes: 0 };
        usage.set(scope, { count: u.count + 1, bytes: u.bytes + d.raw.byteSize });
      }
    }

    // Searchable as soon as stored; attachment text joins the document when extraction has run.
    const docs = await emailDocsFor(trx, batch.emails, new Map(batch.versions.map((v) => [v.id, v.sha256])));
    const prepared = new Map(deliveries.map((d) => [d.emailId, d.searchBody]));
    for (const doc of docs) doc.preparedBody = prepared.get(doc.emailId) ?? undefined;
    const index = searchIndex(deps);
    const indexWrites = index.emailWrites(trx, docs);
    // The rows are written together (one statement on Postgres: src/db/write-batch.ts). All are new
    // rows or rows this transaction has locked already, but for the usage rows: one upsert, in
    // sorted order.
    const writes = new WriteBatch(deps.dialect);
    for (const q of INSERTS.files.compileChunks(trx, batch.files)) writes.add(q);
    for (const q of INSERTS.file_versions.compileChunks(trx, batch.versions)) writes.add(q);
    for (const q of INSERTS.mailbox_versions.compileChunks(trx, batch.mailboxVersions)) writes.add(q);
    for (const q of INSERTS.emails.compileChunks(trx, batch.emails)) writes.add(q);
    for (const q of indexWrites ?? []) writes.add(q);
    for (const q of eventInserts(trx, batch.events)) writes.add(q);
    for (const q of mailboxUpdates(trx, deps.dialect, mailboxes.values())) writes.add(q);
    writes.add(receivedUsageUpsert(trx, deliveries[0]!.receivedAt, usage), { returning: true });
    // The live announcements (NOTIFY on Postgres, delivered at commit) in the same statement.
    for (const q of liveAnnouncements(trx, deps.dialect, deps.config.databaseSchema, deps.events?.live ?? undefined, batch.events)) writes.add(q, { call: true });
    const totals = await writes.run<{ scope_id: string; count: number | string; bytes: number | string }>(trx);
    assertWithinAllowance(mailboxes.values(), totals);

    if (!indexWrites) await index.putEmails(trx, docs);
    await queueExtraction(trx, deps.dialect, deps.now(), batch.versions.filter((v) => v.sha256 && v.path.includes('/attachments/')).map((v) => ({ sha256: v.sha256!, name: v.name, mime: v.mime_type, account_id: mailboxes.get(v.mailbox_id)?.accountId ?? null })));
    await queueWebhookDeliveries(deps, trx, batch.events, webhooks);
    await deps.jobs.enqueue(trx, LABEL_EMAIL_TASK, LABEL_PENDING_JOB.payload, { uniqueKey: LABEL_PENDING_JOB.uniqueKey });
  });
  // The metered store counts what it writes; the bytes this commit kept in their rows count here.
  const inline = new Map(deliveries.flatMap((d) => [...d.inlineBlobs]));
  if (inline.size) deps.metrics.blobInlineBytesWritten.inc([...inline.values()].reduce((n, b) => n + b.byteLength, 0));
  // Committed: the labeling job may take what it reads of each message.json from memory instead
  // of the store.
  const recent = recentMessagesOf(deps);
  if (recent) {
    for (const d of deliveries) {
      if (!d.jsonFileId) continue;
      const attachments = d.parsed.attachments.map(({ content: _bytes, ...summary }) => summary);
      recent.put(d.jsonFileId, { headers: d.parsed.headers, list_headers: d.parsed.list_headers, attachments }, d.messageJson.byteSize);
    }
  }
  return { durable };
}

/**
 * The monthly allowances, checked again on the totals this transaction just wrote: RCPT and the end
 * of DATA check before the commit, so concurrent messages could each pass there and together go
 * over. The upsert holds the group's usage row (Postgres) or the database (SQLite) until commit, so
 * this check is exact; a group commit that fails it is retried message by message, and only the
 * messages past the allowance are refused (452 count, 552 bytes).
 */
function assertWithinAllowance(mailboxes: Iterable<MailboxState>, totals: { scope_id: string; count: number | string; bytes: number | string }[]): void {
  const byScope = new Map(totals.map((t) => [t.scope_id, t]));
  // Each locked mailbox received at least one message; a group's mailboxes share its limits.
  for (const { groupId, limits } of mailboxes) {
    const used = byScope.get(groupId);
    if (!used) throw new Error(`received usage of ${groupId} was not returned`);
    const maxCount = limits.max_received_emails_per_month;
    if (maxCount !== null && Number(used.count) > maxCount) throw new AppError('RECEIVED_EMAIL_LIMIT_REACHED', 'monthly received-email allowance used up', { limit: 'max_received_emails_per_month', max: maxCount });
    const maxBytes = limits.max_received_email_bytes_per_month;
    if (maxBytes !== null && Number(used.bytes) > maxBytes) throw new AppError('RECEIVED_BYTES_LIMIT_REACHED', 'monthly received-email storage allowance used up', { limit: 'max_received_email_bytes_per_month', max: maxBytes });
  }
}

const UPDATE_MAILBOX = compiledQuery(
  (db, id: string, versionId: string | null, versionNumber: number, storage: number, files: number, seq: number, messages: number, unread: number, at: string, path: string) =>
    db
      .updateTable('mailboxes')
      .set({ version_id: versionId, version_number: versionNumber, storage_bytes: storage, files_count: files, email_seq: seq, message_count: messages, unread_count: unread, last_received_at: at, last_received_path: path, updated_at: at })
      .where('id', '=', id),
  10,
);

/**
 * The group's mailboxes' new counters and version. On Postgres one statement of a fixed text for
 * any number of mailboxes (rows as JSON, read with the table's column types), which
 * src/db/pg-prepared.ts prepares once; on SQLite, where a statement is a function call, one
 * compiled update per mailbox.
 */
function mailboxUpdates(trx: Kysely<DB>, dialect: Dialect, mailboxes: Iterable<MailboxState>): CompiledQuery[] {
  const changed = [...mailboxes].filter((m) => m.last);
  if (!changed.length) return [];
  if (dialect !== 'postgres') return changed.map((m) => UPDATE_MAILBOX.compile(trx, m.id, m.versionId, m.versionNumber, m.storage, m.files, m.seq, m.messages, m.unread, m.last!.at, m.last!.path));
  const rows = changed.map((m) => ({ id: m.id, version_id: m.versionId, version_number: m.versionNumber, storage_bytes: m.storage, files_count: m.files, email_seq: m.seq, message_count: m.messages, unread_count: m.unread, last_received_at: m.last!.at, last_received_path: m.last!.path }));
  return [CompiledQuery.raw(UPDATE_MAILBOXES_FROM_JSON, [JSON.stringify(rows)])];
}

const UPDATE_MAILBOXES_FROM_JSON = `update mailboxes as m set version_id = v.version_id, version_number = v.version_number, storage_bytes = v.storage_bytes, files_count = v.files_count,
  email_seq = v.email_seq, message_count = v.message_count, unread_count = v.unread_count, last_received_at = v.last_received_at, last_received_path = v.last_received_path,
  updated_at = v.last_received_at
  from json_populate_recordset(null::mailboxes, $1::json) as v where m.id = v.id`;

const INSERTS = {
  files: compiledInsert('files'),
  file_versions: compiledInsert('file_versions'),
  mailbox_versions: compiledInsert('mailbox_versions'),
  emails: compiledInsert('emails'),
};

function blobInserts(trx: Kysely<DB>, deliveries: InboundDelivery[], at: string): CompiledQuery[] {
  const rows = new Map<string, BlobsTable>();
  for (const d of deliveries) {
    const inline = (sha256: string) => d.inlineBlobs.get(sha256) ?? null;
    for (const b of [d.raw, d.messageJson]) rows.set(b.sha256, { sha256: b.sha256, byte_size: b.byteSize, md5: b.md5Base64, created_at: at, inline_bytes: inline(b.sha256) });
    // md5 is informational for blobs of our own making.
    for (const a of d.storedAttachments) {
      if (!rows.has(a.sha256)) rows.set(a.sha256, { sha256: a.sha256, byte_size: a.size_bytes, md5: '', created_at: at, inline_bytes: inline(a.sha256) });
    }
  }
  const all = [...rows.values()].sort((a, b) => (a.sha256 < b.sha256 ? -1 : a.sha256 > b.sha256 ? 1 : 0));
  return insertBlobRows.compileChunks(trx, all);
}

/**
 * Locks each mailbox row (Postgres: FOR UPDATE of the mailbox only, in id order to avoid
 * deadlocks; SQLite: one writer) and reads, in the same statement, its account's plan; then its
 * billing group's current files and storage (what file writes check against the plan).
 */
const lockMailboxesQuery = (forUpdate: boolean) =>
  compiledListQuery((db, ids) => {
    const q = db
      .selectFrom('mailboxes')
      .innerJoin('accounts', 'accounts.id', 'mailboxes.account_id')
      .select(['mailboxes.id', 'mailboxes.account_id', 'mailboxes.version_id', 'mailboxes.version_number', 'mailboxes.storage_bytes', 'mailboxes.files_count', 'mailboxes.email_seq', 'mailboxes.message_count', 'mailboxes.unread_count', 'mailboxes.archived_at', 'mailboxes.deleted_at'])
      .select(['accounts.plan', 'accounts.parent_account_id'])
      .where('mailboxes.id', 'in', ids)
      .orderBy('mailboxes.id');
    return forUpdate ? q.forUpdate(['mailboxes']) : q;
  }, 0);
/** The group's mailboxes with what the commit updates; Postgres locks their rows (in id order). Built once per dialect and mailbox count. */
const LOCK_MAILBOXES: Record<Dialect, ReturnType<typeof lockMailboxesQuery>> = { sqlite: lockMailboxesQuery(false), postgres: lockMailboxesQuery(true) };

async function lockMailboxes(deps: AppDeps, trx: Kysely<DB>, ids: string[]): Promise<Map<string, MailboxState>> {
  const rows = await LOCK_MAILBOXES[deps.dialect].execute(trx, ids);
  const out = new Map<string, MailboxState>();
  const groups = new Map<string, GroupUsage>();
  for (const r of rows) {
    if (r.deleted_at) continue;
    if (r.archived_at) throw new AppError('MAILBOX_ARCHIVED', undefined, { mailbox_id: r.id });
    const groupId = billingGroupId({ id: r.account_id, parent_account_id: r.parent_account_id });
    // One usage object per group: deliveries to its several mailboxes add up in it. Read after the
    // lock, in a statement of its own: on Postgres a statement that waited for a row lock still
    // sees the others' rows as they were when it began, so sums taken in the locking statement
    // could miss the files of the transaction it waited for.
    let group = groups.get(groupId);
    if (!group) groups.set(groupId, (group = await groupUsage(trx, groupId)));
    out.set(r.id, {
      id: r.id,
      accountId: r.account_id,
      groupId,
      limits: limitsFor({ plan: r.plan }),
      group,
      versionNumber: Number(r.version_number),
      versionId: r.version_id,
      storage: Number(r.storage_bytes),
      files: Number(r.files_count),
      seq: Number(r.email_seq),
      messages: Number(r.message_count),
      unread: Number(r.unread_count),
      last: null,
    });
  }
  for (const id of ids) if (!out.has(id)) throw new AppError('MAILBOX_NOT_FOUND', undefined, { mailbox_id: id });
  return out;
}

/** What a delivery's conversation is looked up by: its thread root (src/inbound/conversations.ts) and the Message-IDs it refers to. */
function conversationKeysOf(d: InboundDelivery): ConversationKeys {
  const p = d.parsed;
  return { mailboxId: d.mailboxId, threadKey: p.conversation_hint ?? p.message_id, refs: [...new Set([...p.references, ...p.in_reply_to])] };
}

/** Builds one delivery's rows, checking the plan's file and storage limits as file writes do. */
async function addDelivery(batch: Batch, d: InboundDelivery, m: MailboxState, conversations: ConversationIndex): Promise<void> {
  const { limits, group } = m;
  const now = iso(d.receivedAt);
  const dir = emailDirectory(d.receivedAt, d.emailId);
  const versionId = newId('bktrv');
  const newFiles: { path: string; folder: string; name: string; sha256: string; size: number; mime: string }[] = [
    { path: `${dir}/message.eml`, folder: dir, name: 'message.eml', sha256: d.raw.sha256, size: d.raw.byteSize, mime: 'message/rfc822' },
    { path: `${dir}/message.json`, folder: dir, name: 'message.json', sha256: d.messageJson.sha256, size: d.messageJson.byteSize, mime: 'application/json' },
  ];
  let omitted = d.parsed.omitted_attachment_count + (d.parsed.attachments.length - d.storedAttachments.length);
  const kept: AttachmentSummary[] = [];
  for (const a of d.storedAttachments) {
    // Executables and key files are refused everywhere in a mailbox, received mail included.
    if (isForbiddenFileName(a.filename)) {
      omitted++;
      continue;
    }
    try {
      checkContentLimits(limits, a.filename, a.content_type, a.size_bytes);
    } catch {
      omitted++; // larger than the plan's file size: counted, not stored
      continue;
    }
    kept.push(a);
    newFiles.push({ path: `${dir}/attachments/${a.filename}`, folder: `${dir}/attachments`, name: a.filename, sha256: a.sha256, size: a.size_bytes, mime: a.content_type });
  }

  const bytes = newFiles.reduce((n, f) => n + f.size, 0);
  if (limits.max_storage_bytes !== null && group.storage + bytes > limits.max_storage_bytes) {
    throw new AppError('STORAGE_LIMIT_REACHED', undefined, { limit: 'max_storage_bytes', max: limits.max_storage_bytes });
  }
  if (limits.max_files_per_mailbox !== null && m.files + newFiles.length > limits.max_files_per_mailbox) {
    throw new AppError('FILE_LIMIT_REACHED', undefined, { limit: 'max_files_per_mailbox', max: limits.max_files_per_mailbox });
  }
  if (limits.max_current_files !== null && group.files + newFiles.length > limits.max_current_files) {
    throw new AppError('FILE_LIMIT_REACHED', undefined, { limit: 'max_current_files', max: limits.max_current_files });
  }

  const ids = newFiles.map(() => ({ file: newId('df'), version: newId('dfv') }));
  newFiles.forEach((f, i) => {
    batch.files.push({
      id: ids[i]!.file, mailbox_id: m.id, account_id: m.accountId, path: f.path, live_path: f.path, folder: f.folder, basename: f.name, role: 'source',
      created_by_system: 'email', current_version_id: ids[i]!.version, version_count: 1, read_at: null, read_by_user_id: null, read_by_api_key_id: null,
      created_by_user_id: null, created_by_api_key_id: null, created_by_agent: null, updated_by_user_id: null, updated_by_api_key_id: null, updated_by_agent: null,
      created_at: now, updated_at: now, deleted_at: null,
    });
    batch.versions.push({
      id: ids[i]!.version, file_id: ids[i]!.file, mailbox_id: m.id, version_number: 1, name: f.name, path: f.path, mime_type: f.mime, sha256: f.sha256, byte_size: f.size,
      reason: null, created_by_system: 'email', deleted: 0, mailbox_version_id: versionId, read_at: null, read_by_user_id: null, read_by_api_key_id: null,
      created_by_user_id: null, created_by_api_key_id: null, created_by_agent: null, created_at: now,
    });
  });
  m.versionNumber += 1;
  m.versionId = versionId;
  batch.mailboxVersions.push({ id: versionId, mailbox_id: m.id, version_number: m.versionNumber, action: 'email.received', files_changed: newFiles.length, created_by_user_id: null, created_by_api_key_id: null, created_at: now });
  m.storage += bytes;
  m.files += newFiles.length;
  group.storage += bytes;
  group.files += newFiles.length;
  m.seq += 1;
  m.messages += 1;
  m.unread += 1;
  m.last = { at: now, path: dir };

  const p = d.parsed;
  const keys = conversationKeysOf(d);
  const conversationId = (await conversations.find(keys.mailboxId, keys.threadKey, keys.refs)) ?? d.emailId;
  const attachments = kept.map((a) => {
    const i = newFiles.findIndex((f) => f.path === `${dir}/attachments/${a.filename}`);
    return { id: ids[i]!.file, filename: a.filename, content_type: a.content_type, size_bytes: a.size_bytes, version_id: ids[i]!.version, origin: a.disposition, content_id: a.content_id };
  });
  const row: EmailsTable = {
    id: d.emailId, mailbox_id: m.id, account_id: m.accountId, seq: m.seq, direction: 'received', conversation_id: conversationId, thread_key: keys.threadKey,
    subject: p.subject, subject_search: p.subject?.toLowerCase() ?? null,
    from_addresses: JSON.stringify(p.from_addresses), sender_address: p.from_addresses[0]?.address.toLowerCase() ?? null,
    to_addresses: JSON.stringify(p.to_addresses), cc_addresses: JSON.stringify(p.cc_addresses), reply_to_addresses: JSON.stringify(p.reply_to_addresses),
    message_id: p.message_id, in_reply_to: JSON.stringify(p.in_reply_to), reference_ids: JSON.stringify(p.references),
    delivered_to: d.deliveredTo, received_at: now, body_status: p.body_status, body_text: p.body_text,
    attachment_count: attachments.length, omitted_attachment_count: omitted, attachments: JSON.stringify(attachments),
    size_bytes: d.raw.byteSize, raw_sha256: d.raw.sha256, directory: dir, raw_file_id: ids[0]!.file, raw_version_id: ids[0]!.version, json_file_id: ids[1]!.file,
    mail_from: d.envelope.mailFrom, client_ip: d.envelope.clientIp, helo: d.envelope.helo,
    auth_results: d.auth ? JSON.stringify(d.auth) : null, spam_flags: JSON.stringify(d.spamFlags),
    labeling: 'pending', label: null, labeled_at: null, read_at: null, read_by_user_id: null, read_by_api_key_id: null, delivery: null, created_at: now,
  };
  batch.emails.push(row);
  d.jsonFileId = row.json_file_id ?? undefined;
  conversations.remember(row);
  batch.events.push(
    eventRow({
      type: 'email.received', accountId: m.accountId, mailboxId: m.id, at: d.receivedAt,
      data: { account_id: m.accountId, mailbox_id: m.id, email_id: d.emailId, received_at: now, attachment_count: attachments.length },
    }),
  );
}
