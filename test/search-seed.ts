import type { Kysely } from 'kysely';
import type { DB, EmailsTable } from '../src/db/schema.ts';
import type { SearchIndex } from '../src/search/search-index.ts';
import { emailDoc } from '../src/search/documents.ts';
import { createHash } from 'node:crypto';
import { newId } from '../src/ids.ts';

// Many emails at once, through the store layer's writers (the emails table and
// SearchIndex.putEmails in one transaction, as the inbound store does), for searches over more mail
// than SMTP could deliver in a test or a benchmark.

export interface SeedEmail {
  mailboxId: string;
  accountId: string;
  seq: number;
  subject: string;
  body: string;
  from: { address: string; name: string | null };
  to: string;
  receivedAt: string;
  /** Junk (withheld from API keys) when set. */
  label?: string | null;
}

export function emailRow(e: SeedEmail): EmailsTable {
  return {
    id: newId('eml'), mailbox_id: e.mailboxId, account_id: e.accountId, seq: e.seq, direction: 'received', conversation_id: `c${e.seq}`, thread_key: null,
    subject: e.subject, subject_search: null, from_addresses: JSON.stringify([e.from]), sender_address: e.from.address,
    to_addresses: JSON.stringify([{ address: e.to, name: null }]), cc_addresses: '[]', reply_to_addresses: '[]',
    message_id: `<${e.mailboxId}.${e.seq}@seed>`, in_reply_to: '[]', reference_ids: '[]', delivered_to: e.to, received_at: e.receivedAt, body_status: 'text', body_text: e.body,
    attachment_count: 0, omitted_attachment_count: 0, attachments: '[]', size_bytes: 2000, raw_sha256: null, directory: null, raw_file_id: null, raw_version_id: null, json_file_id: null,
    mail_from: null, client_ip: null, helo: null, auth_results: null, spam_flags: '[]', labeling: 'done', label: e.label ?? null, labeled_at: e.receivedAt, read_at: null, read_by_user_id: null, read_by_api_key_id: null, delivery: null, created_at: e.receivedAt,
  } as EmailsTable;
}

/** Stores the rows and their search documents in one transaction. */
export async function storeEmails(db: Kysely<DB>, index: SearchIndex, rows: EmailsTable[]): Promise<void> {
  if (!rows.length) return;
  await db.transaction().execute(async (trx) => {
    // Bound parameters per statement stay under both databases' limits.
    const per = Math.floor(20_000 / Object.keys(rows[0]!).length);
    for (let k = 0; k < rows.length; k += per) await trx.insertInto('emails').values(rows.slice(k, k + per)).execute();
    await index.putEmails(trx, rows.map((r) => emailDoc(r, [], new Map())));
  });
}

/**
 * Files with one version each whose content has `text` (stored once per distinct content through
 * SearchIndex.putText), in one transaction, as the files service and the extraction job leave them.
 * `contents[i]` is the text of file i; files with the same text share its content.
 */
export async function storeFiles(db: Kysely<DB>, index: SearchIndex, mailbox: { id: string; accountId: string }, contents: string[]): Promise<string[]> {
  const at = new Date().toISOString();
  const sha = (t: string) => createHash('sha256').update(t).digest('hex');
  const files: any[] = [];
  const versions: any[] = [];
  contents.forEach((text, j) => {
    const fileId = newId('df');
    const versionId = newId('dfv');
    const p = `seed/f${j}-${fileId.slice(-6)}.txt`;
    files.push({ id: fileId, mailbox_id: mailbox.id, account_id: mailbox.accountId, path: p, live_path: p, folder: 'seed', basename: p.slice(5), role: 'source', created_by_system: 'api', current_version_id: versionId, version_count: 1, read_at: null, read_by_user_id: null, read_by_api_key_id: null, created_by_user_id: null, created_by_api_key_id: null, created_by_agent: null, updated_by_user_id: null, updated_by_api_key_id: null, updated_by_agent: null, created_at: at, updated_at: at, deleted_at: null });
    versions.push({ id: versionId, file_id: fileId, mailbox_id: mailbox.id, version_number: 1, name: p.slice(5), path: p, mime_type: 'text/plain', sha256: sha(text), byte_size: text.length, reason: null, created_by_system: 'api', deleted: 0, mailbox_version_id: null, read_at: null, read_by_user_id: null, read_by_api_key_id: null, created_by_user_id: null, created_by_api_key_id: null, created_by_agent: null, created_at: at });
  });
  await db.transaction().execute(async (trx) => {
    for (const [table, rows] of [['files', files], ['file_versions', versions]] as const) {
      const per = Math.floor(20_000 / Object.keys(rows[0]).length);
      for (let k = 0; k < rows.length; k += per) await trx.insertInto(table).values(rows.slice(k, k + per)).execute();
    }
    for (const text of new Set(contents)) await index.putText(trx, { sha256: sha(text), status: 'done', text, pages: null, error: null, extractedAt: at });
  });
  return files.map((f) => f.id);
}
