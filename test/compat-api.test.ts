import { expect, it } from 'vitest';
import { describeEachDatabase, type TestApp } from './harness.ts';
import { agency, createClient, dbOf } from './factories.ts';
import { newBucket, publish, publisher, siteFetch, untilSettled, uploadFolder } from './sites-helpers.ts';
import { inbox, receive } from './emails-helpers.ts';
import { mailboxWithAddress } from './smtp-helpers.ts';
import { WebClient } from './web-client.ts';

// Calls of the original service's generated SDKs and integrations, unmodified, against Cubby:
// publication requests and reads, surface A file operations, old parameter spellings, offset
// paging, dashboard links and bucket titles (docs/compat.md).

function expectError(res: { status: number; body: any; text: string }, status: number, code: string) {
  expect(res.status, res.text).toBe(status);
  expect(res.body.error.code, res.text).toBe(code);
  return res.body.error;
}

async function fileBytes(app: TestApp, key: string, bucketId: string, path: string) {
  const res = await app.request('GET', `/api/v1/buckets/${bucketId}/files/by_path`, { key, query: { path } });
  expect(res.status, res.text).toBe(200);
  return res.text;
}

describeEachDatabase('compat: SDK and integration calls', (app) => {
  it('publication: metadata.publication_root_directory, unknown metadata keys ignored, kind bucket_bundle, access_password and share_text, a 200 gate', async () => {
    const u = await publisher(app());
    const bucket = await newBucket(app(), u.key, 'Handbook');
    await uploadFolder(app(), u.key, bucket.id, { 'dist/index.html': '<h1>from dist</h1>', 'index.html': '<h1>top</h1>' });
    const queued = await publish(app(), u.key, bucket.id, {
      access_mode: 'password',
      site_mode: 'static',
      regenerate_password: false,
      metadata: { publication_root_directory: 'dist', cli_version: '2.1.0', nested: { anything: [1, 2] } },
    });
    expect(queued).toMatchObject({ kind: 'bucket_bundle', publication_root_directory: 'dist', publish_pending: true });
    const p = await untilSettled(app(), u.key, queued.id);
    expect(p).toMatchObject({ kind: 'bucket_bundle', publish_state: 'ready', access_mode: 'password', publication_root_directory: 'dist' });
    expect(p.access_password).toMatch(/\S{8,}/);
    expect(p.access_password).toBe(p.password);
    expect(p.share_text).toContain(p.access_password);

    // The list as the CLI reads it: include_manifest=false, keep kind bucket_bundle.
    const preview = await untilSettled(app(), u.key, (await publish(app(), u.key, bucket.id, { metadata: { publication_root_directory: '' } }, true)).id);
    expect(preview.kind).toBe('preview');
    const list = await app().request('GET', '/api/v1/publications', { key: u.key, query: { include_manifest: 'false' } });
    expect(list.status, list.text).toBe(200);
    const kinds = list.body.data.publications.map((x: any) => [x.id, x.kind]);
    expect(kinds).toEqual(expect.arrayContaining([[p.id, 'bucket_bundle'], [preview.id, 'preview']]));
    const mains = await app().request('GET', '/api/v1/publications', { key: u.key, query: { kind: 'bucket_bundle' } });
    expect(mains.body.data.publications.map((x: any) => x.id)).toEqual([p.id]);
    expect(mains.body.data.publications[0].access_password).toBe(p.access_password);

    // "The URL responds": the gate is a 200 page; the content stays locked.
    const gate = await siteFetch(p.public_url);
    expect(gate.status).toBe(200);
    expect(gate.text).not.toContain('from dist');
    // The preview serves the whole bucket (root "" from metadata).
    expect((await siteFetch(preview.public_url)).text).toContain('<h1>top</h1>');

    // Bad values inside metadata are still refused, naming the field; nothing is queued.
    const bad = await app().request('POST', `/api/v1/buckets/${bucket.id}/publication`, { key: u.key, body: { metadata: { publication_root_directory: '../up' } } });
    expect(expectError(bad, 422, 'INVALID_ARGUMENT').details.field).toBe('metadata.publication_root_directory');
    const notObject = await app().request('POST', `/api/v1/buckets/${bucket.id}/publication`, { key: u.key, body: { metadata: 'dist' } });
    expect(notObject.status).toBe(422);
    expect((await app().request('GET', `/api/v1/publications/${p.id}`, { key: u.key })).body.data.publication.publish_state).toBe('ready');
  });

  it('surface A file operations: append_text, read, versions and restore, with the rules of surface R', async () => {
    const u = await app().user();
    const bucket = await newBucket(app(), u.key, 'Notes');
    await uploadFolder(app(), u.key, bucket.id, { 'log.md': '# Log' });
    const first = await app().request('POST', `/api/v1/buckets/${bucket.id}/files/append_text`, { key: u.key, body: { path: 'log.md', content: 'line one', newline_before: true } });
    expect(first.status, first.text).toBe(200);
    expect(first.body.data).toMatchObject({ path: 'log.md', appended: true, newline_inserted: true, appended_bytes: 9 });
    const fileId = first.body.data.file.id;
    expect(fileId).toMatch(/^df_[A-Za-z0-9]+$/);
    await app().request('POST', `/api/v1/buckets/${bucket.id}/files/append_text`, { key: u.key, body: { path: 'log.md', content: '\nline two' } });
    expect(await fileBytes(app(), u.key, bucket.id, 'log.md')).toBe('# Log\nline one\nline two');

    const read = await app().request('GET', `/api/v1/buckets/${bucket.id}/files/${fileId}`, { key: u.key });
    expect(read.status, read.text).toBe(200);
    expect(read.body.data.file).toMatchObject({ id: fileId, path: 'log.md', mailbox_id: bucket.id });
    const versions = await app().request('GET', `/api/v1/buckets/${bucket.id}/files/${fileId}/versions`, { key: u.key });
    expect(versions.status, versions.text).toBe(200);
    const vs = versions.body.data.versions;
    expect(vs.map((v: any) => v.version_number)).toEqual([3, 2, 1]);
    const restored = await app().request('POST', `/api/v1/buckets/${bucket.id}/files/${fileId}/versions/${vs[2].id}/restore`, { key: u.key, body: {} });
    expect(restored.status, restored.text).toBe(200);
    expect(restored.body.data.version.version_number).toBe(4);
    expect(await fileBytes(app(), u.key, bucket.id, 'log.md')).toBe('# Log');

    // The same errors as surface R, in surface A's envelope.
    expectError(await app().request('POST', `/api/v1/buckets/${bucket.id}/files/append_text`, { key: u.key, body: { path: 'missing.md', content: 'x' } }), 404, 'MAILBOX_FILE_NOT_FOUND');
    expectError(await app().request('POST', `/api/v1/buckets/${bucket.id}/files/append_text`, { key: u.key, body: { path: '_email/x.txt', content: 'x' } }), 403, 'EMAIL_PATH_READ_ONLY');
    expectError(await app().request('POST', `/api/v1/buckets/${bucket.id}/files/append_text`, { key: u.key, body: { path: 'log.md' } }), 422, 'INVALID_ARGUMENT');
    const other = await app().user();
    expectError(await app().request('GET', `/api/v1/buckets/${bucket.id}/files/${fileId}`, { key: other.key }), 404, 'BUCKET_NOT_FOUND');
    expectError(await app().request('GET', `/api/v1/buckets/${bucket.id}/files/df_nothere`, { key: u.key }), 404, 'MAILBOX_FILE_NOT_FOUND');
  });

  it('offset paging through 250 files on both surfaces, with offset, count, total and next_offset beside the cursor', async () => {
    const u = await app().user();
    const bucket = await newBucket(app(), u.key, 'Many');
    const files: Record<string, string> = {};
    for (let i = 0; i < 250; i++) files[`f/${String(i).padStart(3, '0')}.txt`] = `file ${i}`;
    await uploadFolder(app(), u.key, bucket.id, files);

    for (const base of [`/api/v1/buckets/${bucket.id}/files`, `/v1/mailboxes/${bucket.id}/files`]) {
      const seen: string[] = [];
      let offset: number | null = 0;
      const pages: any[] = [];
      while (offset !== null) {
        const res = await app().request('GET', base, { key: u.key, query: { offset, limit: 100 } });
        expect(res.status, res.text).toBe(200);
        pages.push(res.body.data.pagination);
        seen.push(...res.body.data.files.map((f: any) => f.path));
        offset = res.body.data.pagination.next_offset;
      }
      expect(pages.map((p) => [p.offset, p.count, p.total, p.next_offset, p.has_more])).toEqual([
        [0, 100, 250, 100, true],
        [100, 100, 250, 200, true],
        [200, 50, 250, null, false],
      ]);
      expect(seen).toEqual(Object.keys(files));
      // Cursor paging answers the same offset fields.
      const one = await app().request('GET', base, { key: u.key, query: { limit: 100 } });
      const two = await app().request('GET', base, { key: u.key, query: { limit: 100, cursor: one.body.data.pagination.next_cursor } });
      expect(two.body.data.pagination).toMatchObject({ offset: 100, count: 100, total: 250, next_offset: 200 });
      expect(two.body.data.files[0].path).toBe('f/100.txt');
      // Past the end: an empty page, not an error.
      const past = await app().request('GET', base, { key: u.key, query: { offset: 900 } });
      expect(past.body.data).toMatchObject({ files: [], pagination: { offset: 900, count: 0, total: 250, next_offset: null, has_more: false } });
      expect((await app().request('GET', base, { key: u.key, query: { offset: 100, cursor: one.body.data.pagination.next_cursor } })).status).toBe(422);
      expect((await app().request('GET', base, { key: u.key, query: { offset: -1 } })).status).toBe(422);
    }
  });

  it('accounts list: offset paging', async () => {
    const owner = await agency(app());
    await createClient(app(), owner, { name: 'One' });
    await createClient(app(), owner, { name: 'Two' });
    const all = await app().request('GET', '/v1/accounts', { key: owner.key });
    expect(all.body.data.pagination).toMatchObject({ offset: 0, count: 3, total: 3, next_offset: null });
    const ids = all.body.data.accounts.map((a: any) => a.id);
    const page = await app().request('GET', '/v1/accounts', { key: owner.key, query: { offset: 1, limit: 1 } });
    expect(page.body.data.accounts.map((a: any) => a.id)).toEqual([ids[1]]);
    expect(page.body.data.pagination).toMatchObject({ offset: 1, count: 1, total: 3, next_offset: 2, has_more: true });
  });

  it('old spellings: archived=true|false on the mailbox list, current_address on rotation, purpose on email reads', async () => {
    const u = await app().user({ plan: 'paid' });
    const live = await mailboxWithAddress(app(), u, 'Live box');
    const old = await mailboxWithAddress(app(), u, 'Old box');
    expect((await app().request('POST', `/v1/mailboxes/${old.id}/archive`, { key: u.key, body: {} })).status).toBe(200);
    const listed = async (query: Record<string, string>) => {
      const res = await app().request('GET', '/v1/mailboxes', { key: u.key, query });
      expect(res.status, res.text).toBe(200);
      return res.body.data.mailboxes.map((m: any) => m.id);
    };
    expect(await listed({ archived: 'true' })).toEqual([old.id]);
    expect(await listed({ archived: 'false' })).toEqual([live.id]);
    expect(await listed({ archived: 'true', status: 'archived' })).toEqual([old.id]);
    expectError(await app().request('GET', '/v1/mailboxes', { key: u.key, query: { archived: 'true', status: 'active' } }), 422, 'INVALID_ARGUMENT');
    expectError(await app().request('GET', '/v1/mailboxes', { key: u.key, query: { archived: 'maybe' } }), 422, 'INVALID_ARGUMENT');

    const stale = await app().request('POST', `/v1/mailboxes/${live.id}/email/rotate`, { key: u.key, body: { confirm: true, current_address: 'live-box-zzzz@mail.localhost' } });
    expectError(stale, 409, 'EMAIL_ADDRESS_CHANGED');
    expectError(await app().request('POST', `/v1/mailboxes/${live.id}/email/rotate`, { key: u.key, body: { confirm: true, current_address: live.address, expected_address: 'other@mail.localhost' } }), 422, 'INVALID_ARGUMENT');
    const rotated = await app().request('POST', `/v1/mailboxes/${live.id}/email/rotate`, { key: u.key, body: { confirm: true, current_address: live.address, keep_old_as_alias: false } });
    expect(rotated.status, rotated.text).toBe(200);
    expect(rotated.body.data.address).not.toBe(live.address);

    const box = await inbox(app(), u);
    const emailId = await receive(app(), box, { subject: 'for the SDK' });
    await app().started.deps.jobs.worker!.drain(); // labeling
    for (const purpose of ['open', 'background']) {
      const one = await app().request('GET', `/v1/mailboxes/${box.id}/emails/${emailId}`, { key: u.key, query: { purpose } });
      expect(one.status, one.text).toBe(200);
      expect(one.body.data.email.read).toBe(false);
      expect((await app().request('GET', `/v1/mailboxes/${box.id}/emails`, { key: u.key, query: { purpose } })).status).toBe(200);
    }
    expectError(await app().request('GET', `/v1/mailboxes/${box.id}/emails/${emailId}`, { key: u.key, query: { purpose: 'mark_read' } }), 422, 'INVALID_ARGUMENT');
  });

  it('bucket titles: surface A suffixes a taken title, surface R answers 409 MAILBOX_TITLE_TAKEN; titles stay unique among active mailboxes', async () => {
    const u = await app().user({ plan: 'paid' });
    const make = async (title: string) => {
      const res = await app().request('POST', '/api/v1/buckets', { key: u.key, body: { bucket: { title } } });
      expect(res.status, res.text).toBe(201);
      return res.body.data.bucket;
    };
    expect((await make('photos')).title).toBe('photos');
    expect((await make('Photos')).title).toBe('Photos 2');
    expect((await make('photos')).title).toBe('photos 3');
    const long = 'x'.repeat(200);
    expect((await make(long)).title).toBe(long);
    const second = (await make(long)).title;
    expect(second).toBe(`${'x'.repeat(198)} 2`);
    expectError(await app().request('POST', '/v1/mailboxes', { key: u.key, body: { mailbox: { title: 'PHOTOS' } } }), 409, 'MAILBOX_TITLE_TAKEN');
    expectError(await app().request('PATCH', `/api/v1/buckets/${(await make('other')).id}`, { key: u.key, body: { bucket: { title: 'photos 2' } } }), 409, 'MAILBOX_TITLE_TAKEN');
    // Concurrent creations with one title all succeed with distinct titles.
    const many = await Promise.all([1, 2, 3].map(() => app().request('POST', '/api/v1/buckets', { key: u.key, body: { bucket: { title: 'race' } } })));
    expect(many.map((r) => r.status)).toEqual([201, 201, 201]);
    expect(new Set(many.map((r) => r.body.data.bucket.title))).toEqual(new Set(['race', 'race 2', 'race 3']));
    const keys = await dbOf(app()).selectFrom('mailboxes').select('title_key').where('account_id', '=', u.accountId).where('title_key', 'is not', null).execute();
    expect(new Set(keys.map((k) => k.title_key)).size).toBe(keys.length);
  });

  it('dashboard links of the bucket era: /buckets/view?id= opens the mailbox page after sign-in', async () => {
    const u = await app().user();
    const bucket = await newBucket(app(), u.key, 'Linked');
    const web = new WebClient(app().base);
    const first = await web.get(`/buckets/view?id=${bucket.id}`);
    expect(first.status).toBe(302);
    expect(first.location).toBe(`/mailboxes/${bucket.id}`);
    const toSignIn = await web.get(first.location!);
    expect(toSignIn.status).toBe(303);
    expect(toSignIn.location).toBe(`/users/sign_in?next=${encodeURIComponent(`/mailboxes/${bucket.id}`)}`);
    const signedIn = await web.submit(toSignIn.location!, '/users/sign_in', { email: u.email, password: 'a long test password', next: `/mailboxes/${bucket.id}` });
    expect(signedIn.status).toBe(303);
    expect(signedIn.location).toBe(`/mailboxes/${bucket.id}`);
    const page = await web.get(signedIn.location!);
    expect(page.status).toBe(200);
    expect(page.text).toContain('Linked');
    expect((await web.get('/buckets/view?id=not-an-id')).status).toBe(404);
    expect((await web.get('/buckets/view')).status).toBe(404);
  });
});
