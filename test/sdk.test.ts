import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { WebSocket } from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Cubby, CubbyError, fileSource, WebhookVerificationError, verifyWebhook } from '../packages/sdk/src/node.ts';
import { digestBytes } from '../packages/sdk/src/hashing.ts';
import type { TestApp, TestUser } from './harness.ts';
import { makeCert, Receiver, startHookApp, type TestCert } from './webhook-receiver.ts';
import { labelNow, sendMail } from './smtp-helpers.ts';
import { enablePublishing } from './sites-helpers.ts';

// @cubby/sdk against the real app on port 0: every resource at least once, pagination, retries
// after Retry-After, a 300-file folder through one upload session, webhook verification, and a
// live subscription that catches up after the server drops it.

let cert: TestCert;
let app: TestApp;
let clock: { offsetMs: number };
let receiver: Receiver;
let user: TestUser;
let cubby: Cubby;

const client = (key: string, extra: Partial<ConstructorParameters<typeof Cubby>[0]> = {}) => new Cubby({ baseUrl: app.base, apiKey: key, ...extra });

beforeAll(async () => {
  cert = await makeCert();
  ({ app, clock } = await startHookApp('sqlite', cert));
  receiver = new Receiver(cert);
  await receiver.start();
  user = await app.user({ plan: 'paid' });
  await enablePublishing(app, user.accountId);
  cubby = client(user.key);
});
afterAll(async () => {
  await receiver?.stop();
  await app?.stop();
  fs.rmSync(cert.dir, { recursive: true, force: true });
});

describe('@cubby/sdk', () => {
  it('status, accounts and limits', async () => {
    const status = await cubby.status();
    expect(status.connected).toBe(true);
    expect(status.account.id).toBe(user.accountId);
    expect(status.user?.email).toBe(user.email);
    const accounts = await cubby.accounts.list().toArray();
    expect(accounts.map((a) => a.id)).toContain(user.accountId);
    expect((await cubby.accounts.get(user.accountId)).account.id).toBe(user.accountId);
    const limits = await cubby.accounts.limits();
    expect(limits.account_id).toBe(user.accountId);
    // accountId on the client selects the account for every call
    expect((await client(user.key, { accountId: user.accountId }).status()).account.id).toBe(user.accountId);
  });

  it('typed errors carry code, status, details and the request id', async () => {
    const err = await cubby.mailboxes.get('bkt_doesnotexist').catch((e) => e);
    expect(err).toBeInstanceOf(CubbyError);
    expect(err.status).toBe(404);
    expect(err.code).toMatch(/NOT_FOUND/);
    expect(err.requestId).toMatch(/.+/);
    const bad = await client('cbk_not_a_key').status().catch((e) => e);
    expect(bad).toBeInstanceOf(CubbyError);
    expect(bad.status).toBe(401);
    const invalid = await cubby.mailboxes.list({ limit: 1000 }).toArray().catch((e) => e);
    expect(invalid.status).toBe(422);
    expect(invalid.code).toBe('INVALID_ARGUMENT');
  });

  it('mailboxes: create, read, update, archive, unarchive, delete; lists page through 3 pages', async () => {
    const u = await app.user();
    const c = client(u.key);
    const made = [];
    for (let i = 0; i < 5; i++) made.push(await c.mailboxes.create({ title: `Box ${i}` }));
    const list = c.mailboxes.list({ limit: 2 });
    const pages = [];
    for await (const page of list.pages()) pages.push(page.items.map((m) => m.id));
    expect(pages.map((p) => p.length)).toEqual([2, 2, 1]);
    expect(pages.flat().sort()).toEqual(made.map((m) => m.id).sort());
    expect(list.cursor).toBeNull();

    const box = made[0]!;
    expect((await c.mailboxes.get(box.id)).title).toBe('Box 0');
    const renamed = await c.mailboxes.update(box.id, { title: 'Renamed', metadata: { team: 'a' } });
    expect(renamed.title).toBe('Renamed');
    expect(renamed.metadata).toEqual({ team: 'a' });
    expect((await c.mailboxes.archive(box.id)).archived).toBe(true);
    expect((await c.mailboxes.unarchive(box.id)).archived).toBe(false);
    await c.mailboxes.archive(box.id);
    const wrong = await c.mailboxes.delete(box.id, 'nope').catch((e) => e);
    expect(wrong).toBeInstanceOf(CubbyError);
    expect(wrong.status).toBe(422);
    const confirmation = (await c.mailboxes.get(box.id)).delete!.confirmation!;
    expect(await c.mailboxes.delete(box.id, confirmation)).toMatchObject({ deleted: true, id: box.id });
    expect((await c.mailboxes.list({ status: 'all' }).toArray()).map((m) => m.id)).not.toContain(box.id);
  });

  it('files: upload, skip identical, list, read, append, rename, move, copy, versions, restore, delete', async () => {
    const box = await cubby.mailboxes.create({ title: `Files ${Date.now()}` });
    const progress: string[] = [];
    const first = await cubby.uploadFile(box.id, 'notes/todo.txt', 'one\n', { onProgress: (p) => progress.push(p.phase) });
    expect(first.file.path).toBe('notes/todo.txt');
    expect(first.created).toBe(true);
    expect(progress).toEqual(['hashing', 'uploading', 'saving', 'done']);
    const same = await cubby.uploadFile(box.id, 'notes/todo.txt', new TextEncoder().encode('one\n'));
    expect(same.skipped).toBe(true);
    const second = await cubby.uploadFile(box.id, 'notes/todo.txt', new Blob(['two\n']));
    expect(second.version?.version_number).toBe(2);

    expect((await cubby.files.byPath(box.id, 'notes/todo.txt')).id).toBe(first.file.id);
    expect(new TextDecoder().decode(await cubby.files.read(box.id, first.file.id))).toBe('two\n');
    const appended = await cubby.files.appendText(box.id, 'notes/todo.txt', 'three', { newlineBefore: false });
    expect(appended.appended).toBe(true);
    expect(new TextDecoder().decode(await cubby.files.read(box.id, first.file.id))).toBe('two\nthree');
    const versions = await cubby.files.versions(box.id, first.file.id).toArray();
    expect(versions.length).toBe(3);
    const v1 = versions.find((v) => v.version_number === 1)!;
    await cubby.files.restore(box.id, first.file.id, v1.id);
    expect(new TextDecoder().decode(await cubby.files.read(box.id, first.file.id))).toBe('one\n');

    await cubby.files.rename(box.id, first.file.id, 'done.txt');
    expect((await cubby.files.get(box.id, first.file.id)).path).toBe('notes/done.txt');
    await cubby.files.move(box.id, first.file.id, 'archive/done.txt');
    const copy = await cubby.files.copy(box.id, first.file.id, 'copy.txt');
    expect(copy.file.path).toBe('copy.txt');
    expect((await cubby.files.setRead(box.id, copy.file.id, true)).read).toBe(true);
    expect((await cubby.files.list(box.id).toArray()).map((f) => f.path).sort()).toEqual(['archive/done.txt', 'copy.txt']);
    await cubby.files.delete(box.id, copy.file.id);
    const gone = await cubby.files.byPath(box.id, 'copy.txt').catch((e) => e);
    expect(gone.status).toBe(404);

    // a stream from disk through the Node entry, to a local file and back
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cubby-sdk-'));
    fs.writeFileSync(path.join(dir, 'big.bin'), Buffer.alloc(3 * 1024 * 1024, 7));
    const big = await cubby.uploadPath(box.id, 'big.bin', path.join(dir, 'big.bin'));
    await cubby.downloadTo(box.id, big.file.id, path.join(dir, 'back.bin'));
    expect(fs.readFileSync(path.join(dir, 'back.bin')).equals(fs.readFileSync(path.join(dir, 'big.bin')))).toBe(true);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('uploadDirectory: 300 files through one session with progress; a second run skips them all', async () => {
    const box = await cubby.mailboxes.create({ title: `Dir ${Date.now()}` });
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cubby-sdk-dir-'));
    for (let i = 0; i < 300; i++) {
      const sub = path.join(dir, `d${i % 7}`);
      fs.mkdirSync(sub, { recursive: true });
      fs.writeFileSync(path.join(sub, `f${i}.txt`), `file ${i}\n`);
    }
    const seen: number[] = [];
    const result = await cubby.uploadDirectory(box.id, dir, { prefix: 'site', onProgress: (p) => seen.push(p.filesDone) });
    expect(result.uploaded).toBe(300);
    expect(result.skipped).toBe(0);
    expect(result.session.status).toBe('finalized');
    expect(Math.max(...seen)).toBe(300);
    const mailbox = await cubby.mailboxes.get(box.id);
    expect(mailbox.files_count).toBe(300);
    const paths = await cubby.files.list(box.id, { limit: 100 }).toArray();
    expect(paths.length).toBe(300);
    expect(paths.every((f) => f.path.startsWith('site/d'))).toBe(true);

    const again = await cubby.uploadDirectory(box.id, dir, { prefix: 'site' });
    expect(again).toMatchObject({ uploaded: 0, skipped: 300 });
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('uploadDirectory past the per-session limit: one session after another; a mirror (deleteMissing) of such a folder prunes after uploading', async () => {
    const box = await cubby.mailboxes.create({ title: `Parts ${Date.now()}` });
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cubby-sdk-parts-'));
    try {
      for (let i = 0; i < 45; i++) {
        fs.mkdirSync(path.join(dir, `d${i % 3}`), { recursive: true });
        fs.writeFileSync(path.join(dir, `d${i % 3}`, `f${i}.txt`), `part ${i}\n`);
      }
      await cubby.uploadFile(box.id, 'stray.txt', 'not in the folder');
      // sessions of at most 20 files (the service's limit is 10,000; the SDK takes a lower one for tests)
      const first = await cubby.uploadDirectory(box.id, dir, { batchSize: 10, sessionFileLimit: 20, clientSessionKey: `parts-${box.id}` });
      expect(first).toMatchObject({ uploaded: 45, skipped: 0, sessions: 3, session: { status: 'finalized' } });
      expect(first.pruned).toBeUndefined();
      expect((await cubby.mailboxes.get(box.id)).files_count).toBe(46);

      fs.rmSync(path.join(dir, 'd1', 'f1.txt'));
      fs.writeFileSync(path.join(dir, 'd0', 'f0.txt'), 'changed\n');
      const mirror = await cubby.uploadDirectory(box.id, dir, { batchSize: 10, sessionFileLimit: 20, deleteMissing: true });
      expect(mirror).toMatchObject({ uploaded: 1, skipped: 43, sessions: 3, pruned: 2 });
      const left = (await cubby.files.list(box.id, { limit: 100 }).toArray()).map((f) => f.path);
      expect(left).toHaveLength(44);
      expect(left).not.toContain('stray.txt');
      expect(left).not.toContain('d1/f1.txt');
      // uploadMany cannot mirror through several sessions: refused before anything changes
      const refused = await cubby.uploadMany(box.id, [], { deleteMissing: true, expectedFileCount: 30, sessionFileLimit: 20, batchSize: 10 }).catch((e) => e);
      expect(refused).toBeInstanceOf(CubbyError);
      expect(refused.code).toBe('TOO_MANY_FILES_FOR_DELETE_MISSING');
      expect((await cubby.mailboxes.get(box.id)).lock?.locked ?? false).toBe(false);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('uploadMany saves each batch while the next one uploads, one save at a time, the next batch declared before the save; a save that fails ends the run', async () => {
    const box = await cubby.mailboxes.create({ title: `Pipeline ${Date.now()}` });
    const files = Array.from({ length: 60 }, (_, i) => ({ path: `p/f${i}.txt`, source: `pipelined ${i}\n` }));
    // The real requests, watched: the answer of each save but the last is held until a PUT of the
    // next batch starts (at most 3 s: without the overlap none would).
    let savesInFlight = 0;
    let savesSeen = 0;
    let mostSaves = 0;
    let putsDuringSaves = 0;
    let putStarted: () => void = () => undefined;
    /** The session's calls in the order they were sent: D (declare), P (PUT), S (save). */
    const sent: string[] = [];
    const watching = (input: string | URL | Request, init?: RequestInit) => {
      const url = String(input instanceof Request ? input.url : input);
      const method = init?.method ?? 'GET';
      if (method === 'PUT') sent.push('P');
      else if (/\/upload_sessions\/[^/]+\/uploads$/.test(url)) sent.push('D');
      else if (url.endsWith('/finalize_batch')) sent.push('S');
      if (method === 'PUT') {
        if (savesInFlight) putsDuringSaves++;
        putStarted();
        return globalThis.fetch(input, init);
      }
      if (!url.endsWith('/finalize_batch')) return globalThis.fetch(input, init);
      mostSaves = Math.max(mostSaves, ++savesInFlight);
      const last = ++savesSeen === 6;
      const nextPut = last ? Promise.resolve() : new Promise<void>((resolve) => (putStarted = resolve));
      return globalThis.fetch(input, init).then(async (res) => {
        await Promise.race([nextPut, new Promise((r) => setTimeout(r, 3_000).unref())]);
        savesInFlight--;
        return res;
      });
    };
    const watched = client(user.key, { fetch: watching });
    const result = await watched.uploadMany(box.id, files, { batchSize: 10 });
    expect(result).toMatchObject({ uploaded: 60, skipped: 0, sessions: 1, session: { status: 'finalized' } });
    expect(mostSaves).toBe(1);
    expect(putsDuringSaves).toBeGreaterThanOrEqual(5); // each of the five saves before the last batch
    // Each batch's ten PUTs, then the next batch's declaration, then this batch's save: the
    // service answers the declaration before it saves, so the next PUTs need not wait for the save.
    expect(sent.join('').replace(/P{10}/g, 'p')).toBe('Dp' + 'DSp'.repeat(5) + 'S');
    expect((await cubby.mailboxes.get(box.id)).files_count).toBe(60);

    // The session canceled from elsewhere while a save is held: the run ends with the service's
    // error, what was saved stays saved, and the mailbox is not left locked.
    const other = await cubby.mailboxes.create({ title: `Pipeline canceled ${Date.now()}` });
    let saves = 0;
    const canceling = async (input: string | URL | Request, init?: RequestInit) => {
      const url = String(input instanceof Request ? input.url : input);
      const res = await globalThis.fetch(input, init);
      if (url.endsWith('/finalize_batch') && ++saves === 2) {
        const session = url.split('/upload_sessions/')[1]!.split('/')[0]!;
        const cancel = await app.request('POST', `/v1/mailboxes/${other.id}/upload_sessions/${session}/finalize`, { key: user.key, body: { complete: false } });
        expect(cancel.status).toBe(200);
      }
      return res;
    };
    const failed = await client(user.key, { fetch: canceling }).uploadMany(other.id, files, { batchSize: 10 }).catch((e: unknown) => e);
    expect(failed).toBeInstanceOf(CubbyError);
    const after = await cubby.mailboxes.get(other.id);
    expect(after.lock?.locked ?? false).toBe(false);
    expect(after.files_count).toBeGreaterThanOrEqual(20);
    expect(after.files_count).toBeLessThan(60);
  });

  it('uploadMany: a path named again in the next batch is saved, the later bytes winning (never declared while its earlier declaration is being saved); a retry that turns into a skip leaves the save exact; a file that cannot be read ends the run after the batch before it is saved', async () => {
    // The next batch is declared before this one is saved only when that changes nothing: a path
    // declared again supersedes its unsaved declaration, which this batch's save must still find.
    const box = await cubby.mailboxes.create({ title: `Repeated path ${Date.now()}` });
    // Entry 15 names r/f5.txt again, as the service sees it (a leading slash is dropped).
    const files = Array.from({ length: 20 }, (_, i) => ({ path: i === 15 ? '/r/f5.txt' : `r/f${i}.txt`, source: `repeated ${i}\n` }));
    // The first save is held back (up to a second) for as long as no declaration of the second batch
    // is sent: one sent meanwhile would reach the service first and supersede r/f5.txt's.
    let declaredDuringSave = 0;
    let declarationSent: () => void = () => undefined;
    let saves = 0;
    const holding = async (input: string | URL | Request, init?: RequestInit) => {
      const url = String(input instanceof Request ? input.url : input);
      if (/\/upload_sessions\/[^/]+\/uploads$/.test(url)) declarationSent();
      if (url.endsWith('/finalize_batch') && ++saves === 1) {
        await new Promise<void>((resolve) => {
          declarationSent = () => {
            declaredDuringSave++;
            resolve();
          };
          setTimeout(resolve, 1_000).unref();
        });
        declarationSent = () => undefined;
      }
      return globalThis.fetch(input, init);
    };
    const result = await client(user.key, { fetch: holding }).uploadMany(box.id, files, { batchSize: 10 });
    expect(result).toMatchObject({ uploaded: 20, sessions: 1, session: { status: 'finalized' } });
    expect(declaredDuringSave).toBe(0);
    expect((await cubby.mailboxes.get(box.id)).files_count).toBe(19);
    const f5 = await cubby.files.byPath(box.id, 'r/f5.txt');
    expect(new TextDecoder().decode(await cubby.files.read(box.id, f5.id))).toBe('repeated 15\n');

    // A file hashed as new content that turns out, when sent, to be what is stored already: its
    // second declaration is a skip, and the batch's save counts only the files that have bytes.
    await cubby.uploadFile(box.id, 'r/f0.txt', 'stored already\n');
    let reads = 0;
    const revert = {
      async digests() {
        return digestBytes(new TextEncoder().encode(reads === 0 ? 'a new text\n' : 'stored already\n'));
      },
      async open() {
        reads++;
        return new TextEncoder().encode('stored already\n');
      },
    };
    const again = await cubby.uploadMany(box.id, [{ path: 'r/f0.txt', source: revert }, ...Array.from({ length: 19 }, (_, i) => ({ path: `s/g${i}.txt`, source: `second run ${i}\n` }))], { batchSize: 10 });
    expect(again).toMatchObject({ uploaded: 19, skipped: 1, session: { status: 'finalized' } });
    expect((await cubby.mailboxes.get(box.id)).files_count).toBe(19 + 19);

    // An unreadable file in the second batch: the first batch, already uploaded, is saved; the run
    // fails with the read error and leaves no lock.
    const other = await cubby.mailboxes.create({ title: `Unreadable ${Date.now()}` });
    const missing = path.join(os.tmpdir(), `cubby-sdk-missing-${Date.now()}.txt`);
    const mixed = Array.from({ length: 20 }, (_, i) => ({ path: `u/f${i}.txt`, source: i === 15 ? fileSource(missing) : `readable ${i}\n` }));
    const failed = await cubby.uploadMany(other.id, mixed, { batchSize: 10 }).catch((e: unknown) => e);
    expect((failed as NodeJS.ErrnoException).code).toBe('ENOENT');
    const after = await cubby.mailboxes.get(other.id);
    expect(after.files_count).toBe(10);
    expect(after.lock?.locked ?? false).toBe(false);
  });

  it('a file that changes between hashing and upload is hashed, declared and uploaded again', async () => {
    const box = await cubby.mailboxes.create({ title: `Changing ${Date.now()}` });
    // A source whose content changes once, right after it was first hashed (as a file being written to).
    const changing = () => {
      let content = 'before the edit';
      let hashed = 0;
      return {
        async digests() {
          hashed++;
          return digestBytes(new TextEncoder().encode(content));
        },
        async open() {
          const body = new TextEncoder().encode(content === 'before the edit' ? 'after the edit!!' : content);
          content = 'after the edit!!';
          return body;
        },
        get hashed() {
          return hashed;
        },
      };
    };
    const single = changing();
    const saved = await cubby.uploadFile(box.id, 'single.txt', single);
    expect(single.hashed).toBe(2);
    expect(new TextDecoder().decode(await cubby.files.read(box.id, saved.file.id))).toBe('after the edit!!');

    const inSession = changing();
    const result = await cubby.uploadMany(box.id, [
      { path: 'batch/changing.txt', source: inSession },
      { path: 'batch/steady.txt', source: 'steady' },
    ]);
    expect(result.uploaded).toBe(2);
    expect(inSession.hashed).toBe(2);
    expect(new TextDecoder().decode(await cubby.files.read(box.id, (await cubby.files.byPath(box.id, 'batch/changing.txt')).id))).toBe('after the edit!!');
  });

  it('a file on disk that changes after it was hashed (same size, or shorter) is sent again with its new bytes; a longer one sends what was hashed', async () => {
    const box = await cubby.mailboxes.create({ title: `Changing file ${Date.now()}` });
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cubby-sdk-changing-'));
    const big = 9 * 1024 * 1024; // above the in-memory limit: hashed, then streamed again for the PUT
    /** fileSource, with the file edited on disk right after its first hashing. */
    const editedAfterHashing = (file: string, edit: () => void) => {
      const src = fileSource(file);
      const digests = src.digests.bind(src);
      const counter = { hashed: 0 };
      src.digests = async () => {
        const d = await digests();
        if (counter.hashed++ === 0) edit();
        return d;
      };
      return { src, counter };
    };
    const sha = async (p: string) => (await cubby.files.byPath(box.id, p)).current_file_version!.sha256;
    const hex = (b: Buffer) => createHash('sha256').update(b).digest('hex');
    try {
      const cases = [
        { name: 'same-size.bin', edit: (f: string) => fs.writeFileSync(f, Buffer.alloc(big, 2)), expected: () => Buffer.alloc(big, 2), hashed: 2 },
        { name: 'shorter.bin', edit: (f: string) => fs.truncateSync(f, big / 2), expected: () => Buffer.alloc(big / 2, 1), hashed: 2 },
        { name: 'longer.bin', edit: (f: string) => fs.appendFileSync(f, Buffer.alloc(1024, 3)), expected: () => Buffer.alloc(big, 1), hashed: 1 },
      ];
      for (const c of cases) {
        const file = path.join(dir, c.name);
        fs.writeFileSync(file, Buffer.alloc(big, 1));
        const { src, counter } = editedAfterHashing(file, () => c.edit(file));
        const saved = await cubby.uploadFile(box.id, c.name, src);
        expect(saved.file.path, c.name).toBe(c.name);
        expect(counter.hashed, c.name).toBe(c.hashed);
        expect(await sha(c.name), c.name).toBe(hex(c.expected()));
      }
      // In a session too: the changed file is declared again in the same session.
      const file = path.join(dir, 'in-session.bin');
      fs.writeFileSync(file, Buffer.alloc(big, 1));
      const { src, counter } = editedAfterHashing(file, () => fs.writeFileSync(file, Buffer.alloc(big, 4)));
      const result = await cubby.uploadMany(box.id, [{ path: 'in-session.bin', source: src }, { path: 'steady.txt', source: 'steady' }]);
      expect(result).toMatchObject({ uploaded: 2, sessions: 1 });
      expect(counter.hashed).toBe(2);
      expect(await sha('in-session.bin')).toBe(hex(Buffer.alloc(big, 4)));
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('emails: poll from a saved cursor, read, mark, raw, attachments, send and reply', async () => {
    const box = await cubby.mailboxes.create({ title: `Mail ${Date.now()}` });
    const address = box.email.address!;
    await sendMail(app, { to: address, subject: 'First', text: 'Hello one', attachments: [{ filename: 'a.txt', content: 'attached' }] });
    await labelNow(app);
    const poll = cubby.emails.poll(box.id, null);
    const firstRun = await poll.toArray();
    expect(firstRun.map((e) => e.subject)).toEqual(['First']);
    const saved = poll.cursor;
    expect(saved).toBeTruthy();
    // nothing new: the cursor is kept
    const empty = cubby.emails.poll(box.id, saved);
    expect(await empty.toArray()).toEqual([]);
    expect(empty.cursor).toBe(saved);
    await sendMail(app, { to: address, subject: 'Second', text: 'Hello two' });
    await labelNow(app);
    const next = cubby.emails.poll(box.id, saved);
    expect((await next.toArray()).map((e) => e.subject)).toEqual(['Second']);

    const id = firstRun[0]!.id;
    const detail = await cubby.emails.get(box.id, id);
    expect(detail.body_text).toContain('Hello one');
    expect(detail.attachments.map((a) => a.filename)).toEqual(['a.txt']);
    expect(new TextDecoder().decode(await cubby.emails.attachment(box.id, id, detail.attachments[0]!.id))).toBe('attached');
    expect(new TextDecoder().decode(await cubby.emails.raw(box.id, id))).toContain('Subject: First');
    expect((await cubby.emails.setRead(box.id, id, true)).read).toBe(true);
    expect((await cubby.emails.list(box.id, { read: false }).toArray()).map((e) => e.subject)).toEqual(['Second']);

    const sent = await cubby.emails.send(box.id, { to: [user.email], subject: 'Out', text: 'Hi' });
    expect(sent.direction).toBe('sent');
    const reply = await cubby.emails.reply(box.id, id, { to: [user.email], text: 'Thanks' });
    expect(reply.subject).toBe('Re: First');
    expect((await cubby.emails.list(box.id, { direction: 'sent' }).toArray()).length).toBe(2);
    expect(await cubby.emails.delete(box.id, id)).toMatchObject({ deleted: true, id });
  });

  it('webhooks: set, deliveries, verify a real delivery (and refuse a tampered one), delete', async () => {
    const box = await cubby.mailboxes.create({ title: `Hooks ${Date.now()}` });
    const hook = await cubby.webhooks.set(box.id, receiver.url('/sdk'));
    expect(hook.signing_secret).toMatch(/^whsec_/);
    expect((await cubby.webhooks.get(box.id))?.url).toBe(receiver.url('/sdk'));
    const before = receiver.received.length;
    const sent = await sendMail(app, { to: box.email.address!, subject: 'Hook me' });
    await receiver.waitFor(before + 1);
    const delivery = receiver.received.find((r) => r.path === '/sdk')!;
    const event = await cubby.webhooks.verify(delivery.body, delivery.headers, hook.signing_secret!);
    expect(event.type).toBe('email.received');
    expect(event.data.email_id).toBe(sent.emailIds[0]);
    // Headers as a Headers object work too; a changed body or another secret does not verify.
    await expect(verifyWebhook(delivery.body, new Headers(delivery.headers), hook.signing_secret!)).resolves.toMatchObject({ id: event.id });
    await expect(verifyWebhook(delivery.body.replace('email.received', 'email.receivex'), delivery.headers, hook.signing_secret!)).rejects.toBeInstanceOf(WebhookVerificationError);
    await expect(verifyWebhook(delivery.body, delivery.headers, 'whsec_' + btoa('another secret of 32 bytes......'))).rejects.toBeInstanceOf(WebhookVerificationError);
    await expect(verifyWebhook(delivery.body, delivery.headers, hook.signing_secret!, { now: () => new Date(Date.now() + 3600_000) })).rejects.toThrow(/timestamp/);

    const logged = await cubby.webhooks.deliveries(box.id).toArray();
    expect(logged[0]?.event_id).toBe(event.id);
    expect(await cubby.webhooks.delete(box.id)).toMatchObject({ deleted: true, id: box.id });
    expect(await cubby.webhooks.get(box.id)).toBeNull();
  });

  it('live.subscribe: receives mail, and after the server drops the connection catches up from the cursor', async () => {
    const box = await cubby.mailboxes.create({ title: `Live ${Date.now()}` });
    const sockets: WebSocket[] = [];
    class Recording extends WebSocket {
      constructor(url: string, protocols?: string | string[]) {
        super(url, protocols);
        sockets.push(this);
      }
    }
    const got: string[] = [];
    const cursors: string[] = [];
    const states: string[] = [];
    let arrived: () => void = () => undefined;
    let whileAway: string | undefined;
    const sub = cubby.live.subscribe(
      box.id,
      (email) => {
        got.push(email.id);
        arrived();
      },
      {
        WebSocket: Recording as never,
        onCursor: (c) => void cursors.push(c),
        onState: (s, info) => void states.push(info?.reason ? `${s}:${info.reason}` : s),
        // Mail that arrives while no socket is open reaches us only through the catch-up read.
        beforeReconnect: async () => {
          whileAway = (await sendMail(app, { to: box.email.address!, subject: 'While away' })).emailIds[0];
        },
        reconnectDelayMs: () => 10,
      },
    );
    await sub.ready;
    const next = () => new Promise<void>((r) => (arrived = r));
    let wait = next();
    const pushed = (await sendMail(app, { to: box.email.address!, subject: 'Pushed' })).emailIds[0];
    await wait;
    expect(got, JSON.stringify(states)).toEqual([pushed]);

    wait = next();
    sockets[0]!.send(Buffer.from([1, 2, 3])); // a binary frame: the server disconnects (invalid_request)
    await wait;
    expect(whileAway).toMatch(/^eml_/);
    expect(got).toEqual([pushed, whileAway]);
    expect(states).toContain('disconnected:invalid_request');
    expect(sub.reconnects).toBe(1);
    expect(sockets.length).toBe(2);

    // a later run resumes from the saved cursor: nothing is delivered twice, new mail is
    await sub.close(); // waits for the catch-up in progress, so the cursor is final
    const saved = sub.cursor!;
    expect(cursors.at(-1)).toBe(saved);
    const later = (await sendMail(app, { to: box.email.address!, subject: 'After close' })).emailIds[0];
    const resumed: string[] = [];
    const sub2 = cubby.live.subscribe(box.id, (e) => void resumed.push(e.id), { cursor: saved });
    await sub2.ready;
    expect(resumed).toEqual([later]);
    await sub2.close();
  });

  it('addresses, domains and sites', async () => {
    const box = await cubby.mailboxes.create({ title: `Site ${Date.now()}` });
    const settings = await cubby.addresses.get(box.id);
    expect(settings.address).toBe(box.email.address);
    await cubby.addresses.addAlias(box.id, { username: 'extra' }); // 202: activated by a job
    await app.started.deps.jobs.worker!.drain();
    const alias = (await cubby.addresses.get(box.id)).aliases[0]!;
    expect(alias.address).toMatch(/^extra/);
    expect(await cubby.addresses.removeAlias(box.id, alias.id)).toMatchObject({ deleted: true, id: alias.id });
    const allow = await cubby.addresses.setAllowlist(box.id, { enabled: true, entries: ['example.com'] }, settings.sender_allowlist!.version);
    expect(allow.sender_allowlist).toMatchObject({ enabled: true, entries: ['@example.com'] }); // a domain is stored as @domain
    const rotated = await cubby.addresses.rotate(box.id, { confirm: true, expected_address: settings.address!, keep_old_as_alias: false } as never);
    expect(rotated.address).not.toBe(settings.address);

    const pilot = client((await app.user({ plan: 'pilot' })).key); // custom domains are a pilot feature
    const domain = await pilot.domains.create(`mail-${Date.now()}.example.org`);
    expect(domain.id).toBeTruthy();
    expect((await pilot.domains.list().toArray()).map((d) => d.id)).toContain(domain.id);
    expect((await pilot.domains.get(domain.id)).hostname).toBe(domain.hostname);
    expect(await pilot.domains.check('other.example.org')).toMatchObject({ hostname: 'other.example.org' });
    expect((await pilot.domains.verify(domain.id)).id).toBe(domain.id);
    expect(await pilot.domains.delete(domain.id, domain.hostname)).toMatchObject({ deleted: true });

    await cubby.uploadFile(box.id, 'index.html', '<!doctype html><title>Hi</title><h1>Hello</h1>');
    const queued = await cubby.publications.publish(box.id, {});
    const settled = await cubby.publications.waitUntilSettled(queued.id, { intervalMs: 50 });
    expect(settled.publish_state).toBe('ready');
    expect(settled.public_url).toMatch(/^http/);
    expect((await cubby.publications.forMailbox(box.id)).publication?.id).toBe(queued.id);
    expect((await cubby.publications.list({ bucket_id: box.id }).toArray()).map((p) => p.id)).toContain(queued.id);
    const preview = await cubby.publications.preview(box.id, {});
    expect((await cubby.publications.waitUntilSettled(preview.id, { intervalMs: 50 })).kind).toBe('preview');
    await cubby.publications.unpublishPreview(box.id);
    await cubby.publications.unpublish(box.id);
    const after = await cubby.publications.waitUntilSettled(queued.id, { intervalMs: 50 });
    expect(after.publish_state).toBe('unpublished');
  });

  it('a 429 is retried after Retry-After (RATE_LIMITED); creates are never retried', async () => {
    // The app clock is moved to one second into a minute so the burst falls in one window;
    // the SDK's sleep moves it forward by what it was asked to wait.
    const realNow = Date.now();
    clock.offsetMs = Math.ceil(realNow / 60_000) * 60_000 + 1000 - realNow;
    try {
      const u = await app.user({ plan: 'free' });
      const waits: number[] = [];
      const retries: string[] = [];
      const c = client(u.key, {
        sleep: async (ms) => {
          waits.push(ms);
          clock.offsetMs += ms;
        },
        retry: { onRetry: (i) => retries.push(`${i.error.code} ${i.delaySeconds}`) },
      });
      for (let sent = 0; sent < 600; sent += 50) {
        const batch = await Promise.all(Array.from({ length: 50 }, () => app.request('GET', '/v1/account/limits', { key: u.key })));
        expect(batch.every((r) => r.status === 200)).toBe(true);
      }
      const created = await c.mailboxes.create({ title: 'never twice' }).catch((e) => e);
      expect(created).toBeInstanceOf(CubbyError);
      expect(created.code).toBe('RATE_LIMITED');
      expect(created.retryAfter).toBeGreaterThan(50);
      expect(waits).toEqual([]);

      const status = await c.status();
      expect(status.account.id).toBe(u.accountId);
      expect(retries).toHaveLength(1);
      expect(retries[0]).toMatch(/^RATE_LIMITED \d+$/);
      expect(waits[0]).toBe(Number(retries[0]!.split(' ')[1]) * 1000);
      expect((await c.mailboxes.list().toArray()).length).toBe(0); // the refused create made nothing
    } finally {
      clock.offsetMs = 0;
    }
  });

  it('a request safe to repeat is retried after a 500, 502 or 504 (a passing fault, a proxy in front); a create is not', async () => {
    const box = await cubby.mailboxes.create({ title: `retried-${Date.now()}` });
    // A gateway in front of the service: it answers the next statuses queued here itself.
    const failNext: number[] = [];
    const gateway: typeof fetch = async (input, init) => {
      const status = failNext.shift();
      if (status === 500) return new Response(JSON.stringify({ error: { code: 'INTERNAL', message: 'Something went wrong' } }), { status, headers: { 'content-type': 'application/json' } });
      if (status) return new Response(status === 502 ? 'Bad Gateway' : 'Gateway Timeout', { status, headers: { 'content-type': 'text/plain' } });
      return globalThis.fetch(input, init);
    };
    const retries: string[] = [];
    const waits: number[] = [];
    const c = client(user.key, { fetch: gateway, sleep: async (ms) => void waits.push(ms), retry: { onRetry: (i) => retries.push(`${i.error.code} ${i.delaySeconds}`) } });

    failNext.push(502, 504, 500);
    expect((await c.mailboxes.get(box.id)).id).toBe(box.id);
    expect(retries).toEqual(['HTTP_502 0.5', 'HTTP_504 1', 'INTERNAL 2']);
    expect(waits).toEqual([500, 1000, 2000]);

    // Three retries at most: the fourth failure is the caller's, and says it may pass.
    failNext.push(500, 500, 500, 500);
    const failed = await c.mailboxes.get(box.id).catch((e: unknown) => e);
    expect(failed).toBeInstanceOf(CubbyError);
    expect((failed as CubbyError).code).toBe('INTERNAL');
    expect((failed as CubbyError).temporary).toBe(true);
    expect(failNext).toEqual([]);

    // A create is never repeated: the mailbox may have been made before the gateway failed.
    retries.length = 0;
    failNext.push(502);
    const created = await c.mailboxes.create({ title: 'made once' }).catch((e: unknown) => e);
    expect((created as CubbyError).status).toBe(502);
    expect(retries).toEqual([]);
    expect(failNext).toEqual([]);
  });

  it('the core has no Node-only imports', () => {
    const dir = path.join(import.meta.dirname, '../packages/sdk/src');
    for (const file of fs.readdirSync(dir).filter((f) => f.endsWith('.ts') && f !== 'node.ts')) {
      const text = fs.readFileSync(path.join(dir, file), 'utf8');
      expect(text, file).not.toMatch(/from ['"](node:|fs|path|ws|crypto|stream)['"/]/);
    }
  });
});
