import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestApp } from './harness.ts';
import { admin, adminUserAndKey, serveEnv, startServe, type ServeProcess } from './serve-process.ts';
import { useS3rver } from './s3-harness.ts';
import { RawCable, cableUrl, identifierOf } from './cable-client.ts';
import { uploadFile } from './files-helpers.ts';
import { sendMail } from './smtp-helpers.ts';
import { siteFetch } from './sites-helpers.ts';
import { makeCert, Receiver, type TestCert } from './webhook-receiver.ts';

// Scale-out as an operator runs it: two `cubby serve` processes on one Postgres schema and one
// S3-compatible store (s3rver), one with the roles api,sites and one with smtp,worker. Mail sent
// to the second is read through the first, with its webhook (delivered by the second's worker)
// and its live event (on the first's socket); a site published through the first is built by the
// second's worker and served by the first.

const PG_URL = process.env.CUBBY_TEST_POSTGRES_URL;

/** Just enough of TestApp for the helpers that only make API requests. */
function remote(base: string): TestApp {
  const request = async (method: string, url: string, opts: { key?: string; body?: unknown; query?: Record<string, string | number | boolean | undefined>; headers?: Record<string, string> } = {}) => {
    const u = new URL(url, base);
    for (const [k, v] of Object.entries(opts.query ?? {})) if (v !== undefined) u.searchParams.set(k, String(v));
    const headers: Record<string, string> = { accept: 'application/json', ...opts.headers };
    if (opts.key) headers.authorization = `Bearer ${opts.key}`;
    if (opts.body !== undefined) headers['content-type'] = 'application/json';
    const res = await fetch(u, { method, headers, body: opts.body === undefined ? undefined : JSON.stringify(opts.body) });
    const text = await res.text();
    let body: any;
    try {
      body = text ? JSON.parse(text) : undefined;
    } catch {
      body = undefined;
    }
    return { status: res.status, headers: res.headers, body, text };
  };
  return { base, request } as unknown as TestApp;
}

describe.skipIf(!PG_URL)('scale-out: api,sites and smtp,worker processes on one Postgres and one S3 store', () => {
  const s3 = useS3rver();
  const schema = `t_scale_${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;
  const dirs = [fs.mkdtempSync(path.join(os.tmpdir(), 'cubby-scale-a-')), fs.mkdtempSync(path.join(os.tmpdir(), 'cubby-scale-b-'))];
  let front: ServeProcess;
  let back: ServeProcess;
  let cert: TestCert;
  let hooks: Receiver;

  beforeAll(async () => {
    cert = await makeCert();
    hooks = new Receiver(cert);
    await hooks.start();
    const shared = serveEnv(dirs[0]!, {
      ...s3,
      CUBBY_DATABASE_URL: PG_URL!,
      CUBBY_DATABASE_SCHEMA: schema,
      CUBBY_WEBHOOK_ALLOW_PRIVATE: 'true',
      CUBBY_WEBHOOK_CA_FILE: cert.certFile,
    });
    // The first process migrates the schema; the second then finds it migrated.
    front = await startServe({ ...shared, CUBBY_ROLES: 'api,sites' });
    back = await startServe({ ...shared, CUBBY_DATA_DIR: dirs[1]!, CUBBY_ROLES: 'smtp,worker' });
  });

  afterAll(async () => {
    await Promise.all([front?.stop(), back?.stop()]);
    await hooks?.stop();
    for (const d of [...dirs, cert?.dir]) if (d) fs.rmSync(d, { recursive: true, force: true });
    const c = new pg.Client({ connectionString: PG_URL });
    await c.connect();
    await c.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await c.end();
  });

  it('each process serves only its roles', () => {
    expect(front.base).toMatch(/^http:/);
    expect(front.smtpPort).toBeNull();
    expect(front.sites).toMatch(/^http:/);
    expect(back.base).toBe('');
    expect(back.smtpPort).toBeGreaterThan(0);
    expect(back.sites).toBeNull();
  });

  it('mail sent to the smtp node is read, with its webhook and live event, through the api node', async () => {
    const api = remote(front.base);
    const { key } = await adminUserAndKey(front.env);
    const created = await api.request('POST', '/v1/mailboxes', { key, body: { mailbox: { title: 'Scaled' } } });
    expect(created.status, created.text).toBe(201);
    const box = created.body.data.mailbox;
    const hook = await api.request('PUT', `/v1/mailboxes/${box.id}/email/webhook`, { key, body: { webhook_url: `https://127.0.0.1:${hooks.port}/hook` } });
    expect(hook.status, hook.text).toBe(200);
    hooks.secret = hook.body.data.webhook.signing_secret;

    const sub = await api.request('GET', `/v1/mailboxes/${box.id}/email/subscription`, { key });
    expect(sub.status, sub.text).toBe(200);
    const cable = await RawCable.open(cableUrl(sub.body.data.subscription));
    expect((await cable.next())?.type).toBe('welcome');
    const identifier = identifierOf(sub.body.data.subscription);
    expect(await cable.subscribe(identifier)).toBe('confirm_subscription');

    const sent = await sendMail({ started: { ports: { smtp: back.smtpPort } } } as unknown as TestApp, {
      from: 'sender@example.org',
      to: box.email.address,
      subject: 'Across nodes',
      text: 'Stored by one process, read through the other.',
    });
    expect(sent.emailIds).toHaveLength(1);
    const emailId = sent.emailIds[0]!;

    const live = await cable.next((f) => f.identifier === identifier && f.message);
    expect(JSON.stringify(live.message)).toContain(emailId);
    cable.close();

    await hooks.waitFor(1);
    expect(hooks.received[0]!.verified).toBe(true);
    expect(hooks.received[0]!.body).toContain(emailId);

    const email = await api.request('GET', `/v1/mailboxes/${box.id}/emails/${emailId}`, { key });
    expect(email.status, email.text).toBe(200);
    expect(JSON.stringify(email.body.data)).toContain('Across nodes');
    const files = await api.request('GET', `/v1/mailboxes/${box.id}/files`, { key, query: { limit: 50 } });
    const json = files.body.data.files.find((f: { path: string }) => f.path.endsWith('/message.json'));
    expect(json, files.text).toBeDefined();
    // The bytes themselves come from the S3 store, through a signed link the api node makes.
    const link = await api.request('GET', `/v1/mailboxes/${box.id}/files/${json.id}/download`, { key });
    expect(link.status, link.text).toBe(200);
    const content = await fetch(link.body.data.download.url);
    expect(content.status).toBe(200);
    expect(await content.text()).toContain('Stored by one process, read through the other.');
  });

  it('a site published through the api node is built by the worker node and served by the sites node', async () => {
    const api = remote(front.base);
    const email = `site-${Math.random().toString(36).slice(2, 8)}@example.com`;
    const made = await admin(front.env, ['create-user', '--email', email, '--password', 'a long test password', '--name', 'Site', '--plan', 'paid']);
    const key = (await admin(front.env, ['create-key', '--email', email])).api_key;
    await admin(front.env, ['set-publishing', '--account', made.account.id, '--enabled', 'true']);
    const bucket = await api.request('POST', '/api/v1/buckets', { key, body: { bucket: { title: 'Scaled site' } } });
    expect(bucket.status, bucket.text).toBe(201);
    const bucketId = bucket.body.data.bucket.id;
    const up = await uploadFile(api, key, bucketId, 'index.html', '<!doctype html><title>Scaled</title><h1>Served by the sites node</h1>');
    expect([200, 201], up.text).toContain(up.status);

    const started = await api.request('POST', `/api/v1/buckets/${bucketId}/publication`, { key, body: {} });
    expect(started.status, started.text).toBe(202);
    let p = started.body.data.publication;
    // Another process builds it: nothing to await but its answer, so read it again until settled.
    for (let n = 0; n < 200 && ['queued', 'processing'].includes(p.publish_state); n++) {
      await new Promise((r) => setTimeout(r, 100));
      p = (await api.request('GET', `/api/v1/publications/${p.id}`, { key })).body.data.publication;
    }
    expect(p.publish_state, JSON.stringify(p)).toBe('ready');
    const site = await siteFetch(p.public_url);
    expect(site.status).toBe(200);
    expect(site.text).toContain('Served by the sites node');
  });
});
