import { expect, it } from 'vitest';
import { describeEachDatabase, type TestApp } from './harness.ts';

async function createBucket(app: TestApp, key: string, bucket: Record<string, unknown>, headers: Record<string, string> = {}) {
  return app.request('POST', '/api/v1/buckets', { key, body: { bucket }, headers });
}

describeEachDatabase('buckets (surface A)', (app) => {
  it('creates a bucket with its address and every Bucket field; 200 on idempotent replay, conflict on reuse', async () => {
    const u = await app().user();
    const res = await createBucket(app(), u.key, { title: 'Website', description: 'd', tag_paths: ['site', 'site'], metadata: { k: 'v' } }, { 'Idempotency-Key': 'create-website-1' });
    expect(res.status, res.text).toBe(201);
    const b = res.body.data.bucket;
    expect(b).toMatchObject({
      title: 'Website',
      description: 'd',
      tag_paths: ['site'],
      metadata: { k: 'v' },
      published: false,
      public_url: null,
      github_sync: null,
      // Git sync is on by default (CUBBY_GIT_SYNC); a new bucket can be connected (test/git-sync.test.ts).
      github_sync_setup: { eligible: true, blocked_reason: null },
      archived: false,
    });
    expect(b.id).toMatch(/^bkt_[A-Za-z0-9]+$/);
    expect(b.dashboard_url).toBe(`${app().base}/mailboxes/${b.id}`);
    expect(b.inbound_email.address).toMatch(/^website-[a-z0-9]{4}@mail\.localhost$/);
    expect(b.inbound_email).toMatchObject({ configured: true, received_count: 0, last_received_path: null });
    expect(typeof b.inbound_email.monthly_limit).toBe('number');
    expect(b.delete.confirmation).toBe(`DELETE ${b.id}`);
    expect(b.archive.required_action).toBeNull();
    expect(res.headers.get('x-service-client-version')).toBeTruthy();

    const replay = await createBucket(app(), u.key, { title: 'Website', description: 'd', tag_paths: ['site', 'site'], metadata: { k: 'v' } }, { 'Idempotency-Key': 'create-website-1' });
    expect(replay.status).toBe(200);
    expect(replay.body.data.bucket.id).toBe(b.id);
    const reuse = await createBucket(app(), u.key, { title: 'Other' }, { 'Idempotency-Key': 'create-website-1' });
    expect(reuse.status).toBe(409);
    expect(reuse.body.error.code).toBe('IDEMPOTENCY_KEY_CONFLICT');
    const bad = await createBucket(app(), u.key, { title: 'X' }, { 'Idempotency-Key': 'short' });
    expect(bad.status).toBe(422);
    const list = await app().request('GET', '/api/v1/buckets', { key: u.key });
    expect(list.body.data.buckets.map((x: any) => x.id)).toEqual([b.id]);
  });

  it('two concurrent creates with one Idempotency-Key make one bucket', async () => {
    const u = await app().user();
    const [a, b] = await Promise.all([
      createBucket(app(), u.key, { title: 'Once' }, { 'Idempotency-Key': 'same-key-123' }),
      createBucket(app(), u.key, { title: 'Once' }, { 'Idempotency-Key': 'same-key-123' }),
    ]);
    expect([a.status, b.status].sort()).toEqual([200, 201]);
    expect(a.body.data.bucket.id).toBe(b.body.data.bucket.id);
  });

  it('requires a title; ordinary reads show only activity fields; the address needs write access', async () => {
    const u = await app().user();
    const missing = await createBucket(app(), u.key, {});
    expect(missing.status).toBe(422);
    expect(missing.body.error.code).toBe('INVALID_ARGUMENT');
    expect(missing.body.error.details.field).toBe('bucket.title');
    expect(missing.body.error.request_id).toMatch(/^req_/);
    const b = (await createBucket(app(), u.key, { title: 'Inbox' })).body.data.bucket;
    const plain = await app().request('GET', `/api/v1/buckets/${b.id}`, { key: u.key });
    expect(Object.keys(plain.body.data.bucket.inbound_email).sort()).toEqual(['last_received_path', 'monthly_limit', 'received_count']);
    const full = await app().request('GET', `/api/v1/buckets/${b.id}`, { key: u.key, query: { include_inbound_email: true } });
    expect(full.body.data.bucket.inbound_email.address).toBe(b.inbound_email.address);
    const reader = await app().key(u, { scope: 'mailbox_read' });
    const denied = await app().request('GET', `/api/v1/buckets/${b.id}`, { key: reader, query: { include_inbound_email: true } });
    expect(denied.status).toBe(403);
    expect((await app().request('GET', `/api/v1/buckets/${b.id}/inbound_email`, { key: reader })).status).toBe(403);
    const inbound = await app().request('GET', `/api/v1/buckets/${b.id}/inbound_email`, { key: u.key });
    expect(inbound.body.data).toMatchObject({ address: b.inbound_email.address, configured: true, received_count: 0 });
  });

  it('answers BUCKET_NOT_FOUND for missing and foreign buckets', async () => {
    const u = await app().user();
    const other = await app().user();
    const b = (await createBucket(app(), u.key, { title: 'Private' })).body.data.bucket;
    for (const [method, path] of [
      ['GET', `/api/v1/buckets/${b.id}`],
      ['GET', `/api/v1/buckets/${b.id}/inbound_email`],
      ['POST', `/api/v1/buckets/${b.id}/archive`],
      ['GET', '/api/v1/buckets/bkt_missing'],
    ] as const) {
      const res = await app().request(method, path, { key: other.key, body: method === 'POST' ? {} : undefined });
      expect(res.status, path).toBe(404);
      expect(res.body.error.code).toBe('BUCKET_NOT_FOUND');
      expect(res.body.error.docs_url).toContain('BUCKET_NOT_FOUND');
    }
  });

  it('archive, unarchive and delete through surface A', async () => {
    const u = await app().user();
    const b = (await createBucket(app(), u.key, { title: 'Temp' })).body.data.bucket;
    const early = await app().request('DELETE', `/api/v1/buckets/${b.id}`, { key: u.key, body: { confirmation: b.delete.confirmation } });
    expect(early.status).toBe(409);
    const arch = await app().request('POST', `/api/v1/buckets/${b.id}/archive`, { key: u.key, body: {} });
    expect(arch.body.data.bucket).toMatchObject({ archived: true, github_sync_setup: { blocked_reason: 'bucket_archived' } });
    const archivedList = await app().request('GET', '/api/v1/buckets', { key: u.key, query: { archived: 'true' } });
    expect(archivedList.body.data.buckets.map((x: any) => x.id)).toEqual([b.id]);
    const un = await app().request('POST', `/api/v1/buckets/${b.id}/unarchive`, { key: u.key, body: {} });
    expect(un.body.data.bucket.archived).toBe(false);
    await app().request('POST', `/api/v1/buckets/${b.id}/archive`, { key: u.key, body: {} });
    const del = await app().request('DELETE', `/api/v1/buckets/${b.id}`, { key: u.key, body: { confirmation: `DELETE ${b.id}` } });
    expect(del.status).toBe(200);
    expect(del.body).toEqual({ data: { deleted: true, id: b.id } });
    expect((await app().request('GET', `/api/v1/buckets/${b.id}`, { key: u.key })).status).toBe(404);
  });

  it('status onboarding follows the buckets the credential can see', async () => {
    const u = await app().user();
    const s0 = await app().request('GET', '/api/v1/status', { key: u.key });
    expect(s0.body.data.onboarding.state).toBe('empty_account');
    const b = (await createBucket(app(), u.key, { title: 'First' })).body.data.bucket;
    const s1 = await app().request('GET', '/api/v1/status', { key: u.key });
    expect(s1.body.data.onboarding.state).toBe('active');
    const narrow = await app().key(u, { mailboxAccess: 'selected', mailboxPermissions: { bkt_gone0000: 'read' } });
    const s2 = await app().request('GET', '/api/v1/status', { key: narrow });
    expect(s2.body.data.onboarding.state).toBe('no_visible_buckets');
    expect(s2.body.data.connection.denied_mailbox_ids).toEqual(['bkt_gone0000']);
    const sel = await app().key(u, { mailboxAccess: 'selected', mailboxPermissions: { [b.id]: 'write' } });
    const s3 = await app().request('GET', '/v1/status', { key: sel });
    expect(s3.body.data.connection).toMatchObject({ mailbox_access: 'selected', mailbox_ids: [b.id], mailbox_permissions: { [b.id]: 'write' } });
  });
});
