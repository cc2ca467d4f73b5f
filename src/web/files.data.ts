import { sql } from 'kysely';
import type { AppDeps } from '../context.ts';

// Queries behind the files pages. Callers reached the mailbox through openMailbox first.

/** Files per folder page; the rest are reached by keyset paging (`?after=` / `?before=`). */
export const FOLDER_PAGE_ROWS = 500;
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

/** A position in a sorted folder: the sort key of a row and its path (unique among live files). */
export interface FileCursor {
  value: string | number;
  path: string;
}

/** Cursors travel in links as base64url JSON; anything malformed is treated as no cursor (first page). */
export function encodeCursor(c: FileCursor): string {
  return Buffer.from(JSON.stringify([c.value, c.path])).toString('base64url');
}

export function decodeCursor(text: unknown, sort: FileSort): FileCursor | null {
  if (typeof text !== 'string' || !text || text.length > 3000) return null;
  try {
    const v = JSON.parse(Buffer.from(text, 'base64url').toString('utf8')) as unknown;
    if (!Array.isArray(v) || v.length !== 2 || typeof v[1] !== 'string') return null;
    if (sort === 'size') return typeof v[0] === 'number' && Number.isSafeInteger(v[0]) ? { value: v[0], path: v[1] } : null;
    return typeof v[0] === 'string' ? { value: v[0], path: v[1] } : null;
  } catch {
    return null;
  }
}

export interface FolderPosition {
  after?: FileCursor | null;
  before?: FileCursor | null;
}

const SORT_COLUMN = { name: 'files.path', size: 'file_versions.byte_size', date: 'file_versions.created_at' } as const;

/**
 * One folder of the tree: the subfolders directly below it (with how many live files lie under
 * each; on the first page only) and one page of its own files, sorted, with keyset cursors to
 * the pages before and after. Sorting is by the chosen key then the path, both in the chosen
 * direction, so (key, path) orders the rows totally and a cursor is exact. Both queries read
 * the (mailbox_id, folder, path) index.
 */
export async function folderListing(
  deps: AppDeps,
  mailboxId: string,
  folder: string,
  sort: FileSort,
  desc: boolean,
  at: FolderPosition = {},
  pageRows = FOLDER_PAGE_ROWS,
): Promise<{ folders: FolderEntry[]; files: FileEntry[]; next: string | null; prev: string | null }> {
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
  const column = SORT_COLUMN[sort];
  // Reading backwards (a `before` cursor) walks the order reversed, then flips the page.
  const backwards = Boolean(at.before) && !at.after;
  const cursor = at.after ?? at.before ?? null;
  const ascending = desc === backwards;
  const dir = ascending ? 'asc' : 'desc';
  const cmp = ascending ? '>' : '<';
  let files = deps.db
    .selectFrom('files')
    .innerJoin('file_versions', 'file_versions.id', 'files.current_version_id')
    .select(['files.id', 'files.path', 'files.basename', 'files.version_count', 'file_versions.byte_size', 'file_versions.mime_type', 'file_versions.created_at'])
    .where('files.mailbox_id', '=', mailboxId)
    .where('files.folder', '=', folder)
    .where('files.deleted_at', 'is', null);
  if (cursor) {
    files =
      sort === 'name'
        ? files.where('files.path', cmp, cursor.path)
        : files.where((eb) => eb.or([eb(column, cmp, cursor.value), eb.and([eb(column, '=', cursor.value), eb('files.path', cmp, cursor.path)])]));
  }
  files = sort === 'name' ? files.orderBy('files.path', dir) : files.orderBy(column, dir).orderBy('files.path', dir);
  const [folderRows, fileRows] = await Promise.all([
    cursor ? Promise.resolve([]) : sub.groupBy(first).orderBy(first).limit(MAX_SUBFOLDERS).execute(),
    files.limit(pageRows + 1).execute(),
  ]);
  const more = fileRows.length > pageRows;
  const page = fileRows.slice(0, pageRows);
  if (backwards) page.reverse();
  const entries = page.map((f) => ({
    id: f.id,
    basename: f.basename,
    path: f.path,
    size: Number(f.byte_size),
    mimeType: f.mime_type,
    updatedAt: f.created_at,
    versions: Number(f.version_count),
  }));
  const key = (f: FileEntry): string => encodeCursor({ value: sort === 'size' ? f.size : sort === 'date' ? f.updatedAt : f.path, path: f.path });
  const firstRow = entries[0];
  const lastRow = entries[entries.length - 1];
  // Forwards: a next page when more rows were read, a previous one when we came from a cursor.
  // Backwards: the reverse.
  const hasNext = backwards ? true : more;
  const hasPrev = backwards ? more : Boolean(cursor);
  return {
    folders: folderRows.map((r) => ({ name: r.name, files: Number(r.n) })),
    files: entries,
    next: hasNext && lastRow ? key(lastRow) : null,
    prev: hasPrev && firstRow ? key(firstRow) : null,
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
