// `npm run bench:web`: server render time of the dashboard's heaviest pages: the mail list of a
// mailbox with EMAILS emails (first page, a filtered page, a deep keyset page), an email page, and
// a folder with FILES files (by name and by size). The app runs in this process (SQLite in a fresh
// dir, or Postgres with BENCH_DATABASE_URL); rows are inserted directly, then each page is fetched
// ROUNDS times over loopback with a signed-in session. Times are request → full body on loopback.
// Prints one JSON line. Env: EMAILS (100000), FILES (10000), ROUNDS (30), BENCH_DATABASE_URL.
import fs from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import { loadConfig } from '../src/config.ts';
import { createApp } from '../src/app.ts';
import { registerUser } from '../src/accounts/accounts.service.ts';
import { createApiKey } from '../src/auth/keys.service.ts';
import { newId } from '../src/ids.ts';
import type { EmailsTable, FilesTable, FileVersionsTable } from '../src/db/schema.ts';
import { gitCommit, log, makeRunDir, round } from './lib.ts';

const EMAILS = Number(process.env.EMAILS ?? 100_000);
const FILES = Number(process.env.FILES ?? 10_000);
const ROUNDS = Number(process.env.ROUNDS ?? 30);
const DATABASE_URL = process.env.BENCH_DATABASE_URL;
const GOAL_MS = 200;
const BATCH = 400;

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
};

async function main() {
  const dir = makeRunDir('web');
  const schema = DATABASE_URL ? `bench_web_${randomBytes(4).toString('hex')}` : undefined;
  const env: Record<string, string> = {
    CUBBY_DATA_DIR: dir,
    CUBBY_HTTP_PORT: '0',
    CUBBY_SMTP_PORT: '0',
    CUBBY_SITES_PORT: '0',
    CUBBY_LOG_LEVEL: 'silent',
    CUBBY_SECRET_KEY: randomBytes(32).toString('hex'),
    ...(DATABASE_URL ? { CUBBY_DATABASE_URL: DATABASE_URL, CUBBY_DATABASE_SCHEMA: schema! } : {}),
  };
  const app = createApp(loadConfig(env));
  const started = await app.start();
  const base = started.urls.http!;
  const db = started.deps.db;
  try {
    const email = `bench-${randomBytes(4).toString('hex')}@example.com`;
    const { user, account } = await registerUser(db, { email, password: 'a long bench password', name: 'Bench', plan: 'paid' }, new Date());
    const key = await createApiKey(db, { userId: user.id, accountId: account.id, scope: 'mailbox_admin' }, { userId: user.id, apiKeyId: null, agent: null, requestId: null }, new Date());
    const made = await fetch(`${base}/v1/mailboxes`, { method: 'POST', headers: { authorization: `Bearer ${key.token}`, 'content-type': 'application/json' }, body: JSON.stringify({ mailbox: { title: 'Bench' } }) });
    const mailboxId = ((await made.json()) as { data: { mailbox: { id: string } } }).data.mailbox.id;

    log(`inserting ${EMAILS} emails and ${FILES} files`);
    const t0 = Date.now();
    const start = Date.parse('2026-01-01T00:00:00Z');
    for (let i = 0; i < EMAILS; i += BATCH) {
      const rows: EmailsTable[] = [];
      for (let j = i; j < Math.min(EMAILS, i + BATCH); j++) {
        const at = new Date(start + j * 60_000).toISOString();
        const id = newId('eml');
        rows.push({
          id, mailbox_id: mailboxId, account_id: account.id, seq: j + 1, direction: 'received', conversation_id: id, thread_key: null,
          subject: `Invoice ${j}`, subject_search: `invoice ${j}`, from_addresses: JSON.stringify([{ address: `sender${j % 500}@example.com`, name: `Sender ${j % 500}` }]),
          sender_address: `sender${j % 500}@example.com`, to_addresses: '[]', cc_addresses: '[]', reply_to_addresses: '[]', message_id: null, in_reply_to: '[]', reference_ids: '[]',
          delivered_to: '[]', received_at: at, body_status: 'complete', body_text: `Hello, this is message ${j}. `.repeat(20), attachment_count: j % 7 === 0 ? 1 : 0,
          omitted_attachment_count: 0, attachments: '[]', size_bytes: 2000, raw_sha256: null, directory: null, raw_file_id: null, raw_version_id: null, json_file_id: null,
          mail_from: null, client_ip: null, helo: null, auth_results: null, spam_flags: null, labeling: 'done', label: j % 11 === 0 ? 'Receipts' : null, labeled_at: at,
          read_at: j % 3 === 0 ? null : at, read_by_user_id: null, read_by_api_key_id: null, delivery: null, created_at: at,
        });
      }
      await db.insertInto('emails').values(rows).execute();
    }
    await db.updateTable('mailboxes').set({ email_seq: EMAILS, message_count: EMAILS, unread_count: Math.ceil(EMAILS / 3) }).where('id', '=', mailboxId).execute();
    for (let i = 0; i < FILES; i += BATCH) {
      const files: FilesTable[] = [];
      const versions: FileVersionsTable[] = [];
      for (let j = i; j < Math.min(FILES, i + BATCH); j++) {
        const at = new Date(start + j * 1000).toISOString();
        const fid = newId('df');
        const vid = newId('dfv');
        const p = `docs/file-${String(j).padStart(5, '0')}.txt`;
        files.push({
          id: fid, mailbox_id: mailboxId, account_id: account.id, path: p, live_path: p, folder: 'docs', basename: p.slice(5), role: 'source', created_by_system: 'api',
          current_version_id: vid, version_count: 1, read_at: null, read_by_user_id: null, read_by_api_key_id: null, created_by_user_id: null, created_by_api_key_id: null,
          created_by_agent: null, updated_by_user_id: null, updated_by_api_key_id: null, updated_by_agent: null, created_at: at, updated_at: at,
        } as FilesTable);
        versions.push({
          id: vid, file_id: fid, mailbox_id: mailboxId, version_number: 1, name: p.slice(5), path: p, mime_type: 'text/plain', sha256: null, byte_size: (j * 37) % 100_000,
          reason: null, created_by_system: 'api', deleted: 0, mailbox_version_id: null, read_at: null, read_by_user_id: null, read_by_api_key_id: null,
          created_by_user_id: null, created_by_api_key_id: null, created_by_agent: null, created_at: at,
        });
      }
      await db.insertInto('files').values(files).execute();
      await db.insertInto('file_versions').values(versions).execute();
    }
    // Planner statistics as a running database has them (autovacuum would analyze these tables soon).
    if (DATABASE_URL) for (const t of ["emails", "files", "file_versions"]) await sql`analyze ${sql.table(t)}`.execute(db);
    const seedSeconds = round((Date.now() - t0) / 1000);
    log(`seeded in ${seedSeconds} s`);

    // Sign in like a browser: the form's CSRF token and cookie, then the session cookie.
    const form = await fetch(`${base}/users/sign_in`);
    const csrfCookie = form.headers.getSetCookie().map((c) => c.split(';')[0]).join('; ');
    const token = (await form.text()).match(/name="_csrf" value="([^"]+)"/)![1]!;
    const signed = await fetch(`${base}/users/sign_in`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: csrfCookie },
      body: new URLSearchParams({ _csrf: token, email, password: 'a long bench password' }).toString(),
    });
    const cookie = [csrfCookie, ...signed.headers.getSetCookie().map((c) => c.split(';')[0])].join('; ');

    const someEmail = await db.selectFrom('emails').select('id').where('mailbox_id', '=', mailboxId).where('seq', '=', Math.floor(EMAILS / 2)).executeTakeFirstOrThrow();
    const pages: Record<string, string> = {
      mail_first_page: `/mailboxes/${mailboxId}`,
      mail_unread_filter: `/mailboxes/${mailboxId}?unread=1`,
      mail_label_filter: `/mailboxes/${mailboxId}?label=Receipts`,
      mail_deep_page: `/mailboxes/${mailboxId}?before=${Math.floor(EMAILS / 10)}`,
      email_page: `/mailboxes/${mailboxId}/emails/${someEmail.id}`,
      home: '/',
      folder_by_name: `/mailboxes/${mailboxId}/files?path=docs`,
      folder_by_size: `/mailboxes/${mailboxId}/files?path=docs&sort=size&dir=desc`,
      files_top: `/mailboxes/${mailboxId}/files`,
    };
    // Walk the whole folder by its Next links (every file exactly once), and keep a deep page of
    // each sort to time below like the first ones.
    const walks: Record<string, { pages: number; files: number; total_ms: number }> = {};
    for (const [name, first] of [['folder_walk_by_name', pages.folder_by_name!], ['folder_walk_by_size', pages.folder_by_size!]] as const) {
      const seen = new Set<string>();
      let url: string | undefined = first;
      let count = 0;
      const t = performance.now();
      while (url) {
        const res: Response = await fetch(`${base}${url}`, { headers: { cookie } });
        const body: string = await res.text();
        if (res.status !== 200) throw new Error(`${url}: ${res.status}`);
        for (const m of body.matchAll(/href="\/mailboxes\/bkt_\w+\/files\/(df_\w+)"/g)) seen.add(m[1]!);
        count++;
        if (count === Math.ceil(FILES / 1000)) pages[name.replace('walk', 'deep')] = url;
        url = body.match(/<a href="([^"]+)" rel="next">/)?.[1]?.replace(/&amp;/g, '&');
      }
      if (seen.size !== FILES) throw new Error(`${name}: saw ${seen.size} of ${FILES} files`);
      walks[name] = { pages: count, files: seen.size, total_ms: round(performance.now() - t) };
      log(`${name}: ${count} pages, ${seen.size} files, ${walks[name].total_ms} ms`);
    }
    const results: Record<string, { p50_ms: number; p95_ms: number; max_ms: number; bytes: number }> = {};
    for (const [name, url] of Object.entries(pages)) {
      const times: number[] = [];
      let bytes = 0;
      for (let r = 0; r < ROUNDS + 3; r++) {
        const t = performance.now();
        const res = await fetch(`${base}${url}`, { headers: { cookie } });
        const body = await res.text();
        if (res.status !== 200) throw new Error(`${url}: ${res.status} ${body.slice(0, 300)}`);
        if (r >= 3) times.push(performance.now() - t);
        bytes = body.length;
      }
      results[name] = { p50_ms: round(pct(times, 50)), p95_ms: round(pct(times, 95)), max_ms: round(Math.max(...times)), bytes };
      log(`${name}: p50 ${results[name].p50_ms} ms, p95 ${results[name].p95_ms} ms`);
    }
    const worst = Math.max(...Object.values(results).map((r) => r.p95_ms));
    console.log(
      JSON.stringify({
        bench: 'web',
        commit: gitCommit(),
        database: DATABASE_URL ? 'postgres' : 'sqlite',
        emails: EMAILS,
        files: FILES,
        rounds: ROUNDS,
        seed_seconds: seedSeconds,
        pages: results,
        walks,
        goal_ms: GOAL_MS,
        worst_p95_ms: worst,
        ok: worst < GOAL_MS,
      }),
    );
  } finally {
    await app.stop();
    if (!process.env.KEEP_RUN_DIR) fs.rmSync(path.resolve(dir), { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
