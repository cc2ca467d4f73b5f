import { expect, it } from 'vitest';
import { describeEachDatabase } from './harness.ts';
import { inbox, receive } from './emails-helpers.ts';
import { member } from './factories.ts';
import { signedIn } from './agent-helpers.ts';
import { csrfOf } from './web-client.ts';

// The workspace's permissions over HTTP: controls a person may not use are not shown, and a POST
// sent anyway is refused by the same services as the API, changing nothing.

describeEachDatabase('dashboard workspace permissions', (app) => {
  it('a read-only account shows no write controls and refuses every change posted anyway', async () => {
    const owner = await app().user({ name: 'Read Only Owner' });
    const box = await inbox(app(), owner);
    const id = await receive(app(), box, { subject: 'Kept' });
    const c = await signedIn(app(), owner);
    const home = await c.get('/');
    await app().started.deps.db.updateTable('accounts').set({ status: 'read_only' }).where('id', '=', owner.accountId).execute();
    const token = csrfOf(home.text);

    const pages = await Promise.all(['/', `/mailboxes/${box.id}`, `/mailboxes/${box.id}/emails/${id}`, `/mailboxes/${box.id}/files`, `/mailboxes/${box.id}/settings`].map((p) => c.get(p)));
    for (const p of pages) {
      expect(p.status).toBe(200);
      expect(p.text).not.toMatch(/>New mailbox<|>Compose<|>Reply<|>Delete email<|data-upload=|>Save<|>Archive</);
    }
    expect(pages[0]!.text).toContain('read-only');

    const posts = await Promise.all([
      c.request('POST', '/mailboxes/new', { _csrf: token, account_id: owner.accountId, title: 'Sneaky' }),
      c.request('POST', `/mailboxes/${box.id}/compose`, { _csrf: token, to: owner.email, subject: 'x', text: 'y' }),
      c.request('POST', `/mailboxes/${box.id}/emails/${id}/delete`, { _csrf: token }),
      c.request('POST', `/mailboxes/${box.id}/archive`, { _csrf: token }),
      c.request('POST', `/mailboxes/${box.id}/settings/general`, { _csrf: token, title: 'Renamed' }),
      c.request('POST', `/mailboxes/${box.id}/files/sessions`, undefined, { 'x-csrf-token': token }),
      c.request('POST', `/mailboxes/${box.id}/files/sessions/bus_0000000000/files?path=a.txt`, undefined, { 'content-type': 'application/octet-stream', 'x-csrf-token': token }),
    ]);
    expect(posts.map((r) => r.status)).toEqual([423, 423, 423, 423, 423, 423, 423]);
    expect(JSON.parse(posts[5]!.text)).toMatchObject({ code: 'ACCOUNT_READ_ONLY' });
    // Without the page's CSRF token an upload is not even looked at.
    expect((await c.request('POST', `/mailboxes/${box.id}/files/sessions`)).status).toBe(403);
    const sessions = await app().started.deps.db.selectFrom('upload_sessions').select('id').where('mailbox_id', '=', box.id).execute();
    expect(sessions).toEqual([]);
    expect(posts[1]!.text).toContain('read-only');
    const after = await app().request('GET', `/v1/mailboxes/${box.id}`, { key: owner.key });
    expect(after.body.data.mailbox).toMatchObject({ title: expect.not.stringMatching(/Renamed/) });
    expect(after.body.data.mailbox.email.message_count ?? 1).toBe(1);
    const list = await app().request('GET', '/v1/mailboxes', { key: owner.key });
    expect(list.body.data.mailboxes.map((m: { title: string }) => m.title)).not.toContain('Sneaky');
  });

  it('a collaborator works with mail but sees no admin controls, and an admin POST is refused', async () => {
    const owner = await app().user();
    const box = await inbox(app(), owner);
    const id = await receive(app(), box, { subject: 'Team mail' });
    const collab = await member(app(), owner.accountId, 'collaborator');
    const c = await signedIn(app(), collab);
    const email = await c.get(`/mailboxes/${box.id}/emails/${id}`);
    expect(email.text).toContain('>Reply<');
    expect(email.text).not.toContain('Delete email');
    const settings = await c.get(`/mailboxes/${box.id}/settings`);
    expect(settings.text).not.toContain('Set webhook');
    const del = await c.submit(email, `/mailboxes/${box.id}/emails/${id}/delete`, {});
    expect(del.status).toBe(403);
    expect((await c.get(`/mailboxes/${box.id}/emails/${id}`)).status).toBe(200);
    const hook = await c.submit(settings, `/mailboxes/${box.id}/settings/webhook`, { url: 'https://example.com/hook' });
    expect(hook.status).toBe(403);
  });

  it('an email of another mailbox, a file of another person and the live ticket of a foreign mailbox all answer 404', async () => {
    const a = await app().user();
    const b = await app().user();
    const boxA = await inbox(app(), a);
    const idA = await receive(app(), boxA, { subject: 'Private' });
    const c = await signedIn(app(), b);
    for (const path of [`/mailboxes/${boxA.id}`, `/mailboxes/${boxA.id}/emails/${idA}`, `/mailboxes/${boxA.id}/emails/${idA}/body.html`, `/mailboxes/${boxA.id}/live`, `/mailboxes/${boxA.id}/files`, `/mailboxes/${boxA.id}/site`, `/mailboxes/${boxA.id}/settings`]) {
      const r = await c.get(path);
      expect(r.status, path).toBe(404);
      expect(r.text).not.toContain('Private');
    }
    const missing = await c.get('/no/such/page');
    expect(missing.status).toBe(404);
    expect(missing.text).toContain('Page not found');
  });
});
