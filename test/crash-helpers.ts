import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'vitest';
import type { Kysely } from 'kysely';
import type { DB, EmailsTable } from '../src/db/schema.ts';
import { LABEL_EMAIL_TASK } from '../src/labels/task.ts';
import { usagePeriod } from '../src/inbound/usage.ts';
import { noise } from './fixtures/hostile.ts';

// For the crash test: `cubby serve` as a child process that can be killed with SIGKILL, messages
// whose bytes are known, and the database-level checks that nothing half-stored exists.

const BIN = fileURLToPath(new URL('../bin/cubby.js', import.meta.url));

export interface ServeChild {
  pid: number;
  /** http://127.0.0.1:PORT */
  base: string;
  smtpPort: number;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** SIGKILL, now; resolves once the process is gone. */
  kill9(): Promise<void>;
  /** SIGTERM (a clean stop), then SIGKILL if it lingers. */
  stop(): Promise<void>;
}

/** Starts `cubby serve` and resolves once it has printed both its API and its SMTP address. */
export async function spawnServe(env: Record<string, string>, timeoutMs = 60_000): Promise<ServeChild> {
  // The test runner's own CUBBY_* settings must not leak into the server.
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('CUBBY_')));
  const child = spawn(process.execPath, [BIN, 'serve'], { env: { ...base, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out = (out + d.toString()).slice(-20_000)));
  child.stderr.on('data', (d: Buffer) => (err = (err + d.toString()).slice(-20_000)));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  const { http, smtp } = await new Promise<{ http: string; smtp: number }>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`cubby serve did not start in time:\n${out}\n${err}`)), timeoutMs);
    const check = () => {
      const h = /API \(R\):\s+(http:\/\/[^\s/]+)\/v1/.exec(out);
      const s = /SMTP:\s+smtp:\/\/[^\s]+:(\d+)/.exec(out);
      if (h && s) {
        clearTimeout(timer);
        child.stdout.off('data', check);
        resolve({ http: h[1]!, smtp: Number(s[1]) });
      }
    };
    child.stdout.on('data', check);
    void exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`cubby serve exited (${code ?? signal}):\n${out}\n${err}`));
    });
  });
  const gone = () => child.exitCode !== null || child.signalCode !== null;
  return {
    pid: child.pid!,
    base: http,
    smtpPort: smtp,
    exited,
    async kill9() {
      if (!gone()) child.kill('SIGKILL');
      await exited;
    },
    async stop() {
      if (gone()) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

export interface CrashMessage {
  subject: string;
  raw: Buffer;
  attachment: Buffer;
}

/** Message `n` of sender `conn`: a text part and one attachment of 2 KB, 60 KB or 400 KB, all bytes known. */
export function crashMessage(conn: number, n: number): CrashMessage {
  const subject = `crash c${conn} n${n}`;
  const attachment = noise([2_000, 60_000, 400_000][n % 3]!, conn * 100_003 + n + 1);
  const b64 = attachment.toString('base64').replace(/.{76}/g, '$&\r\n');
  const raw = Buffer.from(
    [
      'From: Crash Sender <crash@example.com>',
      'To: box@example.com',
      `Subject: ${subject}`,
      `Message-ID: <c${conn}-n${n}@crash.test>`,
      'MIME-Version: 1.0',
      'Content-Type: multipart/mixed; boundary="crash"',
      '',
      '--crash',
      'Content-Type: text/plain; charset=utf-8',
      '',
      `Body of ${subject}.`,
      '--crash',
      'Content-Type: application/octet-stream',
      'Content-Disposition: attachment; filename="data.bin"',
      'Content-Transfer-Encoding: base64',
      '',
      b64,
      '--crash--',
      '',
    ].join('\r\n'),
  );
  return { subject, raw, attachment };
}

export interface UploadedFile {
  path: string;
  bytes: Buffer;
}

/** File `n` of upload round `round`: 4 KB to 40 KB of known bytes. */
export function crashFile(round: number, n: number): UploadedFile {
  return { path: `up/r${round}/f${String(n).padStart(4, '0')}.bin`, bytes: noise(4_096 * (1 + (n % 10)), round * 1_000_003 + n + 7) };
}

/**
 * One upload session of `files` as a client makes it (declare, PUT with the returned headers,
 * finalize_batch, finalize), against a server that may die at any moment. The files a
 * finalize_batch answers as saved are acknowledged (`onSaved`). Resolves false once the server is
 * gone; any answer other than success fails the test.
 */
export async function uploadSessionOnce(base: string, key: string, mailboxId: string, files: UploadedFile[], onSaved: (files: UploadedFile[]) => void): Promise<boolean> {
  const root = `${base}/v1/mailboxes/${mailboxId}/upload_sessions`;
  const call = async (method: string, url: string, body?: unknown, headers: Record<string, string> = {}) => {
    const res = await fetch(url, {
      method,
      headers: { authorization: `Bearer ${key}`, accept: 'application/json', ...(body instanceof Buffer ? headers : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : body instanceof Buffer ? new Uint8Array(body) : JSON.stringify(body),
    });
    const text = await res.text();
    expect(res.status, `${method} ${url}: ${text.slice(0, 300)}`).toBeLessThan(300);
    return text ? JSON.parse(text) : null;
  };
  try {
    const session = (await call('POST', root, {})).data.mailbox_upload_session;
    const descriptors = files.map((f) => ({
      path: f.path,
      byte_size: f.bytes.length,
      content_type: 'application/octet-stream',
      checksum: createHash('md5').update(f.bytes).digest('base64'),
      sha256: createHash('sha256').update(f.bytes).digest('hex'),
    }));
    const declared = (await call('POST', `${root}/${session.id}/uploads`, { files: descriptors })).data.uploads as { input_index: number; upload: { url: string; headers: Record<string, string> } }[];
    await Promise.all(
      declared.map(async (u) => {
        const res = await fetch(u.upload.url, { method: 'PUT', headers: u.upload.headers, body: new Uint8Array(files[u.input_index]!.bytes) });
        expect(res.status, await res.text()).toBe(200);
      }),
    );
    const batch = (await call('POST', `${root}/${session.id}/finalize_batch`, { limit: files.length })).data;
    const saved = new Set((batch.uploaded as { path: string }[]).map((x) => x.path));
    expect(saved.size).toBe(files.length);
    onSaved(files.filter((f) => saved.has(f.path)));
    await call('POST', `${root}/${session.id}/finalize`, { complete: true });
    return true;
  } catch (err) {
    // fetch fails (a TypeError) when the connection is refused or dies with the server.
    if (err instanceof TypeError) return false;
    throw err;
  }
}

/**
 * The stored state of one mailbox is whole: every email row has exactly its files (message.eml,
 * message.json, its attachments) with their blobs on disk or kept in their rows, whole, no `_email/` file lacks a row, the
 * counters, monthly usage and events count each email exactly once, and labeling is queued.
 */
export async function assertWholeMailbox(db: Kysely<DB>, mailboxId: string, blobDir: string | null): Promise<EmailsTable[]> {
  const rows = await db.selectFrom('emails').selectAll().where('mailbox_id', '=', mailboxId).orderBy('seq').execute();
  const files = await db
    .selectFrom('files')
    .innerJoin('file_versions', 'file_versions.id', 'files.current_version_id')
    .leftJoin('blobs', 'blobs.sha256', 'file_versions.sha256')
    .select(['files.id', 'files.path', 'file_versions.sha256', 'file_versions.byte_size', 'blobs.inline_bytes'])
    .where('files.mailbox_id', '=', mailboxId)
    .where('files.deleted_at', 'is', null)
    .execute();
  const byDir = new Map(rows.map((r) => [r.directory, r]));
  const perEmail = new Map<string, string[]>();
  for (const f of files) {
    const dir = /^(_email\/\d{4}\/\d{2}\/\d{2}\/eml_[A-Za-z0-9]+)\//.exec(f.path)?.[1];
    const row = dir ? byDir.get(dir) : undefined;
    expect(row, `file without an email row: ${f.path}`).toBeDefined();
    perEmail.set(row!.id, [...(perEmail.get(row!.id) ?? []), f.path.slice(dir!.length + 1)]);
    if (f.inline_bytes) expect(createHash('sha256').update(f.inline_bytes).digest('hex'), `bytes kept for ${f.path}`).toBe(f.sha256);
    else if (blobDir) expect(fs.statSync(path.join(blobDir, f.sha256!.slice(0, 2), f.sha256!)).size, `blob of ${f.path}`).toBe(Number(f.byte_size));
  }
  for (const r of rows) {
    const names = (perEmail.get(r.id) ?? []).sort();
    expect(names.filter((n) => !n.startsWith('attachments/')), `files of ${r.id}`).toEqual(['message.eml', 'message.json']);
    expect(names.length, `files of ${r.id}`).toBe(2 + r.attachment_count);
    expect(r.seq).toBe(rows.indexOf(r) + 1);
  }
  const mailbox = await db.selectFrom('mailboxes').selectAll().where('id', '=', mailboxId).executeTakeFirstOrThrow();
  expect({ message_count: Number(mailbox.message_count), unread_count: Number(mailbox.unread_count), email_seq: Number(mailbox.email_seq) }).toEqual({ message_count: rows.length, unread_count: rows.length, email_seq: rows.length });
  expect({ files: Number(mailbox.files_count), bytes: Number(mailbox.storage_bytes) }).toEqual({ files: files.length, bytes: files.reduce((s, f) => s + Number(f.byte_size), 0) });
  const periods = new Set(rows.map((r) => usagePeriod(new Date(r.received_at))));
  const usage = await db.selectFrom('received_usage').select(['count', 'bytes']).where('scope_id', '=', mailboxId).where('period', 'in', [...periods, '-']).execute();
  expect({ count: usage.reduce((s, u) => s + Number(u.count), 0), bytes: usage.reduce((s, u) => s + Number(u.bytes), 0) }).toEqual({ count: rows.length, bytes: rows.reduce((s, r) => s + Number(r.size_bytes), 0) });
  // The labeling outbox: while any email is pending, a labeling job is queued for it (one per
  // email or one for all pending: the shape is the labeler's business). After a worker run, the
  // files API lists every email's files, which it does only for labeled ones.
  if (rows.some((r) => r.labeling === 'pending')) {
    const queued = await db.selectFrom('jobs').select('id').where('task', '=', LABEL_EMAIL_TASK).where('status', 'in', ['queued', 'running']).execute();
    expect(queued.length, 'emails pending labeling but no labeling job queued').toBeGreaterThan(0);
  }
  const events = await db.selectFrom('events').select('id').where('mailbox_id', '=', mailboxId).where('type', '=', 'email.received').execute();
  expect(events.length).toBe(rows.length);
  return rows;
}
