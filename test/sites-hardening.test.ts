import { beforeAll, expect, it } from 'vitest';
import { describeEachDatabase } from './harness.ts';
import { form, newBucket, publishAndWait, publisher, siteFetch, siteFetchRaw, uploadFolder } from './sites-helpers.ts';

// The sites server against hostile requests: raw (un-normalised) traversal paths, a malformed
// Origin on the access forms, and access cookies replayed on another site.

/** A request with the path sent exactly as written (URL would normalise `..` and `%2e%2e`). */
describeEachDatabase('sites: hostile requests', (app) => {
  let site: any;
  beforeAll(async () => {
    const u = await publisher(app());
    const bucket = await newBucket(app(), u.key, 'Rooted');
    // Only public/ is served; secret.txt sits beside it in the bucket.
    await uploadFolder(app(), u.key, bucket.id, { 'public/index.html': '<h1>root</h1>', 'public/a/page.html': 'page', 'public/文档 1/index.html': 'docs', 'secret.txt': 'TOP SECRET' });
    site = await publishAndWait(app(), u.key, bucket.id, { publication_root_directory: 'public' });
    expect(site.publish_state).toBe('ready');
  });

  it('traversal in every spelling stays inside the served root', async () => {
    const paths = [
      '/../secret.txt',
      '/a/../../secret.txt',
      '/%2e%2e/secret.txt',
      '/%2E%2E/secret.txt',
      '/a/%2e%2e/%2e%2e/secret.txt',
      '/..%2fsecret.txt',
      '/..%5csecret.txt',
      '/..\\secret.txt',
      '/a\\..\\..\\secret.txt',
      '/%2e%2e%5c%2e%2e%5csecret.txt',
      '/secret.txt%00.html',
      '/%00',
      '/%c0%ae%c0%ae/secret.txt',
      '/%c0%af..%c0%afsecret.txt',
      '/%e0%80%ae%e0%80%ae/secret.txt',
      '/%252e%252e/secret.txt',
      '/./secret.txt',
      '//secret.txt',
      '/public/../secret.txt',
      '/secret.txt',
    ];
    for (const p of paths) {
      const res = await siteFetchRaw(site.public_url, p);
      expect([400, 404], `${p} → ${res.status}`).toContain(res.status);
      expect(res.text, p).not.toContain('TOP SECRET');
    }
    // Decoded dot segments and NUL are refused outright, not looked up.
    for (const p of ['/%2e%2e/secret.txt', '/a/%2e/page.html', '/secret.txt%00.html', '/%c0%ae%c0%ae/secret.txt']) {
      expect((await siteFetchRaw(site.public_url, p)).status, p).toBe(400);
    }
    expect((await siteFetchRaw(site.public_url, '/a/page.html')).text).toBe('page');
  });

  it('a folder with a non-ASCII name redirects to its slash form with a percent-encoded Location', async () => {
    const res = await siteFetchRaw(site.public_url, '/%E6%96%87%E6%A1%A3%201?x=1');
    expect(res.status).toBe(301);
    expect(res.headers.location).toBe('/%E6%96%87%E6%A1%A3%201/?x=1');
    expect((await siteFetchRaw(site.public_url, res.headers.location!)).text).toBe('docs');
  });

  it('a malformed Origin on an access form is refused, not a server error', async () => {
    const u = await publisher(app());
    const bucket = await newBucket(app(), u.key, 'Guarded');
    await uploadFolder(app(), u.key, bucket.id, { 'index.html': '<h1>guarded</h1>' });
    const p = await publishAndWait(app(), u.key, bucket.id, { access_mode: 'password' });
    for (const origin of ['garbage', 'http://', '://x']) {
      const res = await siteFetch(`${p.public_url}/.cubby/password`, { method: 'POST', headers: { ...form({}).headers, origin }, body: form({ password: p.password }).body });
      expect(res.status, origin).toBe(403);
      expect(res.headers['set-cookie']).toBeUndefined();
    }
    // A `next` with characters a header cannot carry is percent-encoded, not a server error.
    const signIn = (next: string) => siteFetch(`${p.public_url}/.cubby/password`, { method: 'POST', ...form({ password: p.password, next }) });
    const unicode = await signIn('/文档 1/?q=ü');
    expect(unicode.status).toBe(303);
    expect(unicode.headers.location).toBe('/%E6%96%87%E6%A1%A3%201/?q=%C3%BC');
  });

  it('an access cookie works only on the site that set it', async () => {
    const u = await publisher(app());
    const a = await newBucket(app(), u.key, 'Site A');
    const b = await newBucket(app(), u.key, 'Site B');
    await uploadFolder(app(), u.key, a.id, { 'index.html': '<h1>a</h1>' });
    await uploadFolder(app(), u.key, b.id, { 'index.html': '<h1>b</h1>' });
    const pa = await publishAndWait(app(), u.key, a.id, { access_mode: 'password', password: 'same password here' });
    const pb = await publishAndWait(app(), u.key, b.id, { access_mode: 'password', password: 'same password here' });
    const ok = await siteFetch(`${pa.public_url}/.cubby/password`, { method: 'POST', ...form({ password: 'same password here', next: '/' }) });
    expect(ok.status).toBe(303);
    const setCookie = (ok.headers['set-cookie'] as string[])[0]!;
    // Host-only: no Domain attribute, so a browser never sends it to another site.
    expect(setCookie).not.toMatch(/domain=/i);
    const cookie = setCookie.split(';')[0]!;
    expect((await siteFetch(pa.public_url, { headers: { cookie } })).status).toBe(200);
    // Replayed by hand on another site of the same owner, with the same password: still refused.
    const replay = await siteFetch(pb.public_url, { headers: { cookie } });
    expect(replay.headers['x-cubby-access']).toBe('password_required');
    expect(replay.text).not.toContain('<h1>b</h1>');
  });
});
