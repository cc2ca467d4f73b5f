import { expect, it } from 'vitest';
import { describeEachDatabase } from './harness.ts';
import { expectError } from './factories.ts';
import { mailboxWithAddress } from './smtp-helpers.ts';
import { form, latestEmailText, newBucket, publishAndWait, publisher, siteFetch, uploadFolder } from './sites-helpers.ts';

// Protected sites over HTTP, paid-only settings, password rules and slugs.

function cookieOf(res: { headers: Record<string, any> }): string {
  const set = res.headers['set-cookie'] as string[] | undefined;
  expect(set?.[0]).toMatch(/^cubby_site_access=[^;]+; Path=\/; Max-Age=604800; HttpOnly; SameSite=Lax$/);
  return set![0]!.split(';')[0]!;
}

describeEachDatabase('sites: access modes', (app) => {
  it('password: generated, shown to the owner once ready (never to read-only keys), form + site cookie, attempts limited', async () => {
    const u = await publisher(app());
    const bucket = await newBucket(app(), u.key, 'Secret Plans');
    await uploadFolder(app(), u.key, bucket.id, { 'index.html': '<h1>inside</h1>', 'a/b.html': 'deep' });
    const p = await publishAndWait(app(), u.key, bucket.id, { access_mode: 'password' });
    expect(p.password).toMatch(/^[a-z2-9]{4}(-[a-z2-9]{4}){3}$/);
    expect(p.share_text).toContain(`Password: ${p.password}`);
    expect(p.noindex).toBe(true);
    const reader = await app().key(u, { scope: 'mailbox_read' });
    const seen = await app().request('GET', `/api/v1/publications/${p.id}`, { key: reader });
    expect(seen.body.data.publication.password).toBeUndefined();
    expect(seen.body.data.publication.share_text).toBeUndefined();

    const gate = await siteFetch(`${p.public_url}/a/b.html?x=1`);
    // The gate is a normal page (200; docs/compat.md); the content stays locked.
    expect(gate.status).toBe(200);
    expect(gate.headers['x-cubby-access']).toBe('password_required');
    expect(gate.text).not.toContain('deep');
    expect(gate.headers['x-robots-tag']).toBe('noindex');
    expect(gate.text).toContain('action="/.cubby/password"');
    expect(gate.text).toContain('value="/a/b.html?x=1"');
    expect((await siteFetch(`${p.public_url}/robots.txt`)).text).toBe('User-agent: *\nDisallow: /\n');

    const wrong = await siteFetch(`${p.public_url}/.cubby/password`, { method: 'POST', ...form({ password: 'nope-nope', next: '/a/b.html' }) });
    expect(wrong.status).toBe(401);
    expect(wrong.text).toContain('That password is not right.');
    expect(wrong.headers['set-cookie']).toBeUndefined();
    // A form posted from another origin is refused.
    const foreign = await siteFetch(`${p.public_url}/.cubby/password`, { method: 'POST', headers: { ...form({}).headers, origin: 'http://evil.localhost:1' }, body: form({ password: p.password }).body });
    expect(foreign.status).toBe(403);

    const right = await siteFetch(`${p.public_url}/.cubby/password`, { method: 'POST', ...form({ password: p.password, next: '//evil.example/' }) });
    expect(right.status).toBe(303);
    expect(right.headers.location).toBe('/');
    const cookie = cookieOf(right);
    const inside = await siteFetch(`${p.public_url}/a/b.html`, { headers: { cookie } });
    expect(inside.status).toBe(200);
    expect(inside.text).toBe('deep');
    expect(inside.headers['cache-control']).toBe('private, no-cache');
    expect(inside.headers['x-robots-tag']).toBe('noindex');

    // Republishing keeps the password unless asked; regenerating ends every visitor session.
    const same = await publishAndWait(app(), u.key, bucket.id, {});
    expect(same.password).toBe(p.password);
    expect((await siteFetch(p.public_url, { headers: { cookie } })).status).toBe(200);
    const fresh = await publishAndWait(app(), u.key, bucket.id, { regenerate_password: true });
    expect(fresh.password).not.toBe(p.password);
    const locked = await siteFetch(p.public_url, { headers: { cookie } });
    expect(locked.headers['x-cubby-access']).toBe('password_required');
    expect(locked.text).toContain('action="/.cubby/password"');
    const chosen = await publishAndWait(app(), u.key, bucket.id, { password: 'correct horse battery' });
    expect(chosen.password).toBe('correct horse battery');

    // Ten wrong passwords from one client (one above), then 429 even for the right one.
    for (let i = 0; i < 9; i++) expect((await siteFetch(`${p.public_url}/.cubby/password`, { method: 'POST', ...form({ password: `wrong-${i}-xx` }) })).status).toBe(401);
    const limited = await siteFetch(`${p.public_url}/.cubby/password`, { method: 'POST', ...form({ password: 'correct horse battery' }) });
    expect(limited.status).toBe(429);
    expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
  });

  it('require_email: a one-time code by our own mail, then a site cookie', async () => {
    const u = await publisher(app());
    const bucket = await newBucket(app(), u.key, 'Members Only');
    await uploadFolder(app(), u.key, bucket.id, { 'index.html': '<h1>members</h1>' });
    const p = await publishAndWait(app(), u.key, bucket.id, { access_mode: 'require_email' });
    expect(p.password).toBeUndefined();
    expect(p.share_text).toContain('one-time code');
    // The visitor's address is a Cubby mailbox, so the code can be read back through the API.
    const visitor = await app().user();
    const inbox = await mailboxWithAddress(app(), visitor);
    const gate = await siteFetch(p.public_url);
    expect(gate.status).toBe(200);
    expect(gate.headers['x-cubby-access']).toBe('email_required');
    expect(gate.text).toContain('action="/.cubby/email"');
    expect(gate.text).not.toContain('members');
    expect((await siteFetch(`${p.public_url}/.cubby/email`, { method: 'POST', ...form({ email: 'not an email' }) })).status).toBe(422);
    const sent = await siteFetch(`${p.public_url}/.cubby/email`, { method: 'POST', ...form({ email: inbox.address, next: '/' }) });
    expect(sent.status).toBe(200);
    expect(sent.text).toContain('action="/.cubby/code"');
    const mail = await latestEmailText(app(), visitor.key, inbox.id);
    const code = mail!.text.match(/\b(\d{6})\b/)![1]!;
    expect(mail!.subject).toContain(code);
    const bad = await siteFetch(`${p.public_url}/.cubby/code`, { method: 'POST', ...form({ email: inbox.address, code: code === '000000' ? '111111' : '000000', next: '/' }) });
    expect(bad.status).toBe(401);
    const ok = await siteFetch(`${p.public_url}/.cubby/code`, { method: 'POST', ...form({ email: inbox.address, code, next: '/' }) });
    expect(ok.status).toBe(303);
    const cookie = cookieOf(ok);
    expect((await siteFetch(p.public_url, { headers: { cookie } })).text).toContain('members');
    // A code works once.
    expect((await siteFetch(`${p.public_url}/.cubby/code`, { method: 'POST', ...form({ email: inbox.address, code, next: '/' }) })).status).toBe(401);
  });

  it('paid-only settings on the main site: PUBLICATION_UPGRADE_REQUIRED with choices, never a silent public site', async () => {
    const u = await publisher(app(), 'free');
    const bucket = await newBucket(app(), u.key);
    await uploadFolder(app(), u.key, bucket.id, { 'index.html': 'x' });
    const res = await app().request('POST', `/api/v1/buckets/${bucket.id}/publication`, { key: u.key, body: { access_mode: 'password' } });
    const err = expectError(res, 'A', 403, 'PUBLICATION_UPGRADE_REQUIRED');
    expect(res.body.error.upgrade_url).toMatch(/\/settings\/billing$/);
    expect(res.body.error.choices.map((c: any) => c.choice)).toEqual(['preview', 'upgrade', 'public']);
    expect(err.details.upgrade_url).toBe(res.body.error.upgrade_url);
    const list = await app().request('GET', '/api/v1/publications', { key: u.key, query: { bucket_id: bucket.id } });
    expect(list.body.data.publications).toEqual([]);
    expectError(await app().request('POST', `/api/v1/buckets/${bucket.id}/publication`, { key: u.key, body: { access_mode: 'require_email' } }), 'A', 403, 'PUBLICATION_UPGRADE_REQUIRED');
  });

  it('password rules and field checks', async () => {
    const u = await publisher(app());
    const bucket = await newBucket(app(), u.key);
    const post = (body: unknown) => app().request('POST', `/api/v1/buckets/${bucket.id}/publication`, { key: u.key, body });
    expectError(await post({ access_mode: 'password', password: 'short' }), 'A', 422, 'INVALID_ARGUMENT');
    expectError(await post({ access_mode: 'password', password: 'aaaaaaaaaaaa' }), 'A', 422, 'INVALID_ARGUMENT');
    expectError(await post({ access_mode: 'require_email', password: 'a fine password' }), 'A', 422, 'INVALID_ARGUMENT');
    expectError(await post({ access_mode: 'password', password: 'a fine password', regenerate_password: true }), 'A', 422, 'INVALID_ARGUMENT');
    expectError(await post({ regenerate_password: true }), 'A', 422, 'INVALID_ARGUMENT');
    expectError(await post({ access_mode: 'everyone' }), 'A', 422, 'INVALID_ARGUMENT');
    expectError(await post({ publication_root_directory: '../up' }), 'A', 422, 'INVALID_ARGUMENT');
    expectError(await post({ surprise: true }), 'A', 422, 'INVALID_ARGUMENT');
  });

  it('slugs: suggestions, at least 3 characters, reserved and prohibited words refused, unique; rename moves the site', async () => {
    const u = await publisher(app());
    const a = await newBucket(app(), u.key, 'Alpha Site');
    const b = await newBucket(app(), u.key, 'Beta');
    await uploadFolder(app(), u.key, a.id, { 'index.html': 'alpha' });
    await uploadFolder(app(), u.key, b.id, { 'index.html': 'beta' });
    const slug = `alpha-${Math.random().toString(36).slice(2, 7)}`;
    // Unusable suggestions are skipped.
    const pa = await publishAndWait(app(), u.key, a.id, { slug_suggestions: ['ab', 'admin', 'paypal-login', slug] });
    expect(pa.public_slug).toBe(slug);
    const pb = await publishAndWait(app(), u.key, b.id, { slug_suggestions: [slug] });
    expect(pb.public_slug).not.toBe(slug);
    const rename = (id: string, public_slug: string) => app().request('PATCH', `/api/v1/buckets/${id}/custom_domains/public_slug`, { key: u.key, body: { public_slug } });
    expect(expectError(await rename(b.id, 'ab'), 'A', 422, 'INVALID_ARGUMENT').details.reason).toBe('too_short');
    expect(expectError(await rename(b.id, 'www'), 'A', 422, 'INVALID_ARGUMENT').details.reason).toBe('reserved');
    expect(expectError(await rename(b.id, 'preview-x'), 'A', 422, 'INVALID_ARGUMENT').details.reason).toBe('reserved');
    expect(expectError(await rename(b.id, 'my-paypal-help'), 'A', 422, 'INVALID_ARGUMENT').details.reason).toBe('prohibited');
    expect(expectError(await rename(b.id, 'Bad_Slug'), 'A', 422, 'INVALID_ARGUMENT').details.reason).toBe('invalid_characters');
    expectError(await rename(b.id, slug), 'A', 409, 'SITE_SLUG_TAKEN');
    const fresh = `beta-${Math.random().toString(36).slice(2, 7)}`;
    const ok = await rename(b.id, fresh);
    expect(ok.status, ok.text).toBe(200);
    expect(ok.body.data.public_url).toBe(pb.public_url.replace(pb.public_slug, fresh));
    expect((await siteFetch(ok.body.data.public_url)).text).toBe('beta');
    // The old address redirects (test/sites-slug-redirects.test.ts).
    expect((await siteFetch(pb.public_url)).headers.location).toBe(`${ok.body.data.public_url}/`);
    const bucketRead = await app().request('GET', `/api/v1/buckets/${b.id}`, { key: u.key });
    expect(bucketRead.body.data.bucket.public_url).toBe(ok.body.data.public_url);
  });

  it('tenancy: another account\'s publication answers 404', async () => {
    const u = await publisher(app());
    const other = await publisher(app());
    const bucket = await newBucket(app(), u.key);
    await uploadFolder(app(), u.key, bucket.id, { 'index.html': 'x' });
    const p = await publishAndWait(app(), u.key, bucket.id);
    expectError(await app().request('GET', `/api/v1/publications/${p.id}`, { key: other.key }), 'A', 404, 'PUBLICATION_NOT_FOUND');
    expectError(await app().request('DELETE', `/api/v1/buckets/${bucket.id}/publication`, { key: other.key }), 'A', 404, 'BUCKET_NOT_FOUND');
    const theirs = await app().request('GET', '/api/v1/publications', { key: other.key });
    expect(theirs.body.data.publications).toEqual([]);
  });
});
