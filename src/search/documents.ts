import { sql, type Kysely } from 'kysely';
import type { DB, EmailsTable } from '../db/schema.ts';
import { attachmentsOf, jsonArray, type EmailAddress } from '../emails/emails.present.ts';
import type { EmailDoc } from './search-index.ts';

// Building search documents from stored rows, and reading extracted text back.

export interface StoredText {
  sha256: string;
  status: string;
  text: string | null;
  pages: number | null;
  error: string | null;
}

/** Extraction results by content hash (only the ones known). */
export async function textsBySha(db: Kysely<DB>, shas: string[]): Promise<Map<string, StoredText>> {
  const wanted = [...new Set(shas.filter(Boolean))];
  if (!wanted.length) return new Map();
  const rows = await sql<StoredText>`select sha256, status, text, pages, error from blob_texts where sha256 in (${sql.join(wanted)})`.execute(db);
  return new Map(rows.rows.map((r) => [r.sha256, r]));
}

/** Which of these contents have text (for FileVersion.has_text). */
export async function shasWithText(db: Kysely<DB>, shas: (string | null)[]): Promise<Set<string>> {
  const wanted = [...new Set(shas.filter((s): s is string => !!s))];
  if (!wanted.length) return new Set();
  const rows = await sql<{ sha256: string }>`select sha256 from blob_texts where status = 'done' and sha256 in (${sql.join(wanted)})`.execute(db);
  return new Set(rows.rows.map((r) => r.sha256));
}

function people(json: string): string {
  return jsonArray<EmailAddress>(json)
    .filter((a) => a && typeof a.address === 'string')
    .map((a) => `${a.name ?? ''} ${a.address}`.trim())
    .join('\n');
}

/** One email's search document, with the attachment texts known so far. */
export function emailDoc(row: EmailsTable, attachments: { filename: string; sha256: string | null }[], texts: Map<string, StoredText>): EmailDoc {
  const shas = attachments.map((a) => a.sha256).filter((s): s is string => !!s);
  return {
    emailId: row.id,
    mailboxId: row.mailbox_id,
    subject: row.subject ?? '',
    sender: people(row.from_addresses),
    recipients: [people(row.to_addresses), people(row.cc_addresses)].filter(Boolean).join('\n'),
    body: row.body_text ?? '',
    names: attachments.map((a) => a.filename).join('\n'),
    attachments: shas.map((s) => texts.get(s)?.text ?? '').filter(Boolean).join('\n\n'),
    attachmentShas: shas,
  };
}

/**
 * Documents for stored emails (reindexing, or an attachment's text arriving). `versions` gives the
 * content hash of attachment versions the caller holds but may not have written yet (the group
 * commit writes them in the same batch as the documents); others are read.
 */
export async function emailDocsFor(db: Kysely<DB>, rows: EmailsTable[], versions?: Map<string, string | null>): Promise<EmailDoc[]> {
  const shaByVersion = new Map<string, string | null>();
  const versionIds: string[] = [];
  for (const id of rows.flatMap((r) => attachmentsOf(r).map((a) => a.version_id)).filter(Boolean)) {
    if (versions?.has(id)) shaByVersion.set(id, versions.get(id)!);
    else versionIds.push(id);
  }
  for (let i = 0; i < versionIds.length; i += 500) {
    const vs = await db.selectFrom('file_versions').select(['id', 'sha256']).where('id', 'in', versionIds.slice(i, i + 500)).execute();
    for (const v of vs) shaByVersion.set(v.id, v.sha256);
  }
  const texts = await textsBySha(db, [...shaByVersion.values()].filter((s): s is string => !!s));
  return rows.map((r) => emailDoc(r, attachmentsOf(r).map((a) => ({ filename: a.filename, sha256: shaByVersion.get(a.version_id) ?? null })), texts));
}

/** Emails that have this content as an attachment (their documents include its text). */
export async function emailsWithAttachment(db: Kysely<DB>, sha256: string): Promise<EmailsTable[]> {
  const versions = await db.selectFrom('file_versions').select(['mailbox_id', 'path']).where('sha256', '=', sha256).where('path', 'like', '_email/%/attachments/%').execute();
  // `_email/YYYY/MM/DD/<email id>/attachments/<name>`: the folder names the email.
  const ids = [...new Set(versions.map((v) => /^_email\/\d{4}\/\d{2}\/\d{2}\/(eml_[A-Za-z0-9]+)\/attachments\//.exec(v.path)?.[1]).filter((x): x is string => !!x))];
  const out: EmailsTable[] = [];
  for (let i = 0; i < ids.length; i += 500) out.push(...(await db.selectFrom('emails').selectAll().where('id', 'in', ids.slice(i, i + 500)).execute()));
  return out;
}
