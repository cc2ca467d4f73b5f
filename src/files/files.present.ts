import { shasWithText } from '../search/documents.ts';
import type { Kysely } from 'kysely';
import type { DB, FilesTable, FileVersionsTable } from '../db/schema.ts';
import { recentReasons, versionsById } from './files.repo.ts';

/** People and keys named by files and versions, fetched once per response. */
export interface Actors {
  users: Map<string, { id: string; name: string; email: string }>;
  keys: Map<string, { id: string; label: string | null; token_type: string }>;
  /** Contents whose text was extracted for search (has_text). */
  texts?: Set<string>;
}

export async function loadActors(db: Kysely<DB>, rows: { userIds: (string | null)[]; keyIds: (string | null)[] }): Promise<Actors> {
  const userIds = [...new Set(rows.userIds.filter((x): x is string => !!x))];
  const keyIds = [...new Set(rows.keyIds.filter((x): x is string => !!x))];
  const [users, keys] = await Promise.all([
    userIds.length ? db.selectFrom('users').select(['id', 'name', 'email']).where('id', 'in', userIds).execute() : [],
    keyIds.length ? db.selectFrom('api_keys').select(['id', 'label', 'token_type']).where('id', 'in', keyIds).execute() : [],
  ]);
  return { users: new Map(users.map((u) => [u.id, u])), keys: new Map(keys.map((k) => [k.id, k])) };
}

const agentOf = (json: string | null) => (json ? (JSON.parse(json) as { name: string }) : null);

function readFields(row: { read_at: string | null; read_by_user_id: string | null; read_by_api_key_id: string | null }, a: Actors) {
  return {
    read: row.read_at !== null,
    read_at: row.read_at,
    read_by: row.read_by_user_id ? (a.users.get(row.read_by_user_id) ?? null) : null,
    read_by_api_key: row.read_by_api_key_id ? (a.keys.get(row.read_by_api_key_id) ?? null) : null,
  };
}

export function presentVersion(v: FileVersionsTable, a: Actors) {
  const by = v.created_by_user_id ? (a.users.get(v.created_by_user_id) ?? null) : null;
  const key = v.created_by_api_key_id ? (a.keys.get(v.created_by_api_key_id) ?? null) : null;
  return {
    id: v.id,
    file_id: v.file_id,
    name: v.name,
    path: v.path,
    mime_type: v.mime_type,
    sha256: v.sha256,
    reason: v.reason,
    created_by_system: v.created_by_system,
    deleted: v.deleted === 1,
    ready: true,
    has_text: v.deleted === 0 && ((v.sha256 !== null && a.texts?.has(v.sha256) === true) || /^(text\/|application\/(json|xml|yaml|javascript))/.test(v.mime_type)),
    version_number: v.version_number,
    byte_size: Number(v.byte_size),
    mailbox_version_id: v.mailbox_version_id,
    created_at: v.created_at,
    created_by: by,
    updated_by: by,
    created_by_agent: agentOf(v.created_by_agent),
    updated_by_agent: agentOf(v.created_by_agent),
    created_by_api_key: key,
    updated_by_api_key: key,
    ...readFields(v, a),
  };
}

export function presentFile(f: FilesTable, current: FileVersionsTable | undefined, reasons: FileVersionsTable[], a: Actors) {
  return {
    id: f.id,
    mailbox_id: f.mailbox_id,
    basename: f.basename,
    path: f.path,
    role: f.role,
    created_by_system: f.created_by_system,
    deleted: f.deleted_at !== null,
    version_reasons: reasons.map((r) => ({ version_id: r.id, reason: r.reason, created_by_id: r.created_by_user_id, version_number: r.version_number, created_at: r.created_at })),
    lock: { locked: false },
    current_file_version: current ? presentVersion(current, a) : null,
    created_by: f.created_by_user_id ? (a.users.get(f.created_by_user_id) ?? null) : null,
    created_at: f.created_at,
    updated_at: f.updated_at,
    deleted_at: f.deleted_at,
    created_by_agent: agentOf(f.created_by_agent),
    updated_by_agent: agentOf(f.updated_by_agent),
    created_by_api_key: f.created_by_api_key_id ? (a.keys.get(f.created_by_api_key_id) ?? null) : null,
    updated_by_api_key: f.updated_by_api_key_id ? (a.keys.get(f.updated_by_api_key_id) ?? null) : null,
    ...readFields(f, a),
  };
}

/** Presents many files with one query per related table. */
export async function presentFiles(db: Kysely<DB>, files: FilesTable[]) {
  const versions = await versionsById(db, files.map((f) => f.current_version_id));
  const reasons = await recentReasons(db, files.map((f) => f.id));
  const all = [...versions.values()];
  const actors = await loadActors(db, {
    userIds: [...files.flatMap((f) => [f.created_by_user_id, f.read_by_user_id]), ...all.flatMap((v) => [v.created_by_user_id, v.read_by_user_id])],
    keyIds: [...files.flatMap((f) => [f.created_by_api_key_id, f.updated_by_api_key_id, f.read_by_api_key_id]), ...all.flatMap((v) => [v.created_by_api_key_id, v.read_by_api_key_id])],
  });
  actors.texts = await shasWithText(db, all.map((v) => v.sha256));
  return files.map((f) => presentFile(f, f.current_version_id ? versions.get(f.current_version_id) : undefined, reasons.get(f.id) ?? [], actors));
}

export async function presentOneFile(db: Kysely<DB>, file: FilesTable) {
  return (await presentFiles(db, [file]))[0]!;
}

export async function presentVersions(db: Kysely<DB>, versions: FileVersionsTable[]) {
  const actors = await loadActors(db, { userIds: versions.flatMap((v) => [v.created_by_user_id, v.read_by_user_id]), keyIds: versions.flatMap((v) => [v.created_by_api_key_id, v.read_by_api_key_id]) });
  actors.texts = await shasWithText(db, versions.map((v) => v.sha256));
  return versions.map((v) => presentVersion(v, actors));
}
