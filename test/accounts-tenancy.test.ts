import { expect, it } from 'vitest';
import { describeAccounts, linkIn, mailTo, webSignIn } from './account-helpers.ts';
import { newMailbox, uploadFile } from './files-helpers.ts';

// A collaborator limited to one mailbox: every list made for them (the home page, the search page
// and GET /v1/search over everything, the key form's mailbox choices, GET /v1/mailboxes, the status
// onboarding state) offers exactly what opening answers 200 to, never the mailbox that answers 404.
// Regression: the search over every reachable account ignored the collaborator's limit, so file
// names and snippets of the other mailboxes of that account were found.

describeAccounts('a collaborator limited to one mailbox', (env) => {
  it('is shown, and finds, only the mailbox they can open', async () => {
    const { app, sink } = env();
    const owner = await app.user({ name: 'Owner' });
    const tag = `zqt${owner.userId.slice(-6).toLowerCase()}`;
    const shared = await newMailbox(app, owner.key, `Shared ${tag}`);
    const hidden = await newMailbox(app, owner.key, `Private ${tag}`);
    expect((await uploadFile(app, owner.key, shared.id, `${tag}-shared.txt`, 'shared notes')).status).toBe(201);
    expect((await uploadFile(app, owner.key, hidden.id, `${tag}-private.txt`, 'private notes')).status).toBe(201);

    // Carol has an account of her own (with a mailbox) and joins the owner's for "Shared" only.
    const carol = await app.user({ email: `carol-${tag}@example.com`, name: 'Carol' });
    const own = await newMailbox(app, carol.key, `Carol's own ${tag}`);
    expect((await uploadFile(app, carol.key, own.id, `${tag}-own.txt`, 'my notes')).status).toBe(201);
    const ownerWeb = await webSignIn(app, owner.email);
    const page = await ownerWeb.get(`/account/members?account=${owner.accountId}`);
    const sent = await ownerWeb.request('POST', '/account/members/invite', { _csrf: page.text.match(/name="_csrf" value="([^"]+)"/)![1]!, account_id: owner.accountId, email: carol.email, role: 'collaborator', mailbox_ids: shared.id });
    expect(sent.status).toBe(303);
    const link = linkIn((await mailTo(sink, carol.email, /invited you/)).text, app, '/invitations/');
    const web = await webSignIn(app, carol.email);
    expect((await web.submit(link, link, {})).status).toBe(303);

    // Opening: the rule every list below must agree with.
    expect((await web.get(`/mailboxes/${shared.id}`)).status).toBe(200);
    expect((await web.get(`/mailboxes/${hidden.id}`)).status).toBe(404);

    // Home page of the owner's account: one mailbox, counted as one.
    const home = await web.get(`/?account=${owner.accountId}`);
    expect(home.status).toBe(200);
    expect(home.text).toContain(`Shared ${tag}`);
    expect(home.text).not.toContain(hidden.id);
    expect(home.text).not.toContain(`Private ${tag}`);
    expect(home.text).toMatch(/Active <span class="tag">1<\/span>/);
    // Filtering by title cannot reveal it either.
    expect((await web.get(`/?account=${owner.accountId}&q=Private`)).text).not.toContain(hidden.id);

    // The search page covers all of Carol's accounts: her own mailbox and "Shared", not "Private".
    const found = await web.get(`/search?q=${encodeURIComponent(`filename:${tag}`)}`);
    expect(found.status).toBe(200);
    expect(found.text).toContain(`${tag}-shared.txt`);
    expect(found.text).toContain(`${tag}-own.txt`);
    expect(found.text).not.toContain(`${tag}-private.txt`);
    expect(found.text).not.toContain(hidden.id);
    // Naming the hidden mailbox answers like a missing one.
    const named = await web.get(`/search?q=${encodeURIComponent(`filename:${tag}`)}&mailbox=${hidden.id}`);
    expect(named.status).toBe(404);
    expect(named.text).not.toContain(`${tag}-private.txt`);

    // The key form offers the mailboxes Carol can reach, in both accounts.
    const keys = await web.get('/settings/api_keys');
    expect(keys.text).toContain(shared.id);
    expect(keys.text).toContain(own.id);
    expect(keys.text).not.toContain(hidden.id);
    expect(keys.text).not.toContain(`Private ${tag}`);

    // Her key for the owner's account: the API's lists agree.
    const key = await app.key({ ...carol, accountId: owner.accountId });
    const list = await app.request('GET', '/v1/mailboxes', { key });
    expect(list.body.data.mailboxes.map((b: any) => b.id)).toEqual([shared.id]);
    const search = await app.request('GET', '/v1/search', { key, query: { q: `filename:${tag}` } });
    expect(search.status, search.text).toBe(200);
    expect(search.body.data.results.map((r: any) => r.mailbox_id)).toEqual([shared.id]);
    const a = await app.request('GET', '/api/v1/search', { key, query: { q: `filename:${tag}` } });
    expect(a.body.data.results.map((r: any) => r.mailbox_id ?? r.bucket_id)).toEqual([shared.id]);
    expect((await app.request('GET', '/v1/search', { key, query: { q: `filename:${tag}`, mailbox_id: hidden.id } })).status).toBe(404);

    // When the limit names no live mailbox, the status says nothing is visible, and home lists none.
    const db = app.started.deps.db;
    const status = await app.request('GET', '/api/v1/status', { key });
    expect(status.body.data.onboarding.state).toBe('active');
    await db.updateTable('membership_mailboxes').set({ mailbox_id: 'bkt_gone000000000000000000000' }).where('user_id', '=', carol.userId).execute();
    const none = await app.request('GET', '/api/v1/status', { key });
    expect(none.body.data.onboarding.state).toBe('no_visible_buckets');
    expect((await web.get(`/?account=${owner.accountId}`)).text).not.toContain(shared.id);
  });
});
