import { sql } from 'kysely';
import type { AppDeps } from '../context.ts';
import type { EmailsTable } from '../db/schema.ts';
import { downloadLink, type DownloadLink } from '../files/blob.routes.ts';

// Queries behind the mailbox and email pages. Callers have already reached the mailbox through
// openMailbox (person-ctx.ts); these only read rows of that mailbox.

export const EMAILS_PER_PAGE = 50;
const MAX_TOP_FILES = 100;
const MAX_TOP_FOLDERS = 100;

export type EmailListRow = Pick<EmailsTable, 'id' | 'seq' | 'direction' | 'subject' | 'from_addresses' | 'to_addresses' | 'received_at' | 'label' | 'labeling' | 'read_at' | 'attachment_count' | 'body_text'>;

/** The list's filters (all optional); the same names are the page's query parameters. */
export interface EmailFilters {
  unread?: boolean;
  label?: string;
  sender?: string;
  attachments?: boolean;
  direction?: 'received' | 'sent';
}

export interface EmailPage {
  rows: EmailListRow[];
  /** `before` value of the next older page, or null at the oldest email. */
  older: number | null;
  /** `after` value of the next newer page, or null at the newest email. */
  newer: number | null;
}

/**
 * One page of a mailbox's emails, newest first by `seq` (arrival order, as the API's list), both
 * directions. `before`/`after` are seq positions, so paging holds steady while mail arrives.
 */
export async function emailListPage(deps: AppDeps, mailboxId: string, at: { before?: number; after?: number }, f: EmailFilters = {}): Promise<EmailPage> {
  let base = deps.db.selectFrom('emails').where('mailbox_id', '=', mailboxId);
  if (f.unread) base = base.where('read_at', 'is', null);
  if (f.label) base = base.where('label', '=', f.label);
  if (f.sender) base = base.where('sender_address', '=', f.sender.trim().toLowerCase());
  if (f.attachments) base = base.where('attachment_count', '>', 0);
  if (f.direction) base = base.where('direction', '=', f.direction);
  // The snippet is the start of the text body, cut in SQL so a long body is never read whole.
  const snippet = deps.dialect === 'postgres' ? sql<string | null>`substr(body_text, 1, 160)` : sql<string | null>`substr(body_text, 1, 160)`;
  let q = base.select(['id', 'seq', 'direction', 'subject', 'from_addresses', 'to_addresses', 'received_at', 'label', 'labeling', 'read_at', 'attachment_count', snippet.as('body_text')]);
  let rows: EmailListRow[];
  if (at.after !== undefined) {
    // Newer page: the next 50 above the position, read upwards and shown newest first.
    rows = (await q.where('seq', '>', at.after).orderBy('seq', 'asc').limit(EMAILS_PER_PAGE).execute()).reverse();
  } else {
    if (at.before !== undefined) q = q.where('seq', '<', at.before);
    rows = await q.orderBy('seq', 'desc').limit(EMAILS_PER_PAGE).execute();
  }
  if (rows.length === 0) return { rows, older: null, newer: null };
  const top = Number(rows[0]!.seq);
  const bottom = Number(rows.at(-1)!.seq);
  const [olderRow, newerRow] = await Promise.all([
    base.select('seq').where('seq', '<', bottom).limit(1).executeTakeFirst(),
    base.select('seq').where('seq', '>', top).limit(1).executeTakeFirst(),
  ]);
  return { rows, older: olderRow ? bottom : null, newer: newerRow ? top : null };
}

export interface TopFolder {
  name: string;
  files: number;
}

export interface TopFile {
  path: string;
  size: number;
  contentType: string;
  updatedAt: string;
  link: DownloadLink | null;
}

/** The first level of a mailbox's file tree: folders (with how many live files lie below) and files. */
export async function topLevelEntries(deps: AppDeps, mailboxId: string): Promise<{ folders: TopFolder[]; files: TopFile[] }> {
  // First path segment of the folder; the two databases spell it differently.
  const first = deps.dialect === 'postgres' ? sql<string>`split_part(folder, '/', 1)` : sql<string>`substr(folder, 1, instr(folder || '/', '/') - 1)`;
  const [folderRows, fileRows] = await Promise.all([
    deps.db
      .selectFrom('files')
      .select([first.as('name'), (eb) => eb.fn.countAll<number>().as('n')])
      .where('mailbox_id', '=', mailboxId)
      .where('deleted_at', 'is', null)
      .where('folder', '<>', '')
      .groupBy(first)
      .orderBy(first)
      .limit(MAX_TOP_FOLDERS)
      .execute(),
    deps.db
      .selectFrom('files')
      .innerJoin('file_versions', 'file_versions.id', 'files.current_version_id')
      .select(['files.path', 'files.basename', 'file_versions.byte_size', 'file_versions.mime_type', 'file_versions.sha256', 'file_versions.created_at'])
      .where('files.mailbox_id', '=', mailboxId)
      .where('files.deleted_at', 'is', null)
      .where('files.folder', '=', '')
      .orderBy('files.path')
      .limit(MAX_TOP_FILES)
      .execute(),
  ]);
  const files = await Promise.all(
    fileRows.map(async (f) => ({
      path: f.path,
      size: Number(f.byte_size),
      contentType: f.mime_type,
      updatedAt: f.created_at,
      link: f.sha256 ? await downloadLink(deps, { sha256: f.sha256, filename: f.basename, contentType: f.mime_type, byteSize: Number(f.byte_size) }) : null,
    })),
  );
  return { folders: folderRows.map((r) => ({ name: r.name, files: Number(r.n) })), files };
}
