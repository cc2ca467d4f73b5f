import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../src/db/database.ts';
import { DATABASES } from './harness.ts';
import { adminUserAndKey, serveEnv } from './serve-process.ts';
import { spawnServe, type ServeChild } from './crash-helpers.ts';
import { RawSmtp } from './smtp-raw-client.ts';
import { downloadFile } from './mail-store-checks.ts';
import { createMailbox, dropPostgres, partFiles, plantBlob, startUnfinishedUpload, until, upload } from './ops-helpers.ts';

// What a kill -9 leaves behind is swept after CUBBY_ORPHAN_SWEEP_AGE_S: `cubby serve` is killed
// while an upload and an SMTP DATA are streaming into the blob store (each leaves a `*.part` temp
// file) and with a blob on disk whose row was never committed. A restart with a long age keeps
// them (the sweep runs and finds them too young); a restart with a short age removes them, and
// nothing that a row refers to.

for (const kind of DATABASES) {
  describe(`crash leftovers are swept [${kind}]`, () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cubby-sweep-'));
    const dataDir = path.join(dir, 'data');
    const blobDir = path.join(dataDir, 'blobs');
    const schema = kind === 'postgres' ? `t_sweep_${randomBytes(5).toString('hex')}` : undefined;
    const dbEnv: Record<string, string> = schema ? { CUBBY_DATABASE_URL: process.env.CUBBY_TEST_POSTGRES_URL!, CUBBY_DATABASE_SCHEMA: schema } : {};
    const env = serveEnv(dataDir, dbEnv);
    let server: ServeChild | undefined;

    afterAll(async () => {
      await server?.stop();
      fs.rmSync(dir, { recursive: true, force: true });
      if (schema) await dropPostgres({ schema });
    });

    /** Finished runs of the sweeper since `since`. */
    const sweepsSince = async (since: string) => {
      const database = await openDatabase(kind === 'postgres' ? process.env.CUBBY_TEST_POSTGRES_URL! : `sqlite:${path.join(dataDir, 'cubby.db')}`, schema);
      try {
        return (await database.db.selectFrom('jobs').select('id').where('task', '=', 'maintenance.orphans').where('status', '=', 'done').where('finished_at', '>', since).execute()).length;
      } finally {
        await database.close();
      }
    };

    it('removes *.part files and unreferenced blobs after the age, keeps everything in use', { timeout: 240_000 }, async () => {
      const { key } = await adminUserAndKey(env, 'paid');
      server = await spawnServe(env);
      const box = await createMailbox(server.base, key, 'sweep');
      const kept = randomBytes(200_000); // past CUBBY_BLOB_INLINE_MAX_BYTES: a blob in the store
      const fileId = await upload(server.base, key, box.id, 'docs/kept.bin', kept);
      const smtp = await RawSmtp.open(server.smtpPort);
      const mail = Buffer.from(`From: a@example.com\r\nTo: ${box.address}\r\nSubject: kept\r\n\r\nThis one stays.\r\n`);
      const sent = await smtp.send({ from: 'a@example.com', to: [box.address], raw: mail });
      expect(sent.code, sent.text).toBe(250);
      await smtp.quit();

      // An upload and an SMTP DATA, both half-way through when the process dies.
      const putting = await startUnfinishedUpload(server.base, key, box.id, 'docs/big.bin', 8 * 1024 * 1024, 3 * 1024 * 1024);
      const socket = net.connect(server.smtpPort, '127.0.0.1');
      socket.on('error', () => {});
      let replies = '';
      socket.on('data', (d: Buffer) => (replies += d.toString()));
      await until('the greeting', () => /^220 /m.test(replies), 10_000);
      for (const [line, reply] of [['EHLO client.test', /^250 /m], ['MAIL FROM:<a@example.com>', null], [`RCPT TO:<${box.address}>`, null], ['DATA', /^354 /m]] as const) {
        const before = replies.length;
        socket.write(`${line}\r\n`);
        await until(`the reply to ${line}`, () => (reply ?? /^250 /m).test(replies.slice(before)), 10_000);
      }
      socket.write('Subject: never finished\r\n\r\n');
      for (let i = 0; i < 3000; i++) socket.write(`${'y'.repeat(998)}\r\n`);
      await until('two temp files being written', () => partFiles(blobDir).length >= 2);
      await server.kill9();
      putting.destroy();
      socket.destroy();
      const orphan = plantBlob(blobDir, randomBytes(4096));
      const leftovers = partFiles(blobDir);
      expect(leftovers.length).toBeGreaterThanOrEqual(2);

      // A long age: the sweep runs and keeps them.
      const firstBoot = new Date().toISOString();
      server = await spawnServe({ ...env, CUBBY_ORPHAN_SWEEP_AGE_S: '600' });
      await until('a sweep with the long age', async () => (await sweepsSince(firstBoot)) > 0);
      expect(partFiles(blobDir)).toEqual(expect.arrayContaining(leftovers));
      expect(fs.existsSync(orphan.file)).toBe(true);
      await server.stop();

      // A short age: gone.
      server = await spawnServe({ ...env, CUBBY_ORPHAN_SWEEP_AGE_S: '1' });
      await until('the leftovers to be swept', () => partFiles(blobDir).length === 0 && !fs.existsSync(orphan.file));

      // Everything a row names is still there and readable.
      expect(await downloadFile(server.base, key, box.id, fileId)).toEqual(kept);
      const database = await openDatabase(kind === 'postgres' ? process.env.CUBBY_TEST_POSTGRES_URL! : `sqlite:${path.join(dataDir, 'cubby.db')}`, schema);
      try {
        const rows = await database.db.selectFrom('blobs').select(['sha256', 'inline_bytes']).execute();
        expect(rows.length).toBeGreaterThanOrEqual(3); // the file, message.eml, message.json
        // The small message's blobs are kept in their rows (src/blobs/inline-blobs.ts); the uploaded file is in the store.
        expect(rows.filter((r) => r.inline_bytes).length).toBe(2);
        for (const { sha256 } of rows.filter((r) => !r.inline_bytes)) expect(fs.existsSync(path.join(blobDir, sha256.slice(0, 2), sha256)), sha256).toBe(true);
        const emails = await database.db.selectFrom('emails').select(['id', 'subject']).execute();
        expect(emails.map((e) => e.subject)).toEqual(['kept']);
      } finally {
        await database.close();
      }
      const again = await RawSmtp.open(server.smtpPort);
      expect((await again.send({ from: 'a@example.com', to: [box.address], raw: mail })).code).toBe(250);
      await again.quit();
    });
  });
}
