import { expect, it } from 'vitest';
import { describeEachDatabase, type TestApp, type TestUser } from './harness.ts';
import { labelNow } from './smtp-helpers.ts';
import { GTUBE, inbox, receive, type Box } from './emails-helpers.ts';

// Regression: the files API handed out a withheld email's files (message.eml, attachments) to API
// keys, bypassing the withheld rule of the emails API.

async function emailFiles(app: TestApp, box: Box, emailId: string) {
  const rows = await app.started.deps.db.selectFrom('files').select(['id', 'path']).where('mailbox_id', '=', box.id).where('path', 'like', `%/${emailId}/%`).execute();
  return rows;
}

async function listedPaths(app: TestApp, user: TestUser, box: Box): Promise<string[]> {
  const res = await app.request('GET', `/v1/mailboxes/${box.id}/files`, { key: user.key, query: { limit: 100 } });
  expect(res.status).toBe(200);
  return res.body.data.files.map((f: { path: string }) => f.path);
}

function expectRefused(res: { status: number; body: any }, status: number, code: string) {
  expect(res.status).toBe(status);
  expect(res.body.error.code).toBe(code);
}

describeEachDatabase('withheld emails through the files API', (app) => {
  it('hides a Junk email\'s files from API keys: list, get, download, by_path on both surfaces, copy', async () => {
    const user = await app().user();
    const box = await inbox(app(), user);
    const junk = await receive(app(), box, { subject: 'win', text: `free money ${GTUBE}`, attachments: [{ filename: 'prize.txt', content: 'x' }] });
    const fine = await receive(app(), box, { subject: 'hello', text: 'a normal note' });
    await labelNow(app());

    const paths = await listedPaths(app(), user, box);
    expect(paths.some((p) => p.includes(fine))).toBe(true);
    expect(paths.some((p) => p.includes(junk))).toBe(false);

    const files = await emailFiles(app(), box, junk);
    expect(files).toHaveLength(3);
    for (const f of files) {
      expectRefused(await app().request('GET', `/v1/mailboxes/${box.id}/files/${f.id}`, { key: user.key }), 403, 'EMAIL_WITHHELD');
      expectRefused(await app().request('GET', `/v1/mailboxes/${box.id}/files/${f.id}/download`, { key: user.key }), 403, 'EMAIL_WITHHELD');
      expectRefused(await app().request('GET', `/v1/mailboxes/${box.id}/files/by_path`, { key: user.key, query: { path: f.path } }), 403, 'EMAIL_WITHHELD');
      expectRefused(await app().request('GET', `/api/v1/buckets/${box.id}/files/by_path`, { key: user.key, query: { path: f.path } }), 403, 'EMAIL_WITHHELD');
    }
    const copy = await app().request('POST', `/v1/mailboxes/${box.id}/files/${files[0]!.id}/copy`, { key: user.key, body: { path: 'loot/copy.eml' } });
    expectRefused(copy, 403, 'EMAIL_WITHHELD');

    const ok = (await emailFiles(app(), box, fine)).find((f) => f.path.endsWith('message.eml'))!;
    expect((await app().request('GET', `/v1/mailboxes/${box.id}/files/${ok.id}/download`, { key: user.key })).status).toBe(200);
  });
}, {});

describeEachDatabase('files of emails still being labeled', (app) => {
  it('answers 503 EMAIL_LABELING_PENDING with Retry-After and leaves them out of lists', async () => {
    const user = await app().user();
    const box = await inbox(app(), user);
    const id = await receive(app(), box, { subject: 'soon' });
    expect((await listedPaths(app(), user, box)).some((p) => p.includes(id))).toBe(false);
    const eml = (await emailFiles(app(), box, id)).find((f) => f.path.endsWith('message.eml'))!;
    const res = await app().request('GET', `/v1/mailboxes/${box.id}/files/${eml.id}/download`, { key: user.key });
    expectRefused(res, 503, 'EMAIL_LABELING_PENDING');
    expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
  });
}, { CUBBY_ROLES: 'api,smtp' });
