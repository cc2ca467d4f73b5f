import { expect, it } from 'vitest';
import { describeAccounts, webSignIn } from './account-helpers.ts';
import { GIF_1x1, HOSTILE_SVG, jpegHeader, pngImage } from './image-fixtures.ts';
import { enablePublishing, newBucket, publishAndWait, siteFetch, untilSettled, uploadFolder } from './sites-helpers.ts';
import { collectGarbageBlobs } from '../src/files/purge.service.ts';
import { setAccountStatus } from '../src/accounts/accounts.service.ts';
import type { WebClient } from './web-client.ts';

// Account logos over HTTP: an agency owner brands a client account with an image whose type is
// read from its bytes (never from the name or the declared type); bad images are refused with the
// catalogue's message and change nothing; the logo is served inert to the account's people only,
// and published auto-index listings show it from the site's own origin.

const file = (bytes: Buffer, filename = 'logo.png', contentType = 'image/png') => ({ field: 'logo', filename, contentType, bytes });

async function upload(web: WebClient, accountId: string, f: ReturnType<typeof file> | null, extra: Record<string, string> = {}) {
  return web.submitMultipart(`/account?account=${accountId}`, '/account/logo', { account_id: accountId, ...extra }, f);
}

describeAccounts('account logos', (env) => {
  it('an agency owner uploads, replaces and removes a client account’s logo; bad images change nothing', async () => {
    const { app } = env();
    const owner = await app.user({ plan: 'agency', name: 'Agency Owner' });
    const web = await webSignIn(app, owner.email);
    const created = await web.submit(`/account?account=${owner.accountId}`, '/account/clients', { account_id: owner.accountId, client_account_name: 'Acme Corp' });
    const clientId = new URL(created.location!, app.base).searchParams.get('account')!;
    const page = await web.get(`/account?account=${clientId}`);
    expect(page.text).toContain('Upload a logo');
    expect(page.text).toContain('enctype="multipart/form-data"');
    const db = app.started.deps.db;
    const logoOf = async () => db.selectFrom('accounts').select(['logo_sha256', 'logo_content_type']).where('id', '=', clientId).executeTakeFirstOrThrow();

    // Refused, whatever the name and declared type say.
    const cases: [string, ReturnType<typeof file> | null, number, string][] = [
      ['an SVG (script inside) named .png', file(HOSTILE_SVG), 415, 'PNG, JPEG or WebP'],
      ['an SVG declared as SVG', file(HOSTILE_SVG, 'logo.svg', 'image/svg+xml'), 415, 'SVG is not accepted'],
      ['text named .png', file(Buffer.from('not an image at all'), 'logo.png'), 415, 'PNG, JPEG or WebP'],
      ['a GIF', file(GIF_1x1, 'logo.gif', 'image/gif'), 415, 'PNG, JPEG or WebP'],
      ['too small', file(pngImage(8, 8)), 422, 'between 16 and 2048 pixels'],
      ['too wide', file(pngImage(4000, 16)), 422, 'between 16 and 2048 pixels'],
      ['too large', file(Buffer.concat([pngImage(32, 32), Buffer.alloc(600 * 1024)])), 413, 'larger than 512 KB'],
      ['no file', null, 415, 'Choose an image file'],
    ];
    for (const [what, f, status, message] of cases) {
      const res = await upload(web, clientId, f);
      expect(res.status, what).toBe(status);
      expect(res.text, what).toContain(message);
    }
    // Without the form's CSRF token.
    const forged = await upload(web, clientId, file(pngImage(64, 64)), { _csrf: 'forged' });
    expect(forged.status).toBe(403);
    expect(forged.text).toContain('This form has expired');
    expect(await logoOf()).toEqual({ logo_sha256: null, logo_content_type: null });

    // A PNG: saved, previewed on the page, served with its sniffed type only and inert.
    const png = pngImage(64, 64);
    const saved = await upload(web, clientId, file(png, 'whatever.bin', 'application/octet-stream'));
    expect(saved.status, saved.text).toBe(303);
    expect(saved.location).toBe(`/account?account=${clientId}&done=logo`);
    expect((await logoOf()).logo_content_type).toBe('image/png');
    const after = await web.get(saved.location!);
    expect(after.text).toContain('Logo saved');
    expect(after.text).toMatch(new RegExp(`<img class="logo-preview" src="/account/logo\\?account=${clientId}&amp;v=[0-9a-f]{12}"`));
    const served = await web.get(`/account/logo?account=${clientId}`);
    expect(served.status).toBe(200);
    expect(served.headers.get('content-type')).toBe('image/png');
    expect(served.headers.get('x-content-type-options')).toBe('nosniff');
    expect(served.headers.get('content-security-policy')).toContain('sandbox');
    expect(served.bytes.equals(png)).toBe(true);
    // The blob collector keeps a logo that an account names (no site uses it here), however old.
    await collectGarbageBlobs(db, app.started.deps.blobs, new Date(Date.now() + 40 * 86400_000));
    expect((await web.get(`/account/logo?account=${clientId}`)).bytes.equals(png)).toBe(true);
    // Someone else: the same 404 as an account without a logo.
    const stranger = await app.user();
    const sweb = await webSignIn(app, stranger.email);
    expect((await sweb.get(`/account/logo?account=${clientId}`)).status).toBe(404);
    // Nor can they change it (a foreign account answers like a missing one), and a collaborator is refused.
    const foreign = await upload(sweb, clientId, file(pngImage(32, 32)));
    expect(foreign.status).toBe(404);
    const collaborator = await app.user();
    await db.insertInto('memberships').values({ id: `mem_${collaborator.userId.slice(4)}c`, account_id: clientId, user_id: collaborator.userId, role: 'collaborator', created_at: new Date().toISOString() }).execute();
    const cweb = await webSignIn(app, collaborator.email);
    expect((await cweb.get(`/account/logo?account=${clientId}`)).status).toBe(200);
    const refused = await upload(cweb, clientId, file(pngImage(32, 32)));
    expect(refused.status).toBe(403);
    expect(refused.text).toContain('Only an owner or administrator');
    const removeRefused = await cweb.submit(`/account?account=${clientId}`, '/account/logo/remove', { account_id: clientId });
    expect(removeRefused.status).toBe(403);
    expect((await db.selectFrom('accounts').select('logo_sha256').where('id', '=', clientId).executeTakeFirstOrThrow()).logo_sha256).not.toBeNull();

    // Replace with a JPEG (recognised from its bytes), then remove.
    expect((await upload(web, clientId, file(jpegHeader(120, 80), 'logo.png', 'image/png'))).status).toBe(303);
    expect((await logoOf()).logo_content_type).toBe('image/jpeg');
    expect((await web.get(`/account/logo?account=${clientId}`)).headers.get('content-type')).toBe('image/jpeg');
    const removed = await web.submit(`/account?account=${clientId}`, '/account/logo/remove', { account_id: clientId });
    expect(removed.status).toBe(303);
    expect(await logoOf()).toEqual({ logo_sha256: null, logo_content_type: null });
    expect((await web.get(`/account/logo?account=${clientId}`)).status).toBe(404);
    const actions = await db.selectFrom('activity').select('action').where('account_id', '=', clientId).where('action', 'like', 'account.logo%').execute();
    expect(actions.map((a) => a.action).sort()).toEqual(['account.logo_remove', 'account.logo_update', 'account.logo_update']);

    // A read-only account keeps its branding as it is, like every other change.
    await setAccountStatus(db, clientId, 'read_only', 'test', new Date());
    const readOnly = await upload(web, clientId, file(pngImage(64, 64)));
    expect(readOnly.status).toBe(423);
    expect(await logoOf()).toEqual({ logo_sha256: null, logo_content_type: null });
    await setAccountStatus(db, clientId, 'active', null, new Date());
  });

  it('published file listings show the logo from the site’s own origin, and the initial again once removed', async () => {
    const { app } = env();
    const owner = await app.user({ plan: 'paid', name: 'Publisher' });
    await enablePublishing(app, owner.accountId);
    const db = app.started.deps.db;
    await db.updateTable('accounts').set({ name: 'Zeta Studio' }).where('id', '=', owner.accountId).execute();
    const bucket = await newBucket(app, owner.key, 'Brand files');
    await uploadFolder(app, owner.key, bucket.id, { 'notes.txt': 'hello', 'docs/readme.md': '# Docs' });
    const first = await publishAndWait(app, owner.key, bucket.id);
    expect(first.publish_state).toBe('ready');
    const before = await siteFetch(first.public_url);
    expect(before.text).toContain('<span class="account-logo" aria-hidden="true">Z</span>');

    const web = await webSignIn(app, owner.email);
    const png = pngImage(48, 48, [200, 40, 40]);
    expect((await upload(web, owner.accountId, file(png))).status).toBe(303);
    // The live site was queued for a rebuild with the new branding; it keeps serving meanwhile.
    const rebuilt = await untilSettled(app, owner.key, first.id);
    expect(rebuilt.publish_state).toBe('ready');
    const home = await siteFetch(first.public_url);
    expect(home.text).toContain('<img class="account-logo" src="/.cubby/account-logo.png" alt="Zeta Studio">');
    // Sub-folder listings name the same file at the site root.
    expect((await siteFetch(`${first.public_url}/docs/`)).text).toContain('src="/.cubby/account-logo.png"');
    const logo = await siteFetch(`${first.public_url}/.cubby/account-logo.png`);
    expect(logo.status).toBe(200);
    expect(logo.headers['content-type']).toBe('image/png');
    expect(logo.headers['x-content-type-options']).toBe('nosniff');
    expect(logo.body.equals(png)).toBe(true);

    expect((await web.submit(`/account?account=${owner.accountId}`, '/account/logo/remove', { account_id: owner.accountId })).status).toBe(303);
    await untilSettled(app, owner.key, first.id);
    const plain = await siteFetch(first.public_url);
    expect(plain.text).toContain('<span class="account-logo" aria-hidden="true">Z</span>');
    expect((await siteFetch(`${first.public_url}/.cubby/account-logo.png`)).status).toBe(404);
  });
});
