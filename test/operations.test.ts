import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../src/config.ts';
import { ERROR_CATALOGUE } from '../src/errors.ts';
import { createLogger } from '../src/logger.ts';
import { DATABASES, startTestApp, type TestApp, type TestUser } from './harness.ts';
import { LogCollector } from './log-collector.ts';
import { mailboxWithAddress, sendMail, smtpDialogue } from './smtp-helpers.ts';
import { siteFetch } from './sites-helpers.ts';
import { makeCert, Receiver, receiverDns, setWebhook, type TestCert } from './webhook-receiver.ts';
import { fsStoreRoot } from './blob-helpers.ts';

// What an operator sees: the log lines, /healthz, /readyz, /metrics, the error docs page, and
// the modes of the files the service writes.

for (const kind of DATABASES) {
  describe(`operations [${kind}]`, () => {
    let app: TestApp;
    let user: TestUser;
    let cert: TestCert;
    const logs = new LogCollector();
    let hooks: Receiver;

    beforeAll(async () => {
      cert = await makeCert();
      hooks = new Receiver(cert);
      await hooks.start();
      app = await startTestApp(
        kind,
        { CUBBY_LOG_LEVEL: 'info', CUBBY_WEBHOOK_ALLOW_PRIVATE: 'true', CUBBY_WEBHOOK_CA_FILE: cert.certFile },
        { resolver: receiverDns(), logDestination: logs },
      );
      user = await app.user();
    });
    afterAll(async () => {
      await app?.stop();
      await hooks?.stop();
      if (cert) fs.rmSync(cert.dir, { recursive: true, force: true });
    });

    it('logs one JSON line per HTTP request: method, route pattern, status, ms, request id, account id; no key, no query', async () => {
      const secret = 'hunter2-query-secret-value';
      const res = await app.request('GET', '/v1/mailboxes', { key: user.key, query: { limit: 5, token: secret } });
      expect([200, 422]).toContain(res.status);
      const requestId = res.headers.get('x-request-id')!;
      const line = await logs.next((l) => l.http?.request_id === requestId);
      expect(line).toMatchObject({ level: 30, msg: 'request', http: { method: 'GET', route: '/v1/mailboxes', status: res.status, request_id: requestId, account_id: user.accountId } });
      expect(line.http.ms).toBeTypeOf('number');
      expect(logs.text).not.toContain(secret);
      expect(logs.text).not.toContain(user.key);
    });

    it('puts the request id of every error body in the log line, with the error code', async () => {
      const res = await app.request('GET', '/v1/mailboxes/mbx_doesnotexist00000000000', { key: user.key });
      expect(res.status).toBe(404);
      const line = await logs.next((l) => l.http?.request_id === res.body.error.request_id);
      expect(line.http).toMatchObject({ status: 404, route: '/v1/mailboxes/:mailbox_id', error_code: res.body.error.code });
      // An unauthenticated request and an unknown route are logged too (no account, one route label).
      const anon = await app.request('GET', '/v1/mailboxes');
      const unknown = await app.request('GET', '/no/such/route?secret=abc123xyz');
      expect((await logs.next((l) => l.http?.request_id === anon.body.error.request_id)).http).toMatchObject({ status: 401, account_id: null, error_code: 'UNAUTHENTICATED' });
      expect((await logs.next((l) => l.http?.request_id === unknown.headers.get('x-request-id'))).http).toMatchObject({ status: 404, route: 'unmatched' });
      expect(logs.text).not.toContain('abc123xyz');
      // An error Fastify raises before routing (a broken percent-encoding) is logged with its id too.
      const broken = await app.request('GET', '/v1/mailboxes/%E0%A4%A');
      expect(broken.status).toBe(404);
      expect((await logs.next((l) => l.http?.request_id === broken.body.error.request_id)).http).toMatchObject({ status: 404, error_code: 'NOT_FOUND' });
      // The sites listener logs its requests the same way, naming the site, not the path.
      const site = await siteFetch(`${app.started.urls.sites!.replace('//', '//nosuchsite.')}/private/path?code=xyz987secret`);
      expect(site.status).toBe(404);
      expect((await logs.next((l) => l.http?.route === 'site')).http).toMatchObject({ method: 'GET', site: 'nosuchsite', status: 404, ms: expect.any(Number) });
      expect(logs.text).not.toContain('xyz987secret');
    });

    it('logs one line per SMTP transaction (envelope, size, ids, SPF/DKIM/DMARC, reply) and one per job run and webhook attempt', async () => {
      const box = await mailboxWithAddress(app, user);
      hooks.secret = (await setWebhook(app, user.key, box.id, hooks.url())).signing_secret;
      const sent = await sendMail(app, { from: 'alice@example.org', to: box.address, subject: 'Logged' });
      expect(sent.emailIds).toHaveLength(1);
      const line = await logs.next((l) => l.smtp?.email_ids?.includes(sent.emailIds[0]));
      expect(line).toMatchObject({
        msg: 'smtp transaction',
        smtp: { client_ip: expect.stringMatching(/127\.0\.0\.1$/), mail_from: 'alice@example.org', recipients: [box.address], reply: 250, outcome: 'accepted', spf: expect.any(String), dkim: 'none', dmarc: expect.any(String) },
      });
      expect(line.smtp.helo).toBeTruthy();
      expect(line.smtp.size).toBeGreaterThan(100);

      // A refused recipient: a transaction of its own, with the final reply code.
      const replies = await smtpDialogue(app, ['EHLO refused.example', 'MAIL FROM:<bob@example.org>', 'RCPT TO:<nobody-here@mail.localhost>', 'QUIT']);
      expect(replies[3]).toMatch(/^550 5\.1\.1 /); // replies[0] is the greeting
      const refused = await logs.next((l) => l.smtp?.mail_from === 'bob@example.org');
      expect(refused.smtp).toMatchObject({ helo: 'refused.example', recipients: [], refused: [{ address: 'nobody-here@mail.localhost', code: 550 }], reply: 550, outcome: 'refused', email_ids: [] });

      const attempt = await logs.next((l) => l.webhook?.mailbox === box.id);
      expect(attempt).toMatchObject({ msg: 'webhook attempt', webhook: { attempt: 1, status: 204, outcome: 'succeeded' } });
      expect(attempt.webhook.ms).toBeTypeOf('number');
      expect(logs.text).not.toContain(hooks.url());
      const job = await logs.next((l) => l.msg === 'job run' && l.job?.outcome === 'done');
      expect(job.job).toMatchObject({ task: expect.any(String), attempt: expect.any(Number), ms: expect.any(Number) });
    });

    it('GET /healthz answers while the process is up; GET /readyz checks database, blob store and migrations', async () => {
      expect((await app.request('GET', '/healthz')).body).toEqual({ status: 'ok' });
      const ready = await app.request('GET', '/readyz');
      expect(ready.status).toBe(200);
      expect(ready.body).toEqual({ status: 'ready', failing: [], checks: { database: { ok: true }, blob_store: { ok: true }, migrations: { ok: true } } });

      // A migration the code knows that the database has not run: not ready, naming it.
      const db = app.started.deps.db;
      const row = await sql<{ name: string; timestamp: string }>`select name, timestamp from kysely_migration where name = '0011_agent_access'`.execute(db);
      await sql`delete from kysely_migration where name = '0011_agent_access'`.execute(db);
      try {
        const res = await app.request('GET', '/readyz');
        expect(res.status).toBe(503);
        expect(res.body.failing).toEqual(['migrations']);
        expect(res.body.checks.migrations.error).toContain('0011_agent_access');
      } finally {
        await sql`insert into kysely_migration (name, timestamp) values (${row.rows[0]!.name}, ${row.rows[0]!.timestamp})`.execute(db);
      }

      // A blob store that cannot be written (its directory replaced by a file).
      const root = fsStoreRoot(app.started.deps.blobs);
      fs.renameSync(root, `${root}.away`);
      fs.writeFileSync(root, 'not a directory');
      try {
        const res = await app.request('GET', '/readyz');
        expect(res.status).toBe(503);
        expect(res.body).toMatchObject({ status: 'not_ready', failing: ['blob_store'], checks: { database: { ok: true }, blob_store: { ok: false, error: expect.stringContaining('ENOTDIR') } } });
      } finally {
        fs.rmSync(root);
        fs.renameSync(`${root}.away`, root);
      }
      expect((await app.request('GET', '/readyz')).status).toBe(200);
      // Successful probes are logged at debug only (this app logs from info); failures are not.
      const after = await app.request('GET', '/v1/mailboxes', { key: user.key });
      await logs.next((l) => l.http?.request_id === after.headers.get('x-request-id'));
      const probes = logs.lines.filter((l) => l.http?.route === '/readyz');
      expect(probes.map((l) => l.http.status)).toEqual([503, 503]);
    });

    it('GET /metrics serves Prometheus text to loopback clients, refuses proxied ones', async () => {
      const box = await mailboxWithAddress(app, user);
      await sendMail(app, { to: box.address, subject: 'Counted' });
      const res = await fetch(`${app.base}/metrics`);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
      const text = await res.text();
      for (const name of ['cubby_http_request_duration_seconds_bucket', 'cubby_smtp_sessions_total', 'cubby_smtp_ingest_duration_seconds_bucket', 'cubby_job_queue_depth', 'cubby_job_queue_oldest_age_seconds', 'cubby_job_runs_total', 'cubby_webhook_attempts_total', 'cubby_live_connections', 'cubby_db_pool_connections', 'cubby_process_resident_memory_bytes']) {
        expect(text, name).toContain(name);
      }
      expect(text).toMatch(/cubby_http_requests_total\{method="POST",route="\/v1\/mailboxes",status="201"\} [1-9]/);
      expect(text).toMatch(/cubby_smtp_messages_total\{outcome="accepted",code="250"\} [1-9]/);
      expect(text).toMatch(/cubby_smtp_messages_total\{outcome="refused",code="550"\} [1-9]/);
      // A small message's blobs are kept in the database (src/blobs/inline-blobs.ts), larger ones in the store.
      expect(Number(/^cubby_blob_inline_bytes_written_total (\d+)/m.exec(text)?.[1])).toBeGreaterThan(1000);
      expect(text).toMatch(/^cubby_blob_bytes_written_total \d+/m);
      expect(text).toMatch(/cubby_job_runs_total\{task="[^"]+",outcome="done"\} [1-9]/);
      expect(text).toMatch(/cubby_webhook_attempts_total\{outcome="succeeded"\} [1-9]/);
      if (kind === 'postgres') expect(Number(/^cubby_db_pool_connections\{state="total"\} (\d+)/m.exec(text)?.[1])).toBeGreaterThan(0);

      const proxied = await app.request('GET', '/metrics', { headers: { 'x-forwarded-for': '203.0.113.9' } });
      expect(proxied.status).toBe(403);
      expect(proxied.body.error.code).toBe('PERMISSION_DENIED');
    });

    it('every docs_url answers 200 with a page explaining its code, generated from the catalogue', async () => {
      const res = await app.request('GET', '/api/v1/buckets/bkt_missing000000000000000', { key: user.key });
      const docsUrl: string = res.body.error.docs_url;
      expect(docsUrl).toMatch(/\/docs\/errors#BUCKET_NOT_FOUND$/);
      const page = await fetch(docsUrl);
      expect(page.status).toBe(200);
      expect(page.headers.get('content-type')).toMatch(/^text\/html/);
      const body = await page.text();
      for (const [code, entry] of Object.entries(ERROR_CATALOGUE)) {
        const section = new RegExp(`<section class="card" id="${code}">([\\s\\S]*?)</section>`).exec(body)?.[1];
        expect(section, code).toBeDefined();
        expect(section).toContain(`<dd>${entry.status}</dd>`);
        expect(section).toContain('What to do');
      }
    });
  });
}

describe('metrics token', () => {
  let app: TestApp;
  const token = 'metrics-token-0123456789abcdef';
  beforeAll(async () => {
    app = await startTestApp('sqlite', { CUBBY_ROLES: 'api', CUBBY_METRICS_TOKEN: token });
  });
  afterAll(async () => app?.stop());

  it('with CUBBY_METRICS_TOKEN, /metrics needs it as a bearer token, from anywhere', async () => {
    expect((await app.request('GET', '/metrics')).status).toBe(401);
    expect((await app.request('GET', '/metrics', { headers: { authorization: 'Bearer metrics-token-0123456789abcdeX' } })).status).toBe(401);
    const ok = await app.request('GET', '/metrics', { headers: { authorization: `Bearer ${token}`, 'x-forwarded-for': '203.0.113.9' } });
    expect(ok.status).toBe(200);
    expect(ok.text).toContain('cubby_http_requests_total');
  });
});

describe('operations config', () => {
  const problems = (env: Record<string, string>) => {
    try {
      loadConfig(env);
    } catch (err) {
      if (err instanceof ConfigError) return err.problems;
      throw err;
    }
    return [];
  };

  it('refuses an unknown CUBBY_LOG_FORMAT, a short CUBBY_METRICS_TOKEN and a bad CUBBY_SHUTDOWN_GRACE_S', () => {
    expect(problems({ CUBBY_LOG_FORMAT: 'xml' })).toEqual(['CUBBY_LOG_FORMAT: must be json or pretty']);
    expect(problems({ CUBBY_METRICS_TOKEN: 'short' })).toEqual(['CUBBY_METRICS_TOKEN: must be at least 16 characters']);
    expect(problems({ CUBBY_SHUTDOWN_GRACE_S: 'soon' })).toEqual(['CUBBY_SHUTDOWN_GRACE_S: must be a whole number of seconds']);
    expect(loadConfig({})).toMatchObject({ logFormat: 'json', metricsToken: undefined, shutdownGraceMs: 25_000 });
    expect(loadConfig({ CUBBY_LOG_FORMAT: 'pretty', CUBBY_SHUTDOWN_GRACE_S: '5' })).toMatchObject({ logFormat: 'pretty', shutdownGraceMs: 5_000 });
  });

  it('CUBBY_LOG_FORMAT=pretty writes lines for a person, not JSON', () => {
    let out = '';
    const destination = new Writable({
      write(chunk, _enc, cb) {
        out += String(chunk);
        cb();
      },
    });
    const log = createLogger({ level: 'info', format: 'pretty', destination });
    log.info({ http: { method: 'GET', route: '/v1/mailboxes', status: 200 } }, 'request');
    expect(out).toMatch(/INFO.*request/);
    expect(out).toContain('/v1/mailboxes');
    expect(() => JSON.parse(out)).toThrow();
  });
});

describe('files on disk are private', () => {
  it('creates the data dir 0700, the SQLite database, WAL and SHM 0600, blob dirs 0700 and blob files 0600', async () => {
    const parent = fs.mkdtempSync(path.join(os.tmpdir(), 'cubby-modes-'));
    const dataDir = path.join(parent, 'data');
    try {
      // Every blob in the store, none kept in the database: the store's files are what is checked.
      const app = await startTestApp('sqlite', { CUBBY_DATA_DIR: dataDir, CUBBY_SECRET_KEY: '', CUBBY_BLOB_INLINE_MAX_BYTES: '0' });
      try {
        const user = await app.user();
        const box = await mailboxWithAddress(app, user);
        await sendMail(app, { to: box.address, subject: 'Private', attachments: [{ filename: 'a.txt', content: 'attachment bytes' }] });
        const mode = (p: string) => (fs.statSync(p).mode & 0o777).toString(8);
        expect(mode(dataDir)).toBe('700');
        for (const f of ['cubby.db', 'cubby.db-wal', 'cubby.db-shm', 'secret.key']) expect(mode(path.join(dataDir, f)), f).toBe('600');
        const root = fsStoreRoot(app.started.deps.blobs);
        const files: string[] = [];
        const dirs: string[] = [];
        const walk = (d: string) => {
          for (const e of fs.readdirSync(d, { withFileTypes: true })) {
            const p = path.join(d, e.name);
            if (e.isDirectory()) {
              dirs.push(p);
              walk(p);
            } else files.push(p);
          }
        };
        walk(root);
        expect(files.length).toBeGreaterThan(2);
        expect(new Set([root, ...dirs].map(mode))).toEqual(new Set(['700']));
        expect(new Set(files.map(mode))).toEqual(new Set(['600']));
      } finally {
        await app.stop();
      }
    } finally {
      fs.rmSync(parent, { recursive: true, force: true });
    }
  });

  it('tightens a database file an earlier version left readable to others', async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cubby-modes-'));
    fs.writeFileSync(path.join(dataDir, 'cubby.db'), '');
    fs.chmodSync(path.join(dataDir, 'cubby.db'), 0o644);
    const app = await startTestApp('sqlite', { CUBBY_DATA_DIR: dataDir });
    try {
      expect(fs.statSync(path.join(dataDir, 'cubby.db')).mode & 0o777).toBe(0o600);
    } finally {
      await app.stop();
    }
  });
});
