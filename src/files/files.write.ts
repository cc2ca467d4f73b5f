import type { FileRole, FilesTable, FileVersionsTable } from '../db/schema.ts';
import type { PlanLimits } from '../accounts/plans.ts';
import { AppError } from '../errors.ts';
import { newId } from '../ids.ts';
import { iso } from '../time.ts';
import type { MailboxChange } from './mailbox-change.ts';
import { isPdf } from './paths.ts';
import { compiledInsert, compiledQuery } from '../db/compiled-query.ts';
import { filesByPath, findFileByPath, findVersion, versionsById } from './files.repo.ts';

// Every file written runs these (an upload session saves up to 100 per call): built once
// (src/db/compiled-query.ts), since building them cost more than SQLite takes to run them.
const INSERT_FILE = compiledInsert('files');
const INSERT_VERSION = compiledInsert('file_versions');
const UPDATE_FILE = compiledQuery(
  (db, id: string, versionId: string, versionCount: number, role: FileRole, user: string | null, key: string | null, agent: string | null, at: string) =>
    db
      .updateTable('files')
      .set({ current_version_id: versionId, version_count: versionCount, role, updated_by_user_id: user, updated_by_api_key_id: key, updated_by_agent: agent, updated_at: at })
      .where('id', '=', id),
  8,
);

export interface NewContent {
  path: string;
  folder: string;
  basename: string;
  /** Display name of the version (defaults to the basename). */
  name?: string | null;
  role?: FileRole;
  sha256: string;
  byteSize: number;
  mimeType: string;
  reason?: string | null;
  createdBySystem: string;
  policy?: 'replace' | 'skip';
  /** Record a version even when the content equals the current one (a rename or move is a change). */
  recordIdentical?: boolean;
  /** The caller knows no live file has this path (a fresh `_email/<id>/` folder): skip the lookup. */
  knownNew?: boolean;
}

export interface WriteResult {
  file: FilesTable;
  version: FileVersionsTable;
  created: boolean;
  skipped: boolean;
  duplicate: boolean;
  skipCode: 'DUPLICATE_FILE_VERSION' | 'FILE_EXISTS' | null;
}

export interface GroupUsage {
  files: number;
  storage: number;
}

/** Limits that apply to one more version of `byteSize` bytes. */
export function checkContentLimits(limits: PlanLimits, name: string, mimeType: string, byteSize: number, field = 'byte_size') {
  const cap = isPdf(name, mimeType) && limits.max_pdf_size_bytes !== null ? Math.min(limits.max_pdf_size_bytes, limits.max_file_size_bytes ?? Infinity) : limits.max_file_size_bytes;
  if (cap !== null && byteSize > cap) {
    throw new AppError('FILE_TOO_LARGE', `The file is ${byteSize} bytes; the plan allows ${cap}.`, { field, byte_size: byteSize, max_bytes: cap, limit: isPdf(name, mimeType) ? 'max_pdf_size_bytes' : 'max_file_size_bytes' });
  }
}

export function actorColumns(change: MailboxChange) {
  return {
    user: change.actor.userId,
    key: change.actor.apiKeyId,
    agent: change.actor.agent?.agent || change.actor.agent?.client ? JSON.stringify({ name: change.actor.agent.agent ?? change.actor.agent.client }) : null,
  };
}

/** A file version row with the acting person, key and agent filled in. */
function versionRow(change: MailboxChange, file: FilesTable, fields: Pick<FileVersionsTable, 'name' | 'path' | 'mime_type' | 'sha256' | 'byte_size' | 'reason' | 'created_by_system' | 'deleted'>): FileVersionsTable {
  const who = actorColumns(change);
  return {
    id: newId('dfv'),
    file_id: file.id,
    mailbox_id: change.mailboxId,
    version_number: file.version_count + 1,
    ...fields,
    mailbox_version_id: change.version(),
    read_at: null,
    read_by_user_id: null,
    read_by_api_key_id: null,
    created_by_user_id: who.user,
    created_by_api_key_id: who.key,
    created_by_agent: who.agent,
    created_at: iso(change.now),
  };
}

/**
 * Writes one file version at a path inside a mailbox change: a new file, a new version of
 * the live file at that path, or a skip (identical content, or policy `skip`).
 */
export async function writeFileVersion(change: MailboxChange, limits: PlanLimits, group: GroupUsage, input: NewContent): Promise<WriteResult> {
  const existing = input.knownNew ? undefined : await findFileByPath(change.trx, change.mailboxId, input.path);
  const current = existing?.current_version_id ? await findVersion(change.trx, existing.current_version_id) : undefined;
  const planned = planWrite(change, limits, group, input, existing, current);
  if (planned.write) await applyWrites(change, [planned.write]);
  return planned.result;
}

/**
 * writeFileVersion for many paths at once (an upload session's save): the live files and their
 * current versions are read in one query each and the new rows inserted in one statement per
 * table, instead of four statements per file. Each file is checked in order against the limits
 * as the ones before it left them, so the outcome, and the first error, are writeFileVersion's
 * one after the other. A path given twice is written one file at a time (the second write must
 * see the first).
 */
export async function writeFileVersions(change: MailboxChange, limits: PlanLimits, group: GroupUsage, inputs: NewContent[]): Promise<WriteResult[]> {
  const paths = inputs.map((i) => i.path);
  if (new Set(paths).size !== paths.length) {
    const out: WriteResult[] = [];
    for (const input of inputs) out.push(await writeFileVersion(change, limits, group, input));
    return out;
  }
  const live = await filesByPath(change.trx, change.mailboxId, inputs.filter((i) => !i.knownNew).map((i) => i.path));
  const versions = await versionsById(change.trx, [...live.values()].map((f) => f.current_version_id));
  const results: WriteResult[] = [];
  const writes: PlannedWrite[] = [];
  for (const input of inputs) {
    const existing = live.get(input.path);
    const current = existing?.current_version_id ? versions.get(existing.current_version_id) : undefined;
    const planned = planWrite(change, limits, group, input, existing, current);
    results.push(planned.result);
    if (planned.write) writes.push(planned.write);
  }
  await applyWrites(change, writes);
  return results;
}

interface PlannedWrite {
  /** The file row to insert (a new file), or the live file to point at its new version. */
  file: FilesTable;
  isNew: boolean;
  version: FileVersionsTable;
}

/**
 * What writing `input` does, given the live file at its path and that file's current version:
 * the checks, the rows, and the change's counters moved. Nothing is written.
 */
function planWrite(change: MailboxChange, limits: PlanLimits, group: GroupUsage, input: NewContent, existing: FilesTable | undefined, current: FileVersionsTable | undefined): { result: WriteResult; write?: PlannedWrite } {
  if (existing?.current_version_id && !current) throw new Error(`file ${existing.id} names a missing current version ${existing.current_version_id}`);
  const now = iso(change.now);
  if (existing && current) {
    if (current.sha256 === input.sha256 && !input.recordIdentical) return { result: { file: existing, version: current, created: false, skipped: true, duplicate: true, skipCode: 'DUPLICATE_FILE_VERSION' } };
    if (input.policy === 'skip') return { result: { file: existing, version: current, created: false, skipped: true, duplicate: false, skipCode: 'FILE_EXISTS' } };
  }
  checkContentLimits(limits, input.basename, input.mimeType, input.byteSize);
  // storage_bytes counts the current version of each live file; history is bounded by max_file_versions_per_file.
  const growth = input.byteSize - (current?.byte_size ?? 0);
  if (limits.max_storage_bytes !== null && growth > 0 && group.storage + change.storageDelta + growth > limits.max_storage_bytes) {
    throw new AppError('STORAGE_LIMIT_REACHED', undefined, { limit: 'max_storage_bytes', max: limits.max_storage_bytes, path: input.path });
  }
  if (!existing) {
    if (limits.max_files_per_mailbox !== null && change.currentFiles + 1 > limits.max_files_per_mailbox) {
      throw new AppError('FILE_LIMIT_REACHED', `A mailbox holds at most ${limits.max_files_per_mailbox} files.`, { limit: 'max_files_per_mailbox', max: limits.max_files_per_mailbox, path: input.path });
    }
    if (limits.max_current_files !== null && group.files + change.filesDelta + 1 > limits.max_current_files) {
      throw new AppError('FILE_LIMIT_REACHED', `The account holds at most ${limits.max_current_files} current files.`, { limit: 'max_current_files', max: limits.max_current_files, path: input.path });
    }
  } else if (limits.max_file_versions_per_file !== null && existing.version_count + 1 > limits.max_file_versions_per_file) {
    throw new AppError('FILE_VERSION_LIMIT_REACHED', undefined, { limit: 'max_file_versions_per_file', max: limits.max_file_versions_per_file, path: input.path, file_id: existing.id });
  }

  const who = actorColumns(change);
  let file: FilesTable;
  if (existing) {
    file = existing;
  } else {
    file = {
      id: newId('df'),
      mailbox_id: change.mailboxId,
      account_id: change.accountId,
      path: input.path,
      live_path: input.path,
      folder: input.folder,
      basename: input.basename,
      role: input.role ?? 'source',
      created_by_system: input.createdBySystem,
      current_version_id: null,
      version_count: 0,
      read_at: null,
      read_by_user_id: null,
      read_by_api_key_id: null,
      created_by_user_id: who.user,
      created_by_api_key_id: who.key,
      created_by_agent: who.agent,
      updated_by_user_id: who.user,
      updated_by_api_key_id: who.key,
      updated_by_agent: who.agent,
      created_at: now,
      updated_at: now,
      deleted_at: null,
    };
    change.filesDelta += 1;
  }
  const version = versionRow(change, file, {
    name: input.name?.trim() || input.basename,
    path: input.path,
    mime_type: input.mimeType,
    sha256: input.sha256,
    byte_size: input.byteSize,
    reason: input.reason ?? null,
    created_by_system: input.createdBySystem,
    deleted: 0,
  });
  const written: FilesTable = {
    ...file,
    current_version_id: version.id,
    version_count: version.version_number,
    role: input.role ?? file.role,
    updated_by_user_id: who.user,
    updated_by_api_key_id: who.key,
    updated_by_agent: who.agent,
    updated_at: now,
  };
  change.storageDelta += growth;
  change.written.push({ sha256: input.sha256, name: version.name, mime: input.mimeType, account_id: change.accountId });
  return { result: { file: written, version, created: !existing, skipped: false, duplicate: false, skipCode: null }, write: { file: written, isNew: !existing, version } };
}

/** Inserts the planned rows: new files (already pointing at their first version), then every version, then moves live files to theirs. */
async function applyWrites(change: MailboxChange, writes: PlannedWrite[]): Promise<void> {
  const trx = change.trx;
  const files = writes.filter((w) => w.isNew).map((w) => w.file);
  const versions = writes.map((w) => w.version);
  await INSERT_FILE(trx, files);
  await INSERT_VERSION(trx, versions);
  for (const w of writes) {
    if (w.isNew) continue;
    const f = w.file;
    await UPDATE_FILE.execute(trx, f.id, f.current_version_id!, f.version_count, f.role, f.updated_by_user_id, f.updated_by_api_key_id, f.updated_by_agent, f.updated_at);
  }
}

/** Records a deletion as a version and frees the path. */
export async function deleteFileVersion(change: MailboxChange, file: FilesTable, reason: string | null): Promise<FileVersionsTable> {
  const who = actorColumns(change);
  const now = iso(change.now);
  const current = file.current_version_id
    ? await change.trx.selectFrom('file_versions').selectAll().where('id', '=', file.current_version_id).executeTakeFirst()
    : undefined;
  const version = versionRow(change, file, {
    name: current?.name ?? file.basename,
    path: file.path,
    mime_type: current?.mime_type ?? 'application/octet-stream',
    sha256: null,
    byte_size: 0,
    reason,
    created_by_system: 'api',
    deleted: 1,
  });
  await change.trx.insertInto('file_versions').values(version).execute();
  await change.trx
    .updateTable('files')
    .set({ live_path: null, deleted_at: now, version_count: version.version_number, updated_at: now, updated_by_user_id: who.user, updated_by_api_key_id: who.key })
    .where('id', '=', file.id)
    .execute();
  change.filesDelta -= 1;
  change.storageDelta -= Number(current?.byte_size ?? 0);
  return version;
}
