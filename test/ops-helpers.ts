import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import pg from 'pg';
import { expect } from 'vitest';
import { describeBytes } from './files-helpers.ts';

// For the operator tests (backup and restore, the crash sweeper): the API of a spawned `cubby serve`
// over real HTTP, an upload left unfinished, and waiting for something on disk or in the database.

export async function call(base: string, key: string, method: string, urlPath: string, body?: unknown): Promise<{ status: number; body: any; text: string }> {
  const res = await fetch(new URL(urlPath, base), {
    method,
    headers: { authorization: `Bearer ${key}`, accept: 'application/json', ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let parsed: any;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  return { status: res.status, body: parsed, text };
}

export async function createMailbox(base: string, key: string, title: string): Promise<{ id: string; address: string }> {
  const res = await call(base, key, 'POST', '/v1/mailboxes', { mailbox: { title } });
  expect(res.status, res.text).toBe(201);
  return { id: res.body.data.mailbox.id, address: res.body.data.mailbox.email.address };
}

/** The three steps of a surface R upload (declare, PUT the bytes, save at a path); returns the saved file's id. */
export async function upload(base: string, key: string, mailboxId: string, filePath: string, bytes: Buffer): Promise<string> {
  const step1 = await call(base, key, 'POST', '/v1/direct_uploads', { mailbox_id: mailboxId, path: filePath, blob: { ...describeBytes(bytes, path.basename(filePath)), purpose: 'mailbox_file' } });
  expect(step1.status, step1.text).toBe(201);
  const put = await fetch(step1.body.data.direct_upload.url, { method: 'PUT', headers: step1.body.data.direct_upload.headers, body: new Uint8Array(bytes) });
  expect(put.status, await put.clone().text()).toBe(200);
  const saved = await call(base, key, 'POST', `/v1/mailboxes/${mailboxId}/files`, { path: filePath, signed_blob_id: step1.body.data.signed_id });
  expect(saved.status, saved.text).toBe(201);
  return saved.body.data.file.id;
}

/**
 * Declares a `size`-byte upload and starts its PUT, sending only `sent` bytes: the request stays
 * open (the server is streaming it into a temp file) until the returned request is destroyed.
 */
export async function startUnfinishedUpload(base: string, key: string, mailboxId: string, filePath: string, size: number, sent: number): Promise<http.ClientRequest> {
  const bytes = Buffer.alloc(size, 7);
  const step1 = await call(base, key, 'POST', '/v1/direct_uploads', { mailbox_id: mailboxId, path: filePath, blob: { ...describeBytes(bytes, path.basename(filePath)), purpose: 'mailbox_file' } });
  expect(step1.status, step1.text).toBe(201);
  const target = step1.body.data.direct_upload as { url: string; headers: Record<string, string> };
  const req = http.request(target.url, { method: 'PUT', headers: { ...target.headers, 'content-length': String(size) } });
  req.on('error', () => {}); // the server dies under it
  req.write(bytes.subarray(0, sent));
  return req;
}

/** Polls `check` (a condition on disk or in a database, which has no event to await) until it holds. */
export async function until<T>(what: string, check: () => Promise<T | undefined | false> | T | undefined | false, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Names of the `*.part` temp files in the fs blob store. */
export function partFiles(blobDir: string): string[] {
  try {
    return fs.readdirSync(path.join(blobDir, 'tmp')).filter((n) => n.endsWith('.part'));
  } catch {
    return [];
  }
}

/** Writes a blob straight into the fs store (`<aa>/<sha256>`), as a crash between storing it and committing its row leaves one. */
export function plantBlob(blobDir: string, bytes: Buffer): { sha256: string; file: string } {
  const sha256 = createHash('sha256').update(bytes).digest('hex');
  const file = path.join(blobDir, sha256.slice(0, 2), sha256);
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, bytes);
  return { sha256, file };
}

export async function dropPostgres(opts: { schema?: string; database?: string }): Promise<void> {
  const client = new pg.Client({ connectionString: process.env.CUBBY_TEST_POSTGRES_URL });
  await client.connect();
  try {
    if (opts.schema) await client.query(`DROP SCHEMA IF EXISTS "${opts.schema}" CASCADE`);
    if (opts.database) await client.query(`DROP DATABASE IF EXISTS "${opts.database}" WITH (FORCE)`);
  } finally {
    await client.end();
  }
}

/** The test Postgres URL with another database name. */
export function postgresUrlFor(database: string): string {
  const u = new URL(process.env.CUBBY_TEST_POSTGRES_URL!);
  u.pathname = `/${database}`;
  return u.toString();
}

export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
  /** The one JSON object printed, if any. */
  json: any;
}

/** `cubby …` as a child process with exactly `env` (plus PATH/HOME); never throws. */
export function cubbyCli(env: Record<string, string>, args: string[]): Promise<CliRun> {
  const bin = path.resolve(import.meta.dirname, '../bin/cubby.js');
  const childEnv = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', CUBBY_LOG_LEVEL: 'silent', ...env };
  return new Promise((resolve) => {
    execFile(process.execPath, [bin, ...args], { env: childEnv, timeout: 120_000, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
      let json: any;
      try {
        json = JSON.parse(stdout.trim().split('\n').pop() ?? '');
      } catch {
        json = undefined;
      }
      resolve({ code, stdout, stderr, json });
    });
  });
}

/** Every file and directory under `dir` with its size (to show that a refused command changed nothing). */
export function treeOf(dir: string): string[] {
  if (!fs.existsSync(dir)) return [];
  return (fs.readdirSync(dir, { recursive: true }) as string[]).sort().map((rel) => {
    const st = fs.statSync(path.join(dir, rel));
    return st.isDirectory() ? `${rel}/` : `${rel} ${st.size} ${st.mtimeMs}`;
  });
}
