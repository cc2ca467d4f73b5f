import { createHash } from 'node:crypto';
import { expect } from 'vitest';
import type { TestApp, TestResponse } from './harness.ts';
import { dbOf } from './factories.ts';
import { newId } from '../src/ids.ts';
import { iso } from '../src/time.ts';

// Batch-upload steps as a client performs them, on either surface.

export type Surface = 'R' | 'A';

export function descriptor(path: string, content: string, extra: Record<string, unknown> = {}) {
  const bytes = Buffer.from(content);
  return {
    path,
    byte_size: bytes.length,
    content_type: 'text/plain',
    checksum: createHash('md5').update(bytes).digest('base64'),
    sha256: createHash('sha256').update(bytes).digest('hex'),
    ...extra,
  };
}

/** The session endpoints of one mailbox on one surface. */
export function sessionsOf(app: TestApp, surface: Surface, key: string, mailboxId: string) {
  const base = surface === 'R' ? `/v1/mailboxes/${mailboxId}/upload_sessions` : `/api/v1/buckets/${mailboxId}/upload_sessions`;
  const post = (path: string, body: unknown) => app.request('POST', `${base}${path}`, { key, body });
  /** The response data and the session record, whatever the surface. */
  const data = (res: TestResponse) => {
    const d = res.body.data;
    return { ...d, session: surface === 'R' ? d.mailbox_upload_session : d.upload_session };
  };
  return {
    data,
    create: (body: Record<string, unknown> = {}) => post('', body),
    uploads: (id: string, files: unknown[]) => post(`/${id}/uploads`, { files }),
    batch: (id: string, limit?: number) => post(`/${id}/finalize_batch`, limit === undefined ? {} : { limit }),
    finalize: (id: string, complete?: boolean) => post(`/${id}/finalize`, complete === undefined ? {} : { complete }),
  };
}

/** PUTs bytes with exactly the returned headers. */
export async function putBytes(upload: { url: string; headers: Record<string, string> }, content: string) {
  const res = await fetch(upload.url, { method: 'PUT', headers: upload.headers, body: new Uint8Array(Buffer.from(content)) });
  expect(res.status, await res.clone().text()).toBe(200);
}

/** Runs `fn` over items with at most `n` at a time. */
export async function inParallel<T>(items: T[], n: number, fn: (item: T) => Promise<void>) {
  let next = 0;
  await Promise.all(Array.from({ length: n }, async () => {
    while (next < items.length) await fn(items[next++]!);
  }));
}

export async function mailboxOf(app: TestApp, key: string, id: string) {
  const res = await app.request('GET', `/v1/mailboxes/${id}`, { key });
  expect(res.status, res.text).toBe(200);
  return res.body.data.mailbox;
}

export async function filePaths(app: TestApp, key: string, id: string): Promise<string[]> {
  const res = await app.request('GET', `/v1/mailboxes/${id}/files`, { key, query: { limit: 100 } });
  expect(res.status, res.text).toBe(200);
  return res.body.data.files.map((f: any) => f.path).sort();
}

export async function versionRows(app: TestApp, mailboxId: string) {
  return dbOf(app).selectFrom('mailbox_versions').selectAll().where('mailbox_id', '=', mailboxId).orderBy('version_number').execute();
}

/** A received-email file, as the inbound feature writes it (the API refuses writes under _email/). */
export async function insertEmailFile(app: TestApp, mailboxId: string, accountId: string, path = '_email/2026/01/msg/message.json') {
  const db = dbOf(app);
  const now = iso();
  const fileId = newId('df');
  const versionId = newId('dfv');
  const actor = { created_by_user_id: null, created_by_api_key_id: null, created_by_agent: null };
  await db
    .insertInto('files')
    .values({ id: fileId, mailbox_id: mailboxId, account_id: accountId, path, live_path: path, folder: path.split('/').slice(0, -1).join('/'), basename: path.split('/').pop()!, role: 'source', created_by_system: 'email', current_version_id: versionId, version_count: 1, read_at: null, read_by_user_id: null, read_by_api_key_id: null, ...actor, updated_by_user_id: null, updated_by_api_key_id: null, updated_by_agent: null, created_at: now, updated_at: now, deleted_at: null })
    .execute();
  await db
    .insertInto('file_versions')
    .values({ id: versionId, file_id: fileId, mailbox_id: mailboxId, version_number: 1, name: 'message.json', path, mime_type: 'application/json', sha256: 'a'.repeat(64), byte_size: 2, reason: null, created_by_system: 'email', deleted: 0, mailbox_version_id: null, read_at: null, read_by_user_id: null, read_by_api_key_id: null, ...actor, created_at: now })
    .execute();
  await db.updateTable('mailboxes').set((eb) => ({ files_count: eb('files_count', '+', 1), storage_bytes: eb('storage_bytes', '+', 2) })).where('id', '=', mailboxId).execute();
}
