import { createHash } from 'node:crypto';
import { expect } from 'vitest';

// What a stored email must look like from the outside, shared by the hostile-corpus and crash
// tests: its files listed and downloaded through the files API (surface R) of a running server,
// and the rules every path under `_email/` keeps.

export interface ApiFile {
  id: string;
  path: string;
  basename: string;
  current_file_version: { sha256: string; byte_size: number } | null;
}

export const BODY_STATUSES = ['complete', 'empty', 'truncated', 'unavailable', 'withheld'];

/** Control (C0, DEL, C1), zero-width and bidirectional characters, and backslashes: never in a stored path. */
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff\\]/;

export function sha256(b: Buffer): string {
  return createHash('sha256').update(b).digest('hex');
}

/** `_email/yyyy/mm/dd/<id>` for a row received at `receivedAt` (UTC date). */
export function emailDir(receivedAt: string, id: string): string {
  return `_email/${receivedAt.slice(0, 10).replaceAll('-', '/')}/${id}`;
}

async function api(base: string, key: string, path: string, query: Record<string, string | number> = {}): Promise<any> {
  const url = new URL(path, base);
  for (const [k, v] of Object.entries(query)) url.searchParams.set(k, String(v));
  const res = await fetch(url, { headers: { authorization: `Bearer ${key}`, accept: 'application/json' } });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`GET ${url.pathname}: ${res.status} ${text.slice(0, 500)}`);
  return JSON.parse(text).data;
}

/** Every live file of a mailbox matching `query` (folder, q), all pages. */
export async function listFiles(base: string, key: string, mailboxId: string, query: Record<string, string> = {}): Promise<ApiFile[]> {
  const out: ApiFile[] = [];
  let cursor: string | undefined;
  do {
    const data = await api(base, key, `/v1/mailboxes/${mailboxId}/files`, { ...query, limit: 100, ...(cursor ? { cursor } : {}) });
    out.push(...data.files);
    cursor = data.pagination.has_more ? data.pagination.next_cursor : undefined;
  } while (cursor);
  return out;
}

/** The current bytes of a file through its download link. */
export async function downloadFile(base: string, key: string, mailboxId: string, fileId: string): Promise<Buffer> {
  const data = await api(base, key, `/v1/mailboxes/${mailboxId}/files/${fileId}/download`);
  const res = await fetch(data.download.url);
  if (res.status !== 200) throw new Error(`download ${fileId}: ${res.status}`);
  return Buffer.from(await res.arrayBuffer());
}

/** A path of an email's file: inside its folder, `message.eml`, `message.json` or `attachments/<one safe name>`. */
export function assertSafeEmailPath(path: string, dir: string): void {
  expect(path.startsWith(`${dir}/`), `${JSON.stringify(path)} is outside ${dir}/`).toBe(true);
  expect(UNSAFE.test(path), `${JSON.stringify(path)} has unsafe characters`).toBe(false);
  expect(path.includes('..'), `${JSON.stringify(path)} contains ..`).toBe(false);
  const rest = path.slice(dir.length + 1).split('/');
  if (rest.length === 1) expect(['message.eml', 'message.json']).toContain(rest[0]);
  else {
    expect(rest, JSON.stringify(path)).toHaveLength(2);
    expect(rest[0]).toBe('attachments');
    const name = rest[1]!;
    expect(name.length > 0 && name === name.trim() && !name.startsWith('.'), JSON.stringify(path)).toBe(true);
    expect(Buffer.byteLength(name)).toBeLessThanOrEqual(255);
  }
}
