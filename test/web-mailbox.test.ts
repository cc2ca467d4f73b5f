import { expect, it } from 'vitest';
import MailComposer from 'nodemailer/lib/mail-composer';
import { describeEachDatabase, type TestApp, type TestUser } from './harness.ts';
import { WebClient } from './web-client.ts';
import { labelNow } from './smtp-helpers.ts';
import { GTUBE, inbox, receive, type Box } from './emails-helpers.ts';
import { uploadFile } from './files-helpers.ts';
import { dbOf, member } from './factories.ts';

// The dashboard's mailbox page (every mailbox's `dashboard_url`) and email page, over real HTTP
// with real sign-in, mail arriving over SMTP.

const PASSWORD = 'a long test password'; // what app().user() registers with

async function signedIn(app: TestApp, user: TestUser): Promise<WebClient> {
  const c = new WebClient(app.base);
  const res = await c.signIn(user.email, PASSWORD);
  expect(res.status).toBe(303);
  return c;
}

async function unreadCount(app: TestApp, user: TestUser, box: Box): Promise<number> {
  const res = await app.request('GET', `/v1/mailboxes/${box.id}`, { key: user.key });
  expect(res.status, res.text).toBe(200);
  return res.body.data.mailbox.email.unread_count;
}

/** The decoded href of the link whose text is `text`. */
function linkTo(page: string, text: string): string {
  const escaped = text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const m = page.match(new RegExp(`<a (?:class="[^"]*" )?href="([^"]+)"[^>]*>(?:<code>)?${escaped}<`));
  if (!m) throw new Error(`no link "${text}" on the page`);
  return m[1]!.replace(/&amp;/g, '&');
}

describeEachDatabase('dashboard mailbox and email pages', (app) => {
  it('shows the mailbox and an email escaped, with working download links, and marks read only on request', async () => {
    const user = await app().user({ name: 'Mail Reader' });
    const box = await inbox(app(), user);
    const saved = await uploadFile(app(), user.key, box.id, 'notes.md', '# notes');
    expect(saved.status, saved.text).toBe(201);
    const attachment = Buffer.from('attachment bytes \u00e9 123');
    // Composed here and sent as is: given to nodemailer as `cc`, the foreign address would also
    // be an envelope recipient, which our server refuses.
    const raw = await new MailComposer({
      from: 'Eve <eve@example.com>',
      to: box.address,
      cc: 'Carol <carol@example.org>',
      subject: '<script>alert(1)</script> Quarterly',
      text: 'Hello <script>steal()</script> & goodbye',
      html: '<p>HTML <img src=x onerror=alert(2)></p>',
      attachments: [{ filename: 'report.txt', content: attachment, contentType: 'text/plain' }],
    })
      .compile()
      .build();
    const id = await receive(app(), box, { from: 'eve@example.com', raw });
    await labelNow(app());

    const c = await signedIn(app(), user);
    const home = await c.get('/');
    expect(home.text).toContain(`href="/mailboxes/${box.id}"`);

    const page = await c.get(`/mailboxes/${box.id}`);
    expect(page.status).toBe(200);
    expect(page.text).toContain('&lt;script&gt;alert(1)&lt;/script&gt; Quarterly');
    expect(page.text).not.toMatch(/<script(?! src="\/assets\/app\.js\?v=\w+" defer>)/i);
    expect(page.text).toContain(`<code>${box.address}</code>`);
    expect(page.text).toContain('<span id="unread-count">1</span> unread');
    expect(page.text).toContain(`href="/mailboxes/${box.id}/emails/${id}"`);
    expect(page.text).toContain('Eve');
    // The files tab lists the top level: the read-only _email/ folder and the file, whose page
    // links to a signed download that needs no cookie.
    const files = await c.get(`/mailboxes/${box.id}/files`);
    expect(files.text).toContain('_email/</a>');
    expect(files.text).toContain('read-only');
    const notesPage = await c.get(linkTo(files.text, 'notes.md'));
    expect(notesPage.status).toBe(200);
    const notes = await fetch(linkTo(notesPage.text, 'Download'));
    expect(notes.status).toBe(200);
    expect(await notes.text()).toBe('# notes');

    const emailPath = `/mailboxes/${box.id}/emails/${id}`;
    const detail = await c.get(emailPath);
    expect(detail.status).toBe(200);
    expect(detail.text).not.toMatch(/<script(?! src="\/assets\/app\.js\?v=\w+" defer>)|<img/i);
    // The text view shows the plain body escaped (the HTML view shows a sandboxed frame instead).
    expect((await c.get(`${emailPath}?view=text`)).text).toContain('Hello &lt;script&gt;steal()&lt;/script&gt; &amp; goodbye');
    expect(detail.text).toContain('Carol');
    expect(detail.text).toContain('carol@example.org');
    expect(detail.text).toContain('SPF:');
    expect(detail.text).toContain('Mark as read');
    expect(detail.headers.get('content-security-policy')).toContain("default-src 'none'");
    // Reading never marks read.
    expect(await unreadCount(app(), user, box)).toBe(1);

    const att = await fetch(linkTo(detail.text, 'report.txt'));
    expect(att.status).toBe(200);
    expect(Buffer.from(await att.arrayBuffer()).equals(attachment)).toBe(true);
    const eml = await fetch(linkTo(detail.text, 'Download original (.eml)'));
    expect(eml.status).toBe(200);
    expect(eml.headers.get('content-type')).toMatch(/message\/rfc822/);
    expect(await eml.text()).toContain('Quarterly');

    const read = await c.submit(detail, `${emailPath}/read`, {});
    expect(read.status).toBe(303);
    expect(read.location).toBe(emailPath);
    expect(await unreadCount(app(), user, box)).toBe(0);
    const after = await c.get(emailPath);
    expect(after.text).toContain('Mark as unread');
    // Marking an already read email changes nothing.
    expect((await c.submit(detail, `${emailPath}/read`, {})).status).toBe(303);
    expect(await unreadCount(app(), user, box)).toBe(0);
    expect((await c.submit(after, `${emailPath}/unread`, {})).status).toBe(303);
    expect(await unreadCount(app(), user, box)).toBe(1);
    // Without a CSRF token nothing changes.
    expect((await c.request('POST', `${emailPath}/read`, { x: '1' })).status).toBe(403);
    expect(await unreadCount(app(), user, box)).toBe(1);
  });

  it('answers 404 to another person and to unknown ids, and sends signed-out visitors to sign in', async () => {
    const user = await app().user();
    const box = await inbox(app(), user);
    const id = await receive(app(), box, { subject: 'Private' });
    const emailPath = `/mailboxes/${box.id}/emails/${id}`;

    const stranger = new WebClient(app().base);
    expect((await stranger.signUp({ email: `stranger-${Date.now()}@example.com` })).status).toBe(303);
    for (const path of [`/mailboxes/${box.id}`, emailPath]) {
      const res = await stranger.get(path);
      expect(res.status).toBe(404);
      expect(res.text).not.toContain('Private');
    }
    expect((await stranger.submit('/', `${emailPath}/read`, {})).status).toBe(404);
    expect(await unreadCount(app(), user, box)).toBe(1);

    const owner = await signedIn(app(), user);
    expect((await owner.get('/mailboxes/bkt_doesnotexist')).status).toBe(404);
    expect((await owner.get('/mailboxes/not-an-id')).status).toBe(404);
    expect((await owner.get(`/mailboxes/${box.id}/emails/eml_doesnotexist`)).status).toBe(404);
    // An email of another mailbox, even of the same person, is not found through this one.
    const other = await inbox(app(), user);
    expect((await owner.get(`/mailboxes/${other.id}/emails/${id}`)).status).toBe(404);

    const anonymous = new WebClient(app().base);
    const res = await anonymous.get(emailPath);
    expect(res.status).toBe(303);
    expect(res.location).toBe(`/users/sign_in?next=${encodeURIComponent(emailPath)}`);
  });

  it('every dashboard page, error pages included, is framed by nobody, cached by nobody and leaks no Referer elsewhere', async () => {
    const user = await app().user();
    const box = await inbox(app(), user);
    const id = await receive(app(), box, { subject: 'Headers' });
    const c = await signedIn(app(), user);
    const cookie = (await new WebClient(app().base).signIn(user.email, PASSWORD)).setCookies.find((l) => l.startsWith('cubby_session='));
    expect(cookie).toMatch(/; HttpOnly/);
    expect(cookie).toMatch(/; SameSite=Lax/);
    const pages = ['/', '/settings/api_keys', '/settings/connections', '/oauth/device', `/mailboxes/${box.id}`, `/mailboxes/${box.id}/emails/${id}`, '/mailboxes/bkt_missing', `/mailboxes/${box.id}/emails/eml_missing`];
    const responses = [...(await Promise.all(pages.map((p) => c.get(p)))), await new WebClient(app().base).get('/users/sign_in'), await c.request('POST', `/mailboxes/${box.id}/emails/${id}/read`, { _csrf: 'forged' })];
    expect(responses.map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 200, 404, 404, 200, 403]);
    for (const r of responses) {
      const csp = r.headers.get('content-security-policy') ?? '';
      expect(csp).toContain("default-src 'none'");
      expect(csp).toContain("frame-ancestors 'none'");
      expect(csp).toMatch(/form-action 'self'(;|$)/);
      // Scripts and styles only from our own origin: nothing inline, nothing from elsewhere.
      expect(csp).toContain("script-src 'self'");
      expect(csp).not.toMatch(/unsafe-inline|unsafe-eval|https?:/);
      expect(r.headers.get('x-frame-options')).toBe('DENY');
      expect(r.headers.get('referrer-policy')).toBe('same-origin');
      expect(r.headers.get('cache-control')).toBe('no-store');
      expect(r.headers.get('x-content-type-options')).toBe('nosniff');
    }
  });

  it('a collaborator reads and marks read like through the API; a removed member gets the 404 at once', async () => {
    const owner = await app().user();
    const box = await inbox(app(), owner);
    const id = await receive(app(), box, { subject: 'For the team' });
    const collab = await member(app(), owner.accountId, 'collaborator');
    const c = await signedIn(app(), collab);
    const emailPath = `/mailboxes/${box.id}/emails/${id}`;
    const detail = await c.get(emailPath);
    expect(detail.status).toBe(200);
    expect(detail.text).toContain('For the team');
    expect((await c.submit(detail, `${emailPath}/read`, {})).status).toBe(303);
    expect(await unreadCount(app(), owner, box)).toBe(0);

    await dbOf(app()).deleteFrom('memberships').where('user_id', '=', collab.userId).where('account_id', '=', owner.accountId).execute();
    expect((await c.get(`/mailboxes/${box.id}`)).status).toBe(404);
    const gone = await c.get(emailPath);
    expect(gone.status).toBe(404);
    expect(gone.text).not.toContain('For the team');
    expect((await c.submit(detail, `${emailPath}/unread`, {})).status).toBe(404);
    expect(await unreadCount(app(), owner, box)).toBe(0);
  });

  it('shows Junk mail in full to the person, with a Junk badge', async () => {
    const user = await app().user();
    const box = await inbox(app(), user);
    const id = await receive(app(), box, { from: 'Spammer <win@prizes.example>', subject: 'You won', text: `Claim now ${GTUBE}` });
    await labelNow(app());
    const api = await app().request('GET', `/v1/mailboxes/${box.id}/emails/${id}`, { key: user.key });
    expect(api.body.data.email.withheld).toBe(true);

    const c = await signedIn(app(), user);
    const detail = await c.get(`/mailboxes/${box.id}/emails/${id}`);
    expect(detail.status).toBe(200);
    expect(detail.text).toContain('You won');
    expect(detail.text).toContain('Claim now');
    expect(detail.text).toContain('Spammer');
    expect(detail.text).toMatch(/<span class="tag bad">Junk<\/span>/);
  });

  it('pages through more than one page of email, older and newer', async () => {
    const user = await app().user();
    const box = await inbox(app(), user);
    const ids: string[] = [];
    for (let i = 0; i < 52; i++) ids.push(await receive(app(), box, { subject: `Number ${i}` }));
    const c = await signedIn(app(), user);
    const first = await c.get(`/mailboxes/${box.id}`);
    const shown = (text: string) => [...text.matchAll(/\/emails\/(eml_[A-Za-z0-9]+)"/g)].map((m) => m[1]);
    expect(shown(first.text)).toEqual(ids.slice(2).reverse());
    expect(first.text).not.toContain('Newer');
    const older = await c.get(linkTo(first.text, 'Older →'));
    expect(shown(older.text)).toEqual([ids[1], ids[0]]);
    expect(older.text).not.toContain('Older →');
    const newer = await c.get(linkTo(older.text, '← Newer'));
    expect(shown(newer.text)).toEqual(ids.slice(2).reverse());
  });
});
