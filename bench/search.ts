// `npm run bench:search`: search latency over a seeded corpus, index size per email, and PDF
// text-extraction throughput. In process, against the real database layer: the app boots with the
// API role only (no worker), mailboxes are made through the mailbox service, and emails and file
// texts are seeded through the store layer's own writers in batched transactions (email rows and
// SearchIndex.putEmails 1,000 at a time, see test/search-seed.ts; files, versions and putText 500
// at a time), with text drawn from a Zipf-distributed vocabulary. Then two-word queries of
// mid-frequency words run in one mailbox and across all (emails and files, and emails only), on the
// first page and at cursor depth 1,000, plus two of the most common words across all; each scenario
// RUNS times (figures: medians over runs of each run's p50 and p99, wall-clock and CPU time of this
// process: on a shared machine the CPU figure moves less with the load). Prints one JSON line.
// Env: EMAILS (20000), FILES (2000), MAILBOXES (100), QUERIES (200), RUNS (3), PDFS (20), PDF_PAGES (20),
// BENCH_DATABASE_URL (postgres://… for Postgres, in a fresh schema), BENCH_DATA_DIR (keep the
// corpus and query it again on later runs: SQLite's database file lives there; with Postgres the
// schema is kept, named in the directory's bench-seed.json, and dropped by hand), BENCH_SCRATCH.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes, createHash } from 'node:crypto';
import pg from 'pg';
import { sql } from 'kysely';
import { loadConfig } from '../src/config.ts';
import { createApp } from '../src/app.ts';
import { registerUser } from '../src/accounts/accounts.service.ts';
import { createApiKey } from '../src/auth/keys.service.ts';
import { authenticateApiKey } from '../src/auth/credential.ts';
import { createMailbox } from '../src/mailboxes/mailboxes.service.ts';
import { searchIndex } from '../src/search/search-index.ts';
import { search } from '../src/search/search.service.ts';
import { Extractor } from '../src/search/extract/extract.ts';
import type { RequestCtx } from '../src/context.ts';
import type { EmailsTable } from '../src/db/schema.ts';
import { newId } from '../src/ids.ts';
import { gitCommit, log, makeRunDir, round } from './lib.ts';
import { makePdf } from '../test/search-documents.ts';
import { emailRow, storeEmails } from '../test/search-seed.ts';

const EMAILS = Number(process.env.EMAILS ?? 20_000);
const FILES = Number(process.env.FILES ?? 2_000);
const MAILBOXES = Number(process.env.MAILBOXES ?? 100);
const QUERIES = Number(process.env.QUERIES ?? 200);
const RUNS = Number(process.env.RUNS ?? 3);
const PDFS = Number(process.env.PDFS ?? 20);
const PDF_PAGES = Number(process.env.PDF_PAGES ?? 20);
const DATABASE_URL = process.env.BENCH_DATABASE_URL;
const GOAL = { one_mailbox_p99_ms: 50, all_mailboxes_p99_ms: 150 };

// A vocabulary of pronounceable words; word i is drawn with probability ~ 1/(i+1) (Zipf).
const syllables = ['ka', 'lo', 'mi', 'ne', 'ru', 'sa', 'te', 'vo', 'zi', 'pa', 'do', 'fe', 'gu', 'ha', 'ji', 'be'];
const VOCAB = Array.from({ length: 8000 }, (_, i) => {
  let w = '';
  let n = i + 17;
  while (n > 0) {
    w += syllables[n % syllables.length];
    n = Math.floor(n / syllables.length);
  }
  return w;
});
const cumulative: number[] = [];
VOCAB.reduce((acc, _, i) => (cumulative.push(acc + 1 / (i + 1)), acc + 1 / (i + 1)), 0);
const total = cumulative.at(-1)!;
function word(): string {
  const r = Math.random() * total;
  let lo = 0;
  let hi = cumulative.length - 1;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (cumulative[mid]! < r) lo = mid + 1;
    else hi = mid;
  }
  return VOCAB[lo]!;
}
const words = (n: number) => Array.from({ length: n }, word).join(' ');

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return round(s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? 0, 2);
};

/** Wall-clock and CPU milliseconds (this process, all threads) of one call. */
async function time(fn: () => Promise<unknown>): Promise<{ wall: number; cpu: number }> {
  const c = process.cpuUsage();
  const t = performance.now();
  await fn();
  const wall = performance.now() - t;
  const u = process.cpuUsage(c);
  return { wall, cpu: (u.user + u.system) / 1000 };
}

async function main() {
  // BENCH_DATA_DIR (SQLite): a directory kept between runs; a corpus seeded there once is queried
  // again by later runs (same EMAILS, FILES, MAILBOXES) without seeding it again.
  // With Postgres the directory holds only bench-seed.json, which names the kept schema.
  const kept = process.env.BENCH_DATA_DIR ? path.resolve(process.env.BENCH_DATA_DIR) : null;
  if (kept) fs.mkdirSync(kept, { recursive: true });
  const dir = kept ?? makeRunDir('search');
  const metaFile = path.join(dir, 'bench-seed.json');
  const meta: Meta | null = kept && fs.existsSync(metaFile) ? JSON.parse(fs.readFileSync(metaFile, 'utf8')) : null;
  if (meta && (meta.emails !== EMAILS || meta.files !== FILES || meta.boxes.length !== MAILBOXES)) throw new Error(`${dir} holds another corpus (${meta.emails} emails, ${meta.files} files)`);
  const schema = DATABASE_URL ? (meta?.schema ?? `bench_search_${randomBytes(4).toString('hex')}`) : undefined;
  const env: Record<string, string> = {
    CUBBY_DATA_DIR: dir,
    CUBBY_ROLES: 'api',
    CUBBY_HTTP_PORT: '0',
    CUBBY_LOG_LEVEL: 'silent',
    CUBBY_SECRET_KEY: meta?.secret ?? randomBytes(32).toString('hex'),
    ...(DATABASE_URL ? { CUBBY_DATABASE_URL: DATABASE_URL, CUBBY_DATABASE_SCHEMA: schema! } : {}),
  };
  const app = createApp(loadConfig(env));
  const { deps } = await app.start();
  try {
    let seeded: Meta;
    if (meta) {
      seeded = meta;
      log(`reusing the corpus in ${dir}`);
    } else {
      const { user, account } = await registerUser(deps.db, { email: 'bench@example.com', password: 'a long bench password', name: 'Bench', plan: 'agency' as any }, new Date());
      await deps.db.updateTable('accounts').set({ plan: 'pilot' as any }).where('id', '=', account.id).execute();
      const key = await createApiKey(deps.db, { userId: user.id, accountId: account.id, scope: 'mailbox_admin' }, { userId: user.id, apiKeyId: null, agent: null, requestId: null }, new Date());
      seeded = { secret: env.CUBBY_SECRET_KEY!, token: key.token, userId: user.id, accountId: account.id, boxes: [], emails: EMAILS, files: FILES, seed: null, schema };
    }
    const credential = await authenticateApiKey(deps.db, seeded.token, { agent: null, client: null } as any, new Date());
    const ctx: RequestCtx = { ...deps, credential, actor: { userId: seeded.userId, apiKeyId: null, agent: null, requestId: null } };
    const account = { id: seeded.accountId };
    const boxes = seeded.boxes;
    if (!meta) {
      log(`creating ${MAILBOXES} mailboxes`);
      for (let i = 0; i < MAILBOXES; i++) boxes.push((await createMailbox(ctx, { title: `Bench ${i}`, field: 'mailbox' })).mailbox.id);
      seeded.seed = await seedCorpus(deps, account, boxes);
      if (kept) fs.writeFileSync(metaFile, JSON.stringify(seeded));
    }
    const { seedEmailsS, seedFilesS, indexSize } = seeded.seed!;


    // Mid-frequency words: common enough to match many documents, rare enough to be a real query.
    const pairs = Array.from({ length: QUERIES }, () => `${VOCAB[20 + Math.floor(Math.random() * 200)]} ${VOCAB[20 + Math.floor(Math.random() * 200)]}`);
    // Two of the most frequent words: (nearly) every email matches.
    const commonPairs = Array.from({ length: QUERIES }, () => `${VOCAB[Math.floor(Math.random() * 6)]} ${VOCAB[Math.floor(Math.random() * 6)]}`);
    const depthQueries = Math.max(5, Math.floor(QUERIES / 10));
    // Each scenario runs RUNS times over the same queries; the figures are the medians of the runs'
    // p50 and p99 (the machine is shared, so single runs vary).
    const run = async (label: string, queries: string[], input: (q: string) => Parameters<typeof search>[1], depth: number) => {
      const runs: { p50_ms: number; p99_ms: number; cpu_p50_ms: number; cpu_p99_ms: number }[] = [];
      let hits = 0;
      let timed = 0;
      for (let r = 0; r < RUNS; r++) {
        const ms: number[] = [];
        const cpu: number[] = [];
        for (const q of queries) {
          let cursor: string | undefined;
          // Walk to the requested depth first (not timed), then time the page there.
          for (let seen = 0; seen < depth; seen += 100) {
            const p = await search(ctx, { ...input(q), limit: 100, cursor });
            cursor = p.pagination.next_cursor ?? undefined;
            if (!cursor) break;
          }
          if (depth && !cursor) continue;
          const t = await time(async () => (hits += (await search(ctx, { ...input(q), cursor })).items.length));
          ms.push(t.wall);
          cpu.push(t.cpu);
        }
        timed += ms.length;
        runs.push({ p50_ms: pct(ms, 50), p99_ms: pct(ms, 99), cpu_p50_ms: pct(cpu, 50), cpu_p99_ms: pct(cpu, 99) });
        log(`${label} run ${r + 1}: ${ms.length} queries, p50 ${pct(ms, 50)} ms, p99 ${pct(ms, 99)} ms (CPU p50 ${pct(cpu, 50)} ms, p99 ${pct(cpu, 99)} ms; load ${os.loadavg()[0]!.toFixed(1)})`);
      }
      const med = (xs: number[]) => pct(xs, 50);
      return {
        queries: timed / RUNS,
        p50_ms: med(runs.map((x) => x.p50_ms)),
        p99_ms: med(runs.map((x) => x.p99_ms)),
        cpu_p50_ms: med(runs.map((x) => x.cpu_p50_ms)),
        cpu_p99_ms: med(runs.map((x) => x.cpu_p99_ms)),
        runs,
        mean_hits: round(hits / Math.max(1, timed), 1),
      };
    };
    const one = (q: string) => ({ q, mailboxId: boxes[0], kind: 'email' as const, limit: 20 });
    const all = (q: string) => ({ q, limit: 20 });
    const allEmails = (q: string) => ({ q, kind: 'email' as const, limit: 20 });
    const results = {
      one_mailbox_first_page: await run('one mailbox, first page', pairs, one, 0),
      all_mailboxes_first_page: await run('all mailboxes (emails and files), first page', pairs, all, 0),
      all_mailboxes_emails_first_page: await run('all mailboxes (emails), first page', pairs, allEmails, 0),
      // A mailbox's 1,000th match needs common words; across all, the mid-frequency pairs with
      // more than 1,000 matches (the others are skipped).
      one_mailbox_depth_1000: await run('one mailbox, depth 1000', commonPairs.slice(0, depthQueries), one, 1000),
      all_mailboxes_depth_1000: await run('all mailboxes (emails), depth 1000', pairs.slice(0, depthQueries), allEmails, 1000),
      all_mailboxes_common_words_first_page: await run('all mailboxes (emails and files), common words', commonPairs.slice(0, depthQueries), all, 0),
    };

    log(`extracting ${PDFS} PDFs of ${PDF_PAGES} pages`);
    const extractor = new Extractor({ timeoutMs: 120_000, maxMemoryMb: 256 });
    const pdfs = Array.from({ length: PDFS }, () => makePdf(...Array.from({ length: PDF_PAGES }, () => words(60))));
    await extractor.extract('pdf', makePdf('warm up'));
    const t = performance.now();
    let pages = 0;
    for (const p of pdfs) pages += (await extractor.extract('pdf', p)).pages ?? 0;
    const pdfSeconds = (performance.now() - t) / 1000;
    await extractor.close();

    const out = {
      bench: 'search',
      commit: gitCommit(),
      database: deps.dialect,
      emails: EMAILS,
      files: FILES,
      mailboxes: MAILBOXES,
      seed_emails_per_s: round(EMAILS / seedEmailsS, 0),
      seed_files_per_s: round(FILES / seedFilesS, 0),
      index_bytes_per_document: round(indexSize / (EMAILS + FILES), 0),
      ...results,
      pdf_pages_per_s: round(pages / pdfSeconds, 1),
      load_avg: os.loadavg().map((x) => round(x, 1)),
      goal: GOAL,
    };
    process.stdout.write(`${JSON.stringify(out)}\n`);
  } finally {
    await app.stop();
    // A kept schema whose seeding did not finish is dropped too (nothing names it).
    if (schema && (!kept || !fs.existsSync(metaFile))) {
      const c = new pg.Client({ connectionString: DATABASE_URL });
      await c.connect();
      await c.query(`drop schema if exists "${schema}" cascade`);
      await c.end();
    }
    if (!process.env.KEEP_RUN_DIR && !kept) fs.rmSync(dir, { recursive: true, force: true });
  }
}

interface Meta {
  secret: string;
  token: string;
  userId: string;
  accountId: string;
  boxes: string[];
  emails: number;
  files: number;
  seed: { seedEmailsS: number; seedFilesS: number; indexSize: number } | null;
  /** Postgres: the kept schema. */
  schema?: string;
}

/** Emails and files with text, in batched transactions through the store layer's writers. */
async function seedCorpus(deps: Awaited<ReturnType<ReturnType<typeof createApp>['start']>>['deps'], account: { id: string }, boxes: string[]) {
  const index = searchIndex(deps);
  const sizeBefore = await indexBytes(deps);
  log(`seeding ${EMAILS} emails`);
  const seedStart = performance.now();
  const seqs = new Map<string, number>();
  const BATCH = 1000;
  for (let i = 0; i < EMAILS; i += BATCH) {
    const rows: EmailsTable[] = [];
    for (let j = i; j < Math.min(EMAILS, i + BATCH); j++) {
      const mailbox = boxes[j % boxes.length]!;
      const seq = (seqs.get(mailbox) ?? 0) + 1;
      seqs.set(mailbox, seq);
      const at = new Date(Date.UTC(2025, 0, 1) + j * 60_000).toISOString();
      const from = `${word()}@${word()}.example`;
      rows.push(emailRow({ mailboxId: mailbox, accountId: account.id, seq, subject: words(6), body: words(80 + (j % 120)), from: { address: from, name: words(2) }, to: `inbox${j % boxes.length}@mail.localhost`, receivedAt: at }));
    }
    await storeEmails(deps.db, index, rows);
    if ((i / BATCH) % 50 === 0) log(`  ${i + rows.length} emails (${round((i + rows.length) / ((performance.now() - seedStart) / 1000), 0)}/s)`);
  }
  const seedEmailsS = (performance.now() - seedStart) / 1000;

  log(`seeding ${FILES} files with text`);
  const seedFilesStart = performance.now();
  for (let i = 0; i < FILES; i += 500) {
    const files: any[] = [];
    const versions: any[] = [];
    const texts: { sha256: string; text: string; at: string }[] = [];
    for (let j = i; j < Math.min(FILES, i + 500); j++) {
      const text = words(300);
      const sha = createHash('sha256').update(`${j}:${text}`).digest('hex');
      const fileId = newId('df');
      const versionId = newId('dfv');
      const at = new Date().toISOString();
      const mailbox = boxes[j % boxes.length]!;
      files.push({ id: fileId, mailbox_id: mailbox, account_id: account.id, path: `docs/f${j}.txt`, live_path: `docs/f${j}.txt`, folder: 'docs', basename: `f${j}.txt`, role: 'source', created_by_system: 'api', current_version_id: versionId, version_count: 1, read_at: null, read_by_user_id: null, read_by_api_key_id: null, created_by_user_id: null, created_by_api_key_id: null, created_by_agent: null, updated_by_user_id: null, updated_by_api_key_id: null, updated_by_agent: null, created_at: at, updated_at: at, deleted_at: null });
      versions.push({ id: versionId, file_id: fileId, mailbox_id: mailbox, version_number: 1, name: `f${j}.txt`, path: `docs/f${j}.txt`, mime_type: 'text/plain', sha256: sha, byte_size: text.length, reason: null, created_by_system: 'api', deleted: 0, mailbox_version_id: null, read_at: null, read_by_user_id: null, read_by_api_key_id: null, created_by_user_id: null, created_by_api_key_id: null, created_by_agent: null, created_at: at });
      texts.push({ sha256: sha, text, at });
    }
    await deps.db.transaction().execute(async (trx) => {
      for (const [table, rows] of [['files', files], ['file_versions', versions]] as const) {
        const per = Math.floor(20_000 / Object.keys(rows[0]).length);
        for (let k = 0; k < rows.length; k += per) await trx.insertInto(table).values(rows.slice(k, k + per)).execute();
      }
      for (const t of texts) await index.putText(trx, { sha256: t.sha256, status: 'done', text: t.text, pages: null, error: null, extractedAt: t.at });
    });
    if ((i / 500) % 20 === 0) log(`  ${i + files.length} files`);
  }
  const seedFilesS = (performance.now() - seedFilesStart) / 1000;
  // Planner statistics, as autovacuum (Postgres) or `pragma optimize` (SQLite) keep them on a live
  // database; without them a bulk-loaded table gets generic estimates.
  await sql`analyze`.execute(deps.db);
  const indexSize = (await indexBytes(deps)) - sizeBefore;
  return { seedEmailsS, seedFilesS, indexSize };
}

/** Bytes the search tables take (SQLite: the database file's pages; Postgres: the relations). */
async function indexBytes(deps: { db: any; dialect: string; config: { databaseUrl: string } }): Promise<number> {
  if (deps.dialect === 'postgres') {
    const r = await sql<{ n: string }>`select coalesce(sum(pg_total_relation_size(c.oid)), 0) as n from pg_class c join pg_namespace s on s.oid = c.relnamespace
      where s.nspname = current_schema() and c.relkind = 'r' and c.relname in ('email_search_docs', 'blob_texts')`.execute(deps.db);
    return Number(r.rows[0]!.n);
  }
  await sql`pragma wal_checkpoint(truncate)`.execute(deps.db);
  // Only the index: the FTS5 shadow tables and the docs table (the text itself lives in emails).
  const r = await sql<{ n: number }>`select coalesce(sum(pgsize), 0) as n from dbstat where name like 'email_fts%' or name like 'blob_text_fts%' or name like 'email_search_docs%'`.execute(deps.db).catch(() => null);
  if (r) return Number(r.rows[0]!.n);
  return fs.statSync(path.resolve(deps.config.databaseUrl.replace(/^sqlite:/, ''))).size;
}

await main();
