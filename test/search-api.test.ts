import { expect, it } from 'vitest';
import { describeEachDatabase, type TestApp } from './harness.ts';
import { inbox, receive } from './emails-helpers.ts';
import { labelNow } from './smtp-helpers.ts';
import { makePdf } from './search-documents.ts';
import { newMailbox, uploadFile } from './files-helpers.ts';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';

// Search over the API: a word that appears only inside a PDF attached to an email, sent over SMTP,
// finds the email and the attachment file.

const word = () => `zq${Math.random().toString(36).slice(2, 9)}`;

async function settle(app: TestApp) {
  await labelNow(app); // labeling, text extraction and indexing are jobs
}

describeEachDatabase('search API', (app) => {
  it('finds an email and its PDF attachment by a word only inside the PDF', async () => {
    const user = await app().user();
    const box = await inbox(app(), user);
    const secret = word();
    const id = await receive(app(), box, { subject: 'Quarterly papers', text: 'See the attachment.', attachments: [{ filename: 'report.pdf', content: makePdf('Intro page', `The ${secret} figures are final`), contentType: 'application/pdf' }] });
    await settle(app());

    const all = await app().request('GET', '/v1/search', { key: user.key, query: { q: secret } });
    expect(all.status, all.text).toBe(200);
    const kinds = all.body.data.results.map((r: any) => `${r.kind}:${r.kind === 'email' ? r.id : r.file.path.split('/').pop()}`);
    expect(kinds.sort()).toEqual([`email:${id}`, 'file:report.pdf']);
    const email = all.body.data.results.find((r: any) => r.kind === 'email');
    expect(email.snippet).toContain(secret);
    expect(email.email.subject).toBe('Quarterly papers');
    const file = all.body.data.results.find((r: any) => r.kind === 'file');
    expect(file.mailbox_id).toBe(box.id);
    expect(file.file.current_file_version.has_text).toBe(true);
    expect(file.snippet).toContain(`${secret} figures`);

    const list = await app().request('GET', `/v1/mailboxes/${box.id}/emails`, { key: user.key, query: { q: secret } });
    expect(list.status, list.text).toBe(200);
    expect(list.body.data.emails.map((e: any) => e.id)).toEqual([id]);
    const none = await app().request('GET', `/v1/mailboxes/${box.id}/emails`, { key: user.key, query: { q: `${secret} -figures` } });
    expect(none.body.data.emails).toEqual([]);

    const files = await app().request('GET', `/v1/mailboxes/${box.id}/files`, { key: user.key, query: { q: secret, q_in: 'content' } });
    expect(files.status, files.text).toBe(200);
    expect(files.body.data.files.map((f: any) => f.basename ?? f.path.split('/').pop())).toEqual(['report.pdf']);
    const byPath = await app().request('GET', `/v1/mailboxes/${box.id}/files`, { key: user.key, query: { q: secret } });
    expect(byPath.body.data.files).toEqual([]);

    const a = await app().request('GET', '/api/v1/search', { key: user.key, query: { q: secret, bucket_id: box.id, kind: 'email' } });
    expect(a.status, a.text).toBe(200);
    expect(a.body.data.results.map((r: any) => r.id)).toEqual([id]);

    const client = new Client({ name: 'cubby-test', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${app().base}/mcp`), { requestInit: { headers: { authorization: `Bearer ${user.key}` } } }));
    try {
      const r: any = await client.callTool({ name: 'search', arguments: { q: secret } });
      expect(r.isError, JSON.stringify(r.content)).toBeFalsy();
      expect(r.structuredContent.results.map((x: any) => x.kind).sort()).toEqual(['email', 'file']);
      expect(r.structuredContent.results.find((x: any) => x.kind === 'file').file.path).toMatch(/\/attachments\/report\.pdf$/);
      const bad: any = await client.callTool({ name: 'search', arguments: { q: '-only -excluded' } });
      expect(bad.isError).toBe(true);
      expect(bad.structuredContent.error.code).toBe('INVALID_ARGUMENT');
    } finally {
      await client.close();
    }
  });

  it('pages ranked results with a cursor bound to the query, and finds files by filename:', async () => {
    const user = await app().user();
    const box = await inbox(app(), user);
    const secret = word();
    const sent: string[] = [];
    for (let i = 0; i < 4; i++) sent.push(await receive(app(), box, { subject: i === 0 ? `${secret} in the subject` : `Note ${i}`, text: `body ${secret} ${'filler '.repeat(i * 5)}`, attachments: i === 1 ? [{ filename: `notes-${secret}.txt`, content: 'plain', contentType: 'text/plain' }] : [] }));
    await settle(app());
    const seen: string[] = [];
    let cursor: string | undefined;
    for (let n = 0; n < 10; n++) {
      const r = await app().request('GET', '/v1/search', { key: user.key, query: { q: secret, kind: 'email', limit: 1, cursor } });
      expect(r.status, r.text).toBe(200);
      seen.push(...r.body.data.results.map((x: any) => x.id));
      cursor = r.body.data.pagination.next_cursor ?? undefined;
      if (!cursor) break;
    }
    expect(seen).toHaveLength(4);
    expect([...seen].sort()).toEqual([...sent].sort());
    expect(seen[0]).toBe(sent[0]); // the subject match ranks first
    const first = await app().request('GET', '/v1/search', { key: user.key, query: { q: secret, kind: 'email', limit: 1 } });
    const other = await app().request('GET', '/v1/search', { key: user.key, query: { q: `${secret} body`, kind: 'email', limit: 1, cursor: first.body.data.pagination.next_cursor } });
    expect(other.status).toBe(422);
    const byName = await app().request('GET', '/v1/search', { key: user.key, query: { q: `filename:notes-${secret}.txt` } });
    expect(byName.body.data.results.map((x: any) => x.kind).sort()).toEqual(['email', 'file']);
    const list = await app().request('GET', `/v1/mailboxes/${box.id}/emails`, { key: user.key, query: { q: `${secret} has:attachment`, limit: 1 } });
    expect(list.body.data.emails.map((e: any) => e.id)).toEqual([sent[1]]);
  });

  it("follows a file's current version, deletion and restore, and never shows another account's copy of the same text", async () => {
    const owner = await app().user();
    const stranger = await app().user();
    const mine = await newMailbox(app(), owner.key);
    const theirs = await newMailbox(app(), stranger.key);
    const w1 = word();
    const w2 = word();
    const files = async (key: string, q: string) => {
      const r = await app().request('GET', '/v1/search', { key, query: { q, kind: 'file' } });
      expect(r.status, r.text).toBe(200);
      return r.body.data.results.map((x: any) => `${x.mailbox_id}:${x.file.path}`);
    };
    // The same content in both accounts: its text is extracted and indexed once, for both files.
    const first = await uploadFile(app(), owner.key, mine.id, 'docs/a.txt', `alpha ${w1}`);
    expect(first.status, first.text).toBe(201);
    await settle(app());
    expect((await uploadFile(app(), stranger.key, theirs.id, 'shared/b.txt', `alpha ${w1}`)).status).toBe(201);
    await settle(app());
    expect(await files(owner.key, w1)).toEqual([`${mine.id}:docs/a.txt`]);
    expect(await files(stranger.key, w1)).toEqual([`${theirs.id}:shared/b.txt`]);
    // A new version: the old text no longer finds the file, the new one does.
    expect((await uploadFile(app(), owner.key, mine.id, 'docs/a.txt', `beta ${w2}`)).status).toBe(200);
    await settle(app());
    expect(await files(owner.key, w1)).toEqual([]);
    expect(await files(owner.key, w2)).toEqual([`${mine.id}:docs/a.txt`]);
    expect(await files(stranger.key, w1)).toEqual([`${theirs.id}:shared/b.txt`]);
    // Restoring the first version (its text is known already, no extraction runs).
    const fileId = first.body.data.file.id;
    const restored = await app().request('POST', `/v1/mailboxes/${mine.id}/files/${fileId}/versions/${first.body.data.version.id}/restore`, { key: owner.key, body: {} });
    expect(restored.status, restored.text).toBe(200);
    expect(await files(owner.key, w1)).toEqual([`${mine.id}:docs/a.txt`]);
    expect(await files(owner.key, w2)).toEqual([]);
    // Deleted: gone for the owner, still there for the stranger's copy.
    const del = await app().request('DELETE', `/v1/mailboxes/${mine.id}/files/${fileId}`, { key: owner.key });
    expect(del.status, del.text).toBe(200);
    expect(await files(owner.key, w1)).toEqual([]);
    expect(await files(stranger.key, w1)).toEqual([`${theirs.id}:shared/b.txt`]);
  });

  it('keeps other accounts out of results', async () => {
    const owner = await app().user();
    const stranger = await app().user();
    const box = await inbox(app(), owner);
    const secret = word();
    await receive(app(), box, { subject: `About ${secret}`, text: 'hello' });
    await settle(app());
    const mine = await app().request('GET', '/v1/search', { key: owner.key, query: { q: secret } });
    expect(mine.body.data.results).toHaveLength(1);
    const theirs = await app().request('GET', '/v1/search', { key: stranger.key, query: { q: secret } });
    expect(theirs.status).toBe(200);
    expect(theirs.body.data.results).toEqual([]);
    const foreign = await app().request('GET', '/v1/search', { key: stranger.key, query: { q: secret, mailbox_id: box.id } });
    expect(foreign.status).toBe(404);
  });
});

