import { randomBytes } from 'node:crypto';
import { expect, it } from 'vitest';
import { describeEachDatabase } from './harness.ts';
import { labelNow } from './smtp-helpers.ts';
import { uploadFile } from './files-helpers.ts';
import { emailsPath, fetchLink, GTUBE, inbox, list, mailboxEmail, receive } from './emails-helpers.ts';

// The emails API on surface R: download links, deletion, the withheld rule and tenancy.
// Mail arrives over SMTP; the worker is drained so labeling has finished before reading.

const CRLF = (lines: string[]) => Buffer.from(lines.join('\r\n') + '\r\n');

describeEachDatabase('emails API: downloads, delete, withheld, tenancy', (app) => {
  it('raw and attachment links: no key, exact bytes, Range and ETag', async () => {
    const u = await app().user();
    const box = await inbox(app(), u);
    const raw = CRLF(['From: Sam <sam@example.com>', `To: ${box.address}`, 'Subject: exact bytes', 'Message-ID: <exact-1@example.com>', 'MIME-Version: 1.0', 'Content-Type: text/plain; charset=utf-8', '', 'The body, kept byte for byte.']);
    const id = await receive(app(), box, { raw, from: 'sam@example.com' });
    const blob = randomBytes(3000);
    const withFile = await receive(app(), box, { attachments: [{ filename: 'blob.bin', content: blob, contentType: 'application/octet-stream' }] });
    await labelNow(app());

    const link = await app().request('GET', emailsPath(box, id, 'raw'), { key: u.key, query: { reason: 'archiving' } });
    expect(link.status, link.text).toBe(200);
    const d = link.body.data.download;
    expect(d).toEqual({ url: expect.any(String), filename: `${id}.eml`, content_type: 'message/rfc822', size_bytes: raw.length, authentication: 'none', expires_in: 900 });
    expect(d.url.startsWith(app().started.deps.publicUrl())).toBe(true);
    const got = await fetchLink(d.url);
    expect(got.status).toBe(200);
    expect(got.bytes.equals(raw)).toBe(true);
    expect(got.headers.get('content-type')).toMatch(/^message\/rfc822/);
    expect(got.headers.get('content-disposition')).toContain(`${id}.eml`);

    const detail = (await app().request('GET', emailsPath(box, withFile), { key: u.key })).body.data.email;
    const att = detail.attachments[0];
    const alink = await app().request('GET', emailsPath(box, withFile, 'attachments', att.id), { key: u.key });
    expect(alink.status, alink.text).toBe(200);
    expect(alink.body.data.download).toMatchObject({ filename: 'blob.bin', content_type: 'application/octet-stream', size_bytes: 3000, authentication: 'none', expires_in: 900 });
    const whole = await fetchLink(alink.body.data.download.url);
    expect(whole.bytes.equals(blob)).toBe(true);
    const part = await fetchLink(alink.body.data.download.url, { range: 'bytes=100-199' });
    expect(part.status).toBe(206);
    expect(part.headers.get('content-range')).toBe('bytes 100-199/3000');
    expect(part.bytes.equals(blob.subarray(100, 200))).toBe(true);
    const tail = await fetchLink(alink.body.data.download.url, { range: 'bytes=-10' });
    expect(tail.bytes.equals(blob.subarray(2990))).toBe(true);
    const cached = await fetchLink(alink.body.data.download.url, { 'if-none-match': whole.headers.get('etag')! });
    expect(cached.status).toBe(304);

    // An attachment id of another email, or no attachment at all.
    const wrong = await app().request('GET', emailsPath(box, id, 'attachments', att.id), { key: u.key });
    expect(wrong.status).toBe(404);
    expect(wrong.body.error.code).toBe('EMAIL_ATTACHMENT_NOT_FOUND');
    expect((await app().request('GET', emailsPath(box, withFile, 'attachments', 'df_nope'), { key: u.key })).body.error.code).toBe('EMAIL_ATTACHMENT_NOT_FOUND');
    // A download is not a read.
    expect((await mailboxEmail(app(), u.key, box)).email.unread_count).toBe(2);
  });

  it('junk is withheld from API keys: summary without content, detail withheld, downloads 403', async () => {
    const u = await app().user();
    const box = await inbox(app(), u);
    const id = await receive(app(), box, { from: 'Spammer Name <Winner@Prizes.Example>', subject: 'You won', text: `Claim now ${GTUBE}`, headers: { 'Reply-To': 'Claims <claims@other.example>' }, attachments: [{ filename: 'prize.txt', content: 'x' }] });
    await labelNow(app());
    const [e] = (await list(app(), u.key, box, { include_storage: true })).emails;
    expect(e).toMatchObject({
      id,
      withheld: true,
      subject: null,
      body_status: 'withheld',
      labels: [{ id: 'lbl_junk', name: 'Junk', color: '#b91c1c' }],
      from_addresses: [{ address: '@prizes.example', name: null }],
      reply_to_addresses: [{ address: '@other.example', name: null }],
      to_addresses: [{ address: box.address, name: null }],
      attachment_count: 1,
    });
    expect(e.files.attachment_ids).toEqual([]);
    const detail = await app().request('GET', emailsPath(box, id), { key: u.key });
    expect(detail.status).toBe(200);
    expect(detail.body.data.email).toMatchObject({ withheld: true, subject: null, body_text: null, attachments: [] });
    expect(detail.text).not.toContain('You won');
    expect(detail.text).not.toContain('Winner');
    for (const path of [emailsPath(box, id, 'raw'), emailsPath(box, id, 'attachments', 'df_anything')]) {
      const res = await app().request('GET', path, { key: u.key });
      expect(res.status).toBe(403);
      expect(res.body.error.code).toBe('EMAIL_WITHHELD');
    }
    // Junk can still be marked read and deleted.
    expect((await app().request('PATCH', emailsPath(box, id), { key: u.key, body: { read: true } })).body.data.email).toMatchObject({ read: true, withheld: true, subject: null });
    expect((await app().request('DELETE', emailsPath(box, id), { key: u.key })).status).toBe(200);
  });

  it('delete: mailbox-admin only, removes the row and files for good, and restores the counts', async () => {
    const u = await app().user();
    const writer = await app().key(u, { scope: 'mailbox_write' });
    const box = await inbox(app(), u);
    expect((await uploadFile(app(), u.key, box.id, 'notes/keep.txt', 'kept')).status).toBe(201);
    const before = (await mailboxEmail(app(), u.key, box));
    const keep = await receive(app(), box, { subject: 'keep' });
    const gone = await receive(app(), box, { subject: 'gone', attachments: [{ filename: 'a.txt', content: 'aaaa' }, { filename: 'b.txt', content: 'bbbbbbbb' }] });
    await labelNow(app());
    await app().request('PATCH', emailsPath(box, keep), { key: u.key, body: { read: true } });
    const [stored] = (await list(app(), u.key, box, { include_storage: true, subject: 'gone' })).emails;
    const mid = await mailboxEmail(app(), u.key, box);
    expect(mid.email).toMatchObject({ message_count: 2, unread_count: 1 });

    const refused = await app().request('DELETE', emailsPath(box, gone), { key: writer, body: {} });
    expect(refused.status).toBe(403);
    expect(refused.body.error.code).toBe('PERMISSION_DENIED');

    const del = await app().request('DELETE', emailsPath(box, gone), { key: u.key, body: { reason: 'cleanup' } });
    expect(del.status, del.text).toBe(200);
    expect(del.body).toEqual({ success: true, data: { deleted: true, id: gone } });
    const second = await app().request('DELETE', emailsPath(box, gone), { key: u.key });
    expect(second.status).toBe(404);
    expect(second.body.error.code).toBe('EMAIL_NOT_FOUND');
    for (const path of [emailsPath(box, gone), emailsPath(box, gone, 'raw')]) expect((await app().request('GET', path, { key: u.key })).body.error.code).toBe('EMAIL_NOT_FOUND');
    expect((await list(app(), u.key, box)).emails.map((e) => e.id)).toEqual([keep]);

    const files = await app().request('GET', `/v1/mailboxes/${box.id}/files`, { key: u.key, query: { limit: 100 } });
    const paths: string[] = files.body.data.files.map((f: any) => f.path);
    expect(paths.some((p) => p.startsWith(stored.files.directory))).toBe(false);
    expect(paths).toContain('notes/keep.txt');
    expect((await app().request('GET', `/v1/mailboxes/${box.id}/files/${stored.file_id}`, { key: u.key })).status).toBe(404);
    const db = app().started.deps.db;
    const fileIds = [stored.file_id, stored.files.body_id, ...stored.files.attachment_ids];
    expect(await db.selectFrom('files').select('id').where('id', 'in', fileIds).execute()).toEqual([]);
    expect(await db.selectFrom('file_versions').select('id').where('file_id', 'in', fileIds).execute()).toEqual([]);

    // Counts: only the kept email's files remain beside the uploaded file; one new mailbox version.
    const after = await mailboxEmail(app(), u.key, box);
    expect(after.email).toMatchObject({ message_count: 1, unread_count: 0 });
    expect(after.version_number).toBe(mid.version_number + 1);
    const keepFiles = paths.filter((p) => p.startsWith('_email/'));
    expect(after.files_count).toBe(before.files_count + keepFiles.length);
    const keptBytes = files.body.data.files.filter((f: any) => f.path.startsWith('_email/')).reduce((s: number, f: any) => s + f.current_file_version.byte_size, 0);
    expect(after.storage_bytes).toBe(before.storage_bytes + keptBytes);
    // Deleting the last email brings storage back to what it was before any mail arrived.
    expect((await app().request('DELETE', emailsPath(box, keep), { key: u.key })).status).toBe(200);
    const last = await mailboxEmail(app(), u.key, box);
    expect([last.storage_bytes, last.files_count, last.email.message_count, last.email.unread_count]).toEqual([before.storage_bytes, before.files_count, 0, 0]);

    // Concurrent deletes of one email: one wins, the others find it gone; the counts stay exact.
    const racer = await receive(app(), box);
    await labelNow(app());
    const race = await Promise.all([1, 2, 3].map(() => app().request('DELETE', emailsPath(box, racer), { key: u.key })));
    expect(race.map((r) => r.status).sort()).toEqual([200, 404, 404]);
    const end = await mailboxEmail(app(), u.key, box);
    expect([end.storage_bytes, end.files_count, end.email.message_count, end.email.unread_count]).toEqual([before.storage_bytes, before.files_count, 0, 0]);
  });

  it('tenancy: foreign mailboxes and emails of other mailboxes answer 404 like missing ones', async () => {
    const u = await app().user();
    const stranger = await app().user();
    const box = await inbox(app(), u);
    const other = await inbox(app(), u);
    const theirs = await inbox(app(), stranger);
    const id = await receive(app(), box, { attachments: [{ filename: 'a.txt', content: 'a' }] });
    await labelNow(app());
    const att = (await app().request('GET', emailsPath(box, id), { key: u.key })).body.data.email.attachments[0].id;
    const routes = (mailbox: string, key: string) => [
      ['GET', emailsPath(mailbox, id)],
      ['PATCH', emailsPath(mailbox, id), { read: true }],
      ['DELETE', emailsPath(mailbox, id)],
      ['GET', emailsPath(mailbox, id, 'raw')],
      ['GET', emailsPath(mailbox, id, 'attachments', att)],
    ].map(([method, path, body]) => app().request(method as string, path as string, { key, body }));

    // The right owner, the wrong mailbox of theirs; a stranger with their own mailbox id.
    for (const res of [...(await Promise.all(routes(other.id, u.key))), ...(await Promise.all(routes(theirs.id, stranger.key)))]) {
      expect(res.status).toBe(404);
      expect(res.body.error.code).toBe('EMAIL_NOT_FOUND');
    }
    // A stranger naming our mailbox: the mailbox itself is not found.
    for (const res of [...(await Promise.all(routes(box.id, stranger.key))), await app().request('GET', emailsPath(box), { key: stranger.key })]) {
      expect(res.status).toBe(404);
      expect(res.body.error.code).toBe('MAILBOX_NOT_FOUND');
    }
    // A key limited to another mailbox; an account selector the key cannot use.
    const narrow = await app().key(u, { mailboxAccess: 'selected', mailboxPermissions: { [other.id]: 'write' } });
    expect((await app().request('GET', emailsPath(box, id), { key: narrow })).body.error.code).toBe('MAILBOX_NOT_FOUND');
    const denied = await app().request('GET', emailsPath(box), { key: u.key, query: { account_id: stranger.accountId } });
    expect(denied.status).toBe(403);
    expect(denied.body.error.code).toBe('ACCOUNT_ACCESS_DENIED');
    const selected = await app().request('GET', emailsPath(box), { key: u.key, query: { account_id: u.accountId } });
    expect(selected.body.data.emails.map((e: any) => e.id)).toEqual([id]);
    expect((await app().request('GET', emailsPath(box, 'not-an-id'), { key: u.key })).body.error.code).toBe('EMAIL_NOT_FOUND');
    expect((await app().request('GET', emailsPath(box), { key: undefined })).status).toBe(401);
  });
});

// Without a worker labeling never runs, so received mail stays pending for as long as the test needs.
describeEachDatabase(
  'emails API: labeling pending',
  (app) => {
    it('pending mail is listed withheld; reads and downloads answer 503 with Retry-After', async () => {
      const u = await app().user();
      const box = await inbox(app(), u);
      const id = await receive(app(), box, { from: 'Pat <pat@example.com>', subject: 'Secret plans', text: 'details', attachments: [{ filename: 'plan.txt', content: 'p' }] });
      const [e] = (await list(app(), u.key, box)).emails;
      expect(e).toMatchObject({ id, withheld: true, labels: [], subject: null, body_status: 'withheld', from_addresses: [{ address: '@example.com', name: null }] });
      for (const path of [emailsPath(box, id), emailsPath(box, id, 'raw'), emailsPath(box, id, 'attachments', 'df_whatever')]) {
        const res = await app().request('GET', path, { key: u.key });
        expect(res.status).toBe(503);
        expect(res.body.error.code).toBe('EMAIL_LABELING_PENDING');
        const retry = Number(res.headers.get('retry-after'));
        expect(retry).toBeGreaterThanOrEqual(1);
        expect(retry).toBeLessThanOrEqual(60);
        expect(res.body.error.details).toMatchObject({ email_id: id, retry_after: retry });
      }
      const patched = await app().request('PATCH', emailsPath(box, id), { key: u.key, body: { read: true } });
      expect(patched.status).toBe(200);
      expect(patched.body.data.email).toMatchObject({ read: true, withheld: true, subject: null });
    });
  },
  { CUBBY_ROLES: 'api,smtp' },
);
