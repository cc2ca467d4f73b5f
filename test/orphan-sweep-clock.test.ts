import fs from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sweepOrphans } from '../src/files/orphans.service.ts';
import { DATABASES, startTestApp, type TestApp } from './harness.ts';
import { LogCollector } from './log-collector.ts';
import { mailboxWithAddress, smtpSession } from './smtp-helpers.ts';
import { partFiles, plantBlob, until } from './ops-helpers.ts';
import { fsStoreRoot } from './blob-helpers.ts';

// The crash-leftover sweep (maintenance.orphans) takes temp files and row-less blobs older than
// CUBBY_ORPHAN_SWEEP_AGE_S. Their age is the file system's: measured against the app's clock,
// which tests move forward (webhooks-retry runs a day ahead), a sweep took the `.part` file of an
// SMTP DATA still streaming, and the message was answered 451 (the rename into the store found no
// file), or the message.json blob stored just before its row was committed.

const DAY = 86_400_000;

for (const kind of DATABASES) {
  describe(`crash-leftover sweep on a clock ahead of the file system [${kind}]`, () => {
    let app: TestApp;
    const clock = { offsetMs: 0 };
    const logs = new LogCollector();

    beforeAll(async () => {
      // Every blob in the store (none kept in its database row): these tests are about the store's leftovers and faults.
      // No worker role: its recurring maintenance.orphans follows the app's clock, so moving the clock
      // two days ahead made it due within a second, and it ran beside the test's own sweep and took
      // the old blob first (the test's sweep then counted `blobs: 0`).
      app = await startTestApp(kind, { CUBBY_LOG_LEVEL: 'info', CUBBY_BLOB_INLINE_MAX_BYTES: '0', CUBBY_ROLES: 'api,smtp' }, { now: () => new Date(Date.now() + clock.offsetMs), logDestination: logs });
    });
    afterAll(async () => {
      await app?.stop();
    });

    it('takes neither a message still streaming nor a blob whose row is not committed yet, and still takes old leftovers', async () => {
      const deps = app.started.deps;
      const blobDir = fsStoreRoot(deps.blobs);
      const user = await app.user();
      const box = await mailboxWithAddress(app, user);

      // DATA half-way: the message's bytes are streaming into a `.part` file (bodies over 1 MiB are
      // written as they come; smaller ones at the end, in one write).
      const s = await smtpSession(app);
      expect(await s.send('EHLO sweep.example')).toMatch(/^250/m);
      expect(await s.send('MAIL FROM:<a@example.com>')).toMatch(/^250/);
      expect(await s.send(`RCPT TO:<${box.address}>`)).toMatch(/^250/);
      expect(await s.send('DATA')).toMatch(/^354/);
      const line = `${'x'.repeat(76)}\r\n`;
      s.write(`From: a@example.com\r\nTo: ${box.address}\r\nSubject: streaming\r\n\r\n${line.repeat(20_000)}`);
      const streaming = await until('the message to reach the blob store', () => partFiles(blobDir).length > 0 && partFiles(blobDir));
      // A blob stored a moment ago whose row is not committed yet (each write stores first, then commits).
      const fresh = await deps.blobs.putBuffer(randomBytes(1000));
      // Real leftovers: a temp file and a row-less blob written two days ago by the file system's clock.
      const oldPart = path.join(blobDir, 'tmp', 'left-by-a-crash.part');
      fs.writeFileSync(oldPart, 'partial');
      const old = plantBlob(blobDir, randomBytes(1000));
      const twoDaysAgo = new Date(Date.now() - 2 * DAY);
      for (const f of [oldPart, old.file]) fs.utimesSync(f, twoDaysAgo, twoDaysAgo);

      // The app's clock two days ahead, as a test that moves time leaves it; the sweep the worker runs.
      clock.offsetMs = 2 * DAY;
      const swept = await sweepOrphans(deps.db, deps.blobs, deps.config.orphanSweepAgeMs);
      const left = partFiles(blobDir);
      s.write('The rest.\r\n.\r\n');
      expect(await s.reply()).toMatch(/^250 /);
      s.end();
      expect(left).toEqual(streaming);
      expect(swept).toEqual({ parts: 1, blobs: 1 });
      expect(await deps.blobs.exists(fresh.sha256)).toBe(true);
      expect(await deps.blobs.exists(old.sha256)).toBe(false);
    });

    it('a message that cannot be stored is answered 451, and its transaction log line names the cause', async () => {
      const deps = app.started.deps;
      const blobDir = fsStoreRoot(deps.blobs);
      const user = await app.user();
      const box = await mailboxWithAddress(app, user);
      // The store's temp directory replaced by a file: every write fails.
      const tmp = path.join(blobDir, 'tmp');
      fs.renameSync(tmp, `${tmp}.away`);
      fs.writeFileSync(tmp, 'not a directory');
      try {
        const s = await smtpSession(app);
        await s.send('EHLO broken.example');
        await s.send('MAIL FROM:<cause@example.com>');
        await s.send(`RCPT TO:<${box.address}>`);
        await s.send('DATA');
        expect(await s.send(`From: cause@example.com\r\nTo: ${box.address}\r\nSubject: lost\r\n\r\nBody.\r\n.`)).toMatch(/^451 /);
        s.end();
        const line = await logs.next((l) => l.smtp?.mail_from === 'cause@example.com');
        expect(line.smtp).toMatchObject({ reply: 451, outcome: 'refused', error: { code: 'STORAGE_UNAVAILABLE', cause: expect.stringMatching(/ENOTDIR|ENOENT/) } });
      } finally {
        fs.rmSync(tmp);
        fs.renameSync(`${tmp}.away`, tmp);
      }
    });
  });
}
