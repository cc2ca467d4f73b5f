import { sql } from 'kysely';
import type { AppDeps } from '../context.ts';

// Queries behind the files pages. Callers reached the mailbox through openMailbox first.

export const MAX_FOLDER_ROWS = 1000;
const MAX_SUBFOLDERS = 500;

export type FileSort = 'name' | 'size' | 'date';

export interface FolderEntry {
  name: string;
  files: number;
}

export interface FileEntry {
  id: string;
  basename: string;
  path: string;
  size: number;
  mimeType: string;
  updatedAt: string;
  versions: number;
}

/** "a/b/c" → the folder and its ancestors, for breadcrumbs. */
export function crumbs(folder: string): { name: string; path: string }[] {
  if (!folder) return [];
  const parts = folder.split('/');
  return parts.map((name, i) => ({ name, path: parts.slice(0, i + 1).join('/') }));
}

/**
 * One folder of the tree: the subfolders directly below it (with how many live files lie under
 * each) and its own files, sorted. Both read the (mailbox_id, folder, path) index.
 */
export async function folderListing(deps: AppDeps, mailboxId: string, folder: string, sort: FileSort, desc: boolean): Promise<{ folders: FolderEntry[]; files: FileEntry[]; more: boolean }> {
  const n = folder.length;
  // The next path segment below `folder`; the two databases spell it differently.
  // The offset is a literal (an integer we computed): as a parameter, Postgres would not see the
  // select and group-by expressions as the same one.
  const rest = n ? sql<string>`substr(folder, ${sql.lit(n + 2)})` : sql<string>`folder`;
  const first = deps.dialect === 'postgres' ? sql<string>`split_part(${rest}, '/', 1)` : sql<string>`substr(${rest}, 1, instr(${rest} || '/', '/') - 1)`;
  let sub = deps.db
    .selectFrom('files')
    .select([first.as('name'), (eb) => eb.fn.countAll<number>().as('n')])
    .where('mailbox_id', '=', mailboxId)
    .where('deleted_at', 'is', null);
  sub = n ? sub.where('folder', '>', `${folder}/`).where('folder', '<', `${folder}0`) : sub.where('folder', '<>', '');
  const order = sort === 'size' ? 'file_versions.byte_size' : sort === 'date' ? 'file_versions.created_at' : 'files.path';
  const [folderRows, fileRows] = await Promise.all([
    sub.groupBy(first).orderBy(first).limit(MAX_SUBFOLDERS).execute(),
    deps.db
      .selectFrom('files')
      .innerJoin('file_versions', 'file_versions.id', 'files.current_version_id')
      .select(['files.id', 'files.path', 'files.basename', 'files.version_count', 'file_versions.byte_size', 'file_versions.mime_type', 'file_versions.created_at'])
      .where('files.mailbox_id', '=', mailboxId)
      .where('files.folder', '=', folder)
      .where('files.deleted_at', 'is', null)
      .orderBy(order, desc ? 'desc' : 'asc')
      .orderBy('files.path')
      .limit(MAX_FOLDER_ROWS + 1)
      .execute(),
  ]);
  return {
    folders: folderRows.map((r) => ({ name: r.name, files: Number(r.n) })),
    files: fileRows.slice(0, MAX_FOLDER_ROWS).map((f) => ({
      id: f.id,
      basename: f.basename,
      path: f.path,
      size: Number(f.byte_size),
      mimeType: f.mime_type,
      updatedAt: f.created_at,
      versions: Number(f.version_count),
    })),
    more: fileRows.length > MAX_FOLDER_ROWS,
  };
}

/** A small line diff (longest common subsequence) for text versions; null when too large to compare here. */
export function lineDiff(a: string, b: string, maxLines = 3000): { op: ' ' | '+' | '-'; line: string }[] | null {
  const x = a.split('\n');
  const y = b.split('\n');
  if (x.length > maxLines || y.length > maxLines) return null;
  const m = x.length;
  const k = y.length;
  const lcs: Uint16Array[] = Array.from({ length: m + 1 }, () => new Uint16Array(k + 1));
  for (let i = m - 1; i >= 0; i--) for (let j = k - 1; j >= 0; j--) lcs[i]![j] = x[i] === y[j] ? lcs[i + 1]![j + 1]! + 1 : Math.max(lcs[i + 1]![j]!, lcs[i]![j + 1]!);
  const out: { op: ' ' | '+' | '-'; line: string }[] = [];
  let i = 0;
  let j = 0;
  while (i < m && j < k) {
    if (x[i] === y[j]) {
      out.push({ op: ' ', line: x[i]! });
      i++;
      j++;
    } else if (lcs[i + 1]![j]! >= lcs[i]![j + 1]!) out.push({ op: '-', line: x[i++]! });
    else out.push({ op: '+', line: y[j++]! });
  }
  while (i < m) out.push({ op: '-', line: x[i++]! });
  while (j < k) out.push({ op: '+', line: y[j++]! });
  return out;
}
