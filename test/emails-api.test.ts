import { expect, it } from 'vitest';
import { describeEachDatabase } from './harness.ts';
import { labelNow } from './smtp-helpers.ts';
import { emailsPath, ids, inbox, list, mailboxEmail, receive } from './emails-helpers.ts';

// The emails API on surface R: listing with every filter, polling with cursors, detail, read
// status. Mail arrives over SMTP; the worker is drained so labeling has finished before reading.

describeEachDatabase('emails API: list, filters, polling, detail, read status', (app) => {
  it('lists newest first by default with every filter applied on the server', async () => {
    const u = await app().user();
    const box = await inbox(app(), u);
    const a = await receive(app(), box, { from: 'Alice <Alice@Example.com>', subject: 'Quarterly REPORT', text: 'numbers' });
    const b = await receive(app(), box, { from: 'bob@example.org', subject: '50% off today', attachments: [{ filename: 'coupon.txt', content: 'SAVE50' }] });
    const c = await receive(app(), box, { from: 'carol@example.net', subject: '500 off tomorrow', messageId: '<root-1@example.net>' });
    const d = await receive(app(), box, { from: 'dave@example.net', subject: 'Re: 500 off tomorrow', inReplyTo: '<root-1@example.net>', references: '<root-1@example.net>' });
    await labelNow(app());
    const key = u.key;

    expect(await ids(app(), key, box)).toEqual([d, c, b, a]);
    expect(await ids(app(), key, box, { order: 'asc' })).toEqual([a, b, c, d]);
    // sender: exact address, case-insensitive; a part of an address is no match.
    expect(await ids(app(), key, box, { sender: 'ALICE@example.COM' })).toEqual([a]);
    expect(await ids(app(), key, box, { sender: 'alice' })).toEqual([]);
    // subject: case-insensitive text; LIKE wildcards in the text are literal.
    expect(await ids(app(), key, box, { subject: 'report' })).toEqual([a]);
    expect(await ids(app(), key, box, { subject: '0% ' })).toEqual([b]);
    expect(await ids(app(), key, box, { subject: '500 OFF' })).toEqual([d, c]);
    expect(await ids(app(), key, box, { has_attachments: true })).toEqual([b]);
    expect(await ids(app(), key, box, { has_attachments: false })).toEqual([d, c, a]);

    // A reply joins the conversation of the message it answers.
    const all = (await list(app(), key, box)).emails;
    const byId = new Map(all.map((e) => [e.id, e]));
    expect(byId.get(d).conversation_id).toBe(c);
    expect(byId.get(d).in_reply_to).toEqual(['root-1@example.net']);
    expect(await ids(app(), key, box, { conversation_id: c })).toEqual([d, c]);

    // received_after / received_before are exclusive bounds on received_at.
    const pivot = byId.get(b).received_at as string;
    const later = all.filter((e) => e.received_at > pivot).map((e) => e.id);
    const earlier = all.filter((e) => e.received_at < pivot).map((e) => e.id);
    expect(await ids(app(), key, box, { received_after: pivot })).toEqual(later);
    expect(await ids(app(), key, box, { received_before: pivot })).toEqual(earlier);
    expect(await ids(app(), key, box, { received_after: '2000-01-01T00:00:00+02:00', received_before: '2999-01-01T00:00:00Z' })).toEqual([d, c, b, a]);
    const bad = await app().request('GET', emailsPath(box), { key, query: { received_after: 'yesterday' } });
    expect(bad.status).toBe(422);
    expect(bad.body.error.details.field).toBe('received_after');

    // read
    expect((await app().request('PATCH', emailsPath(box, b), { key, body: { read: true } })).status).toBe(200);
    expect(await ids(app(), key, box, { read: true })).toEqual([b]);
    expect(await ids(app(), key, box, { read: false })).toEqual([d, c, a]);

    // direction: received by default; no sent mail yet, but the page still carries a cursor.
    const sent = await list(app(), key, box, { direction: 'sent' });
    expect(sent.emails).toEqual([]);
    expect(sent.pagination).toMatchObject({ has_more: false, limit: 50 });
    expect(sent.pagination.next_cursor).toEqual(expect.any(String));
    expect(await ids(app(), key, box, { direction: 'all' })).toEqual([d, c, b, a]);

    const one = byId.get(a);
    expect(one).toMatchObject({
      direction: 'received',
      subject: 'Quarterly REPORT',
      from_addresses: [{ address: 'Alice@example.com', name: 'Alice' }],
      to_addresses: [{ address: box.address, name: null }],
      delivered_to: box.address,
      body_status: 'complete',
      attachment_count: 0,
      withheld: false,
      read: false,
      read_at: null,
      read_by: null,
      read_by_api_key: null,
    });
    expect(one.labels).toHaveLength(1);
    expect(one).not.toHaveProperty('body_text');
    expect(one).not.toHaveProperty('file_id');
  });

  it('polls in ascending order: cursors of empty pages keep their place and later mail shows up', async () => {
    const u = await app().user();
    const box = await inbox(app(), u);
    const poll = (cursor?: string) => list(app(), u.key, box, { order: 'asc', limit: 2, cursor });

    const p0 = await poll();
    expect(p0.emails).toEqual([]);
    expect(p0.pagination.next_cursor).toEqual(expect.any(String));
    const empty = await poll(p0.pagination.next_cursor!);
    expect(empty.emails).toEqual([]);

    const e1 = await receive(app(), box, { subject: 'one' });
    const e2 = await receive(app(), box, { subject: 'two' });
    const e3 = await receive(app(), box, { subject: 'three' });
    const p1 = await poll(empty.pagination.next_cursor!);
    expect(p1.emails.map((e) => e.id)).toEqual([e1, e2]);
    expect(p1.pagination.has_more).toBe(true);
    const p2 = await poll(p1.pagination.next_cursor!);
    expect(p2.emails.map((e) => e.id)).toEqual([e3]);
    expect(p2.pagination.has_more).toBe(false);
    expect(p2.pagination.next_cursor).toEqual(expect.any(String));
    const p3 = await poll(p2.pagination.next_cursor!);
    expect(p3.emails).toEqual([]);
    const p4 = await poll(p3.pagination.next_cursor!);
    expect(p4.emails).toEqual([]);

    const e4 = await receive(app(), box, { subject: 'four' });
    const p5 = await poll(p4.pagination.next_cursor!);
    expect(p5.emails.map((e) => e.id)).toEqual([e4]);
    // The same cursor again gives the same page: nothing is consumed by reading.
    expect((await poll(p4.pagination.next_cursor!)).emails.map((e) => e.id)).toEqual([e4]);

    // Newest first, page by page, never repeating or skipping.
    const seen: string[] = [];
    let cursor: string | undefined;
    for (let i = 0; i < 3; i++) {
      const page = await list(app(), u.key, box, { limit: 3, cursor });
      seen.push(...page.emails.map((e) => e.id));
      cursor = page.pagination.next_cursor!;
      if (!page.pagination.has_more) break;
    }
    expect(seen).toEqual([e4, e3, e2, e1]);
    await labelNow(app());
  });

  it('refuses a cursor sent with other filters, a foreign cursor, and page sizes outside 1..100', async () => {
    const u = await app().user();
    const box = await inbox(app(), u);
    await receive(app(), box);
    const first = await list(app(), u.key, box, { order: 'asc', subject: 'hello', limit: 1 });
    const cursor = first.pagination.next_cursor!;
    for (const query of [{ order: 'asc', subject: 'other' }, { order: 'desc', subject: 'hello' }, { order: 'asc', subject: 'hello', read: false }]) {
      const res = await app().request('GET', emailsPath(box), { key: u.key, query: { ...query, cursor } });
      expect(res.status).toBe(422);
      expect(res.body.error.code).toBe('INVALID_ARGUMENT');
      expect(res.body.error.details.field).toBe('cursor');
    }
    // include_storage only changes how emails look: the cursor still fits.
    expect((await app().request('GET', emailsPath(box), { key: u.key, query: { order: 'asc', subject: 'hello', include_storage: true, cursor } })).status).toBe(200);
    const other = await inbox(app(), u);
    expect((await app().request('GET', emailsPath(other), { key: u.key, query: { order: 'asc', subject: 'hello', cursor } })).status).toBe(422);
    expect((await app().request('GET', emailsPath(box), { key: u.key, query: { cursor: 'not-a-cursor' } })).status).toBe(422);
    for (const limit of [101, 0, -1]) {
      const res = await app().request('GET', emailsPath(box), { key: u.key, query: { limit } });
      expect(res.status).toBe(422);
      expect(res.body.error.details.field).toBe('limit');
    }
    expect((await list(app(), u.key, box, { limit: 100 })).pagination.limit).toBe(100);
    await labelNow(app());
  });

  it('include_storage names the stored files, which the files API lists under the email folder', async () => {
    const u = await app().user();
    const box = await inbox(app(), u);
    const id = await receive(app(), box, { attachments: [{ filename: 'notes.txt', content: 'n' }, { filename: 'data.csv', content: 'a,b' }] });
    await labelNow(app());
    const [e] = (await list(app(), u.key, box, { include_storage: true })).emails;
    expect(e.files.directory).toMatch(new RegExp(`^_email/\\d{4}/\\d{2}/\\d{2}/${id}$`));
    expect(e.file_id).toBe(e.files.original_id);
    expect(e.files.attachment_ids).toHaveLength(2);
    const files = await app().request('GET', `/v1/mailboxes/${box.id}/files`, { key: u.key, query: { q: id } });
    const byPath = new Map<string, any>(files.body.data.files.map((f: any) => [f.path, f]));
    expect(byPath.get(`${e.files.directory}/message.eml`).id).toBe(e.file_id);
    expect(byPath.get(`${e.files.directory}/message.eml`).current_file_version.id).toBe(e.version_id);
    expect(byPath.get(`${e.files.directory}/message.json`).id).toBe(e.files.body_id);
    expect(byPath.get(`${e.files.directory}/attachments/notes.txt`).id).toBe(e.files.attachment_ids[0]);
    expect(byPath.get(`${e.files.directory}/attachments/data.csv`).id).toBe(e.files.attachment_ids[1]);
    const detail = await app().request('GET', emailsPath(box, id), { key: u.key, query: { include_storage: 'true' } });
    expect(detail.body.data.email.files).toEqual(e.files);
  });

  it('reads the detail with body and attachments without marking it read', async () => {
    const u = await app().user();
    const box = await inbox(app(), u);
    const id = await receive(app(), box, { subject: 'With parts', text: 'Line one\nLine two', attachments: [{ filename: 'photo.png', content: Buffer.from([0x89, 0x50, 0x4e, 0x47, 1, 2, 3]), contentType: 'image/png' }] });
    await labelNow(app());
    const res = await app().request('GET', emailsPath(box, id), { key: u.key, body: undefined });
    expect(res.status, res.text).toBe(200);
    const e = res.body.data.email;
    expect(e).toMatchObject({ id, subject: 'With parts', withheld: false, read: false, attachment_count: 1, omitted_attachment_count: 0 });
    expect(e.body_text).toContain('Line one\nLine two');
    expect(e.attachments).toEqual([{ id: expect.stringMatching(/^df_[A-Za-z0-9]+$/), filename: 'photo.png', content_type: 'image/png', size_bytes: 7, version_id: expect.stringMatching(/^dfv_/), origin: 'attachment', content_id: null }]);
    expect((await mailboxEmail(app(), u.key, box)).email.unread_count).toBe(1);
    const missing = await app().request('GET', emailsPath(box, 'eml_00000000000000000000000000'), { key: u.key });
    expect(missing.status).toBe(404);
    expect(missing.body.error.code).toBe('EMAIL_NOT_FOUND');
  });

  it('read status is shared, set only by PATCH, and keeps unread_count exact under concurrent calls', async () => {
    const u = await app().user({ name: 'Rita Reader' });
    const agentKey = await app().key(u, { label: 'agent key', scope: 'mailbox_read' });
    const box = await inbox(app(), u);
    const a = await receive(app(), box);
    const b = await receive(app(), box);
    await labelNow(app());
    const counts = async () => {
      const m = await mailboxEmail(app(), u.key, box);
      return [m.email.message_count, m.email.unread_count];
    };
    expect(await counts()).toEqual([2, 2]);

    // A read-only key may set read status (read permission is enough).
    const r1 = await app().request('PATCH', emailsPath(box, a), { key: agentKey, body: { read: true, reason: 'triage' } });
    expect(r1.status, r1.text).toBe(200);
    const keyRow = (await app().started.deps.db.selectFrom('api_keys').select('id').where('label', '=', 'agent key').where('user_id', '=', u.userId).executeTakeFirstOrThrow()).id;
    expect(r1.body.data.email).toMatchObject({ id: a, read: true, read_by: { id: u.userId, name: 'Rita Reader' }, read_by_api_key: { id: keyRow, label: 'agent key' } });
    expect(r1.body.data.email).not.toHaveProperty('body_text');
    expect(await counts()).toEqual([2, 1]);

    // Marking it read again changes nothing: same first reader, same count.
    const again = await app().request('PATCH', emailsPath(box, a), { key: u.key, body: { read: true }, query: { include_storage: true } });
    expect(again.body.data.email.read_at).toBe(r1.body.data.email.read_at);
    expect(again.body.data.email.read_by_api_key.id).toBe(keyRow);
    expect(again.body.data.email.file_id).toEqual(expect.stringMatching(/^df_/));
    expect(await counts()).toEqual([2, 1]);

    const burst = await Promise.all(Array.from({ length: 6 }, () => app().request('PATCH', emailsPath(box, b), { key: u.key, body: { read: true } })));
    expect(burst.map((r) => r.status)).toEqual(Array(6).fill(200));
    expect(await counts()).toEqual([2, 0]);
    const unburst = await Promise.all(Array.from({ length: 6 }, () => app().request('PATCH', emailsPath(box, b), { key: u.key, body: { read: false } })));
    expect(unburst.map((r) => r.status)).toEqual(Array(6).fill(200));
    expect(unburst[0]!.body.data.email).toMatchObject({ read: false, read_at: null, read_by: null, read_by_api_key: null });
    expect(await counts()).toEqual([2, 1]);

    // Listing, reading and downloading never mark read.
    await list(app(), u.key, box);
    await app().request('GET', emailsPath(box, b), { key: u.key });
    await app().request('GET', emailsPath(box, b, 'raw'), { key: u.key });
    expect((await ids(app(), u.key, box, { read: false }))).toEqual([b]);

    const invalid = await app().request('PATCH', emailsPath(box, b), { key: u.key, body: { read: 'yes' } });
    expect(invalid.status).toBe(422);
    const unknown = await app().request('PATCH', emailsPath(box, b), { key: u.key, body: { read: true, subject: 'x' } });
    expect(unknown.status).toBe(422);
  });
});
