import type { Kysely } from 'kysely';
import type { DB, FilesTable, FileVersionsTable } from '../db/schema.ts';
import type { GroupUsage } from './files.write.ts';
import { compiledQuery } from '../db/compiled-query.ts';

// Read for every file write and every received message (built once: src/db/compiled-query.ts).
const GROUP_USAGE = compiledQuery(
  (db, groupId: string) =>
    db
      .selectFrom('mailboxes')
      .innerJoin('accounts', 'accounts.id', 'mailboxes.account_id')
      .select((eb) => [eb.fn.sum<number>('mailboxes.files_count').as('files'), eb.fn.sum<number>('mailboxes.storage_bytes').as('storage')])
      .where('mailboxes.deleted_at', 'is', null)
      .where((eb) => eb.or([eb('accounts.id', '=', groupId), eb('accounts.parent_account_id', '=', groupId)])),
  1,
);

export async function groupUsage(db: Kysely<DB>, groupId: string): Promise<GroupUsage> {
  const row = (await GROUP_USAGE.executeTakeFirst(db, groupId))!;
  return { files: Number(row.files ?? 0), storage: Number(row.storage ?? 0) };
}

export function findLiveFile(db: Kysely<DB>, mailboxId: string, fileId: string): Promise<FilesTable | undefined> {
  return db.selectFrom('files').selectAll().where('mailbox_id', '=', mailboxId).where('id', '=', fileId).where('deleted_at', 'is', null).executeTakeFirst();
}

// Read for every file written (upload sessions save up to 100 per call): built once.
const FILE_BY_PATH = compiledQuery((db, mailboxId: string, path: string) => db.selectFrom('files').selectAll().where('mailbox_id', '=', mailboxId).where('live_path', '=', path), 2);
const VERSION_BY_ID = compiledQuery((db, id: string) => db.selectFrom('file_versions').selectAll().where('id', '=', id), 1);

export function findFileByPath(db: Kysely<DB>, mailboxId: string, path: string): Promise<FilesTable | undefined> {
  return FILE_BY_PATH.executeTakeFirst(db, mailboxId, path);
}

/** The live files at these paths of a mailbox, by path. */
export async function filesByPath(db: Kysely<DB>, mailboxId: string, paths: string[]): Promise<Map<string, FilesTable>> {
  const out = new Map<string, FilesTable>();
  // Chunks well under the databases' bound-parameter limits.
  for (let i = 0; i < paths.length; i += 500) {
    const rows = await db.selectFrom('files').selectAll().where('mailbox_id', '=', mailboxId).where('live_path', 'in', paths.slice(i, i + 500)).execute();
    for (const r of rows) out.set(r.live_path!, r);
  }
  return out;
}

export function findVersion(db: Kysely<DB>, id: string): Promise<FileVersionsTable | undefined> {
  return VERSION_BY_ID.executeTakeFirst(db, id);
}

export async function versionsById(db: Kysely<DB>, ids: (string | null)[]): Promise<Map<string, FileVersionsTable>> {
  const wanted = [...new Set(ids.filter((x): x is string => !!x))];
  if (!wanted.length) return new Map();
  const rows = await db.selectFrom('file_versions').selectAll().where('id', 'in', wanted).execute();
  return new Map(rows.map((r) => [r.id, r]));
}

export async function recentReasons(db: Kysely<DB>, fileIds: string[]) {
  if (!fileIds.length) return new Map<string, FileVersionsTable[]>();
  const rows = await db
    .selectFrom('file_versions')
    .selectAll()
    .where('file_id', 'in', fileIds)
    .where('reason', 'is not', null)
    .orderBy('version_number', 'desc')
    .execute();
  const out = new Map<string, FileVersionsTable[]>();
  for (const r of rows) {
    const list = out.get(r.file_id) ?? [];
    if (list.length < 20) list.push(r);
    out.set(r.file_id, list);
  }
  return out;
}
