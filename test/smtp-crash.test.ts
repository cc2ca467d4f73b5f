import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { openDatabase } from '../src/db/database.ts';
import { DATABASES, emptyZone } from './harness.ts';
import { adminUserAndKey, serveEnv } from './serve-process.ts';
import { RawSmtp, storedBytes } from './smtp-raw-client.ts';
import { assertWholeMailbox, crashFile, crashMessage, spawnServe, uploadSessionOnce, type CrashMessage, type ServeChild, type UploadedFile } from './crash-helpers.ts';
import { downloadFile, emailDir, listFiles, sha256 } from './mail-store-checks.ts';

// `cubby serve` in its own process takes mail from concurrent SMTP senders, and files through upload
// sessions beside them, and is killed with SIGKILL mid-stream, again and again (CRASH_CYCLES
// rounds, default 2: alternately on a 250, and while a message it has fully received is being
// stored). After each restart on the same data dir, every
// message that got 250 is there whole (row and files, right bytes through the API), every file a
// finalize_batch answered as saved has its bytes, nothing half-stored is visible, the counters
// match, and mail is accepted again. The server runs the api and smtp roles only: labeling runs in
// this process (the worker role against the same database) so that the test can await it instead
// of waiting for a background worker, and so that no labeling job is left leased by the killed
// process (that would keep its email withheld from API keys until the lease ran out).

const SENDERS = 6;
/** Acknowledged messages in a round before its kill. */
const KILL_AFTER = 40;
/** Kill-and-restart rounds (the issue asks for ten; CI runs two to stay in its time budget). */
const CYCLES = Math.max(2, Number(process.env.CRASH_CYCLES ?? 2));

interface Acked extends CrashMessage {
  id: string;
}

for (const kind of DATABASES) {
  describe(`kill -9 during SMTP delivery, then restart [${kind}]`, () => {
    const schema = kind === 'postgres' ? `t_crash_${randomBytes(5).toString('hex')}` : undefined;
    let dir: string;
    let dataDir: string;
    let env: Record<string, string>;
    let databaseUrl: string;
    let server: ServeChild | undefined;

    beforeAll(() => {
      dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cubby-crash-'));
      dataDir = path.join(dir, 'data');
      env = serveEnv(dataDir, {
        CUBBY_ROLES: 'api,smtp',
        ...(schema ? { CUBBY_DATABASE_URL: process.env.CUBBY_TEST_POSTGRES_URL!, CUBBY_DATABASE_SCHEMA: schema } : {}),
      });
      databaseUrl = schema ? process.env.CUBBY_TEST_POSTGRES_URL! : `sqlite:${path.join(dataDir, 'cubby.db')}`;
    });

    afterAll(async () => {
      await server?.stop();
      if (dir) fs.rmSync(dir, { recursive: true, force: true });
      if (schema) {
        const client = new pg.Client({ connectionString: process.env.CUBBY_TEST_POSTGRES_URL });
        await client.connect();
        await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
        await client.end();
      }
    });

    it('keeps every acknowledged message and saved file whole and shows nothing half-stored, across repeated kills', async () => {
      const { key } = await adminUserAndKey(env, 'paid');
      server = await spawnServe(env);
      const created = await fetch(`${server.base}/v1/mailboxes`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', accept: 'application/json' },
        body: JSON.stringify({ mailbox: { title: 'crash' } }),
      });
      expect(created.status).toBe(201);
      const box = (await created.json()).data.mailbox as { id: string; email: { address: string } };
      const acked: Acked[] = [];
      /**
       * Email ids and file paths whose bytes a round already downloaded and compared. Later rounds
       * check them again in the database, on disk and in the listings, but do not download them
       * again (ten rounds would pass the key's request rate).
       */
      const downloaded = new Set<string>();
      /** Upload-session files answered as saved, by the mailbox they went to. */
      const savedFiles = new Map<string, UploadedFile[]>();
      const newMailbox = async (title: string) => {
        const res = await fetch(`${server!.base}/v1/mailboxes`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', accept: 'application/json' },
          body: JSON.stringify({ mailbox: { title } }),
        });
        expect(res.status).toBe(201);
        return (await res.json()).data.mailbox.id as string;
      };

      /** Upload sessions of six files, one after another, until the server dies (a mailbox per round: a killed session keeps its lock). */
      const uploadUntilKilled = async (round: number) => {
        const boxId = await newMailbox(`uploads ${round}`);
        const saved: UploadedFile[] = [];
        savedFiles.set(boxId, saved);
        for (let n = 0; ; n += 6) {
          const files = Array.from({ length: 6 }, (_, i) => crashFile(round, n + i));
          if (!(await uploadSessionOnce(server!.base, key, boxId, files, (f) => saved.push(...f)))) return saved.length;
        }
      };

      /**
       * Concurrent senders, each on its own connection, until the server dies under them. The kill
       * comes on the KILL_AFTER-th 250 of the round ('ack'), or once a 400 KB message has been
       * handed over after that ('data': the server is mid-way through storing it).
       */
      const deliverUntilKilled = async (round: number, when: 'ack' | 'data') => {
        const inFlight = new Set<number>();
        let ackedThisRound = 0;
        let inFlightAtKill = -1;
        let killed: Promise<void> | undefined;
        const kill = () => {
          if (killed) return;
          inFlightAtKill = inFlight.size;
          killed = server!.kill9();
        };
        const sender = async (conn: number) => {
          const smtp = await RawSmtp.open(server!.smtpPort);
          for (let n = 0; ; n++) {
            const m = crashMessage(round * 100 + conn, n);
            const trigger = when === 'data' && n % 3 === 2 && ackedThisRound >= KILL_AFTER ? kill : undefined;
            inFlight.add(conn);
            const res = await smtp.send({ from: 'crash@example.com', to: [box.email.address], raw: m.raw, onDataSent: trigger }).catch(() => null);
            inFlight.delete(conn);
            if (!res) return; // the connection died with the server
            expect(res.code, res.text).toBe(250);
            expect(res.emailIds).toHaveLength(1);
            acked.push({ ...m, id: res.emailIds[0]! });
            if (++ackedThisRound === KILL_AFTER && when === 'ack') kill();
          }
        };
        const [filesSaved] = await Promise.all([uploadUntilKilled(round), ...Array.from({ length: SENDERS }, (_, i) => sender(i))]);
        await killed;
        expect((await server!.exited).signal).toBe('SIGKILL');
        expect(inFlightAtKill).toBeGreaterThan(0);
        expect(filesSaved).toBeGreaterThan(0);
        return { ackedThisRound, inFlightAtKill, filesSaved };
      };

      /** The crash left a whole store: checked in the database with the server down, then through the API after a restart. */
      const verifyAfterCrash = async () => {
        const database = await openDatabase(databaseUrl, schema);
        let rows;
        try {
          rows = await assertWholeMailbox(database.db, box.id, path.join(dataDir, 'blobs'));
        } finally {
          await database.close();
        }
        const rowIds = new Set(rows.map((r) => r.id));
        for (const a of acked) expect(rowIds.has(a.id), `${a.subject} (${a.id}) got 250 but is missing`).toBe(true);

        // Restart on the same data dir; label everything (worker role, here) so API keys see the files.
        server = await spawnServe(env);
        const worker = createApp(loadConfig({ ...env, CUBBY_ROLES: 'worker' }), { resolver: emptyZone });
        const started = await worker.start();
        try {
          await started.deps.jobs.worker!.drain();
        } finally {
          await worker.stop();
        }
        const base = server.base;
        const checkRow = async (row: (typeof rows)[number]) => {
          const d = emailDir(row.received_at, row.id);
          const top = await listFiles(base, key, box.id, { folder: d });
          expect(top.map((f) => f.basename), row.id).toEqual(['message.eml', 'message.json']);
          const attached = await listFiles(base, key, box.id, { folder: `${d}/attachments` });
          expect(attached.map((f) => f.basename), row.id).toEqual(['data.bin']);
          const [eml, json, data] = await Promise.all([top[0]!, top[1]!, attached[0]!].map((f) => downloadFile(base, key, box.id, f.id)));
          // A message committed whose 250 never reached the sender is whole all the same.
          const m = /^crash c(\d+) n(\d+)$/.exec(row.subject ?? '');
          expect(m, `unexpected subject ${row.subject}`).not.toBeNull();
          const sent = crashMessage(Number(m![1]), Number(m![2]));
          expect(eml.equals(storedBytes(sent.raw)), `message.eml of ${row.subject}`).toBe(true);
          expect(data.equals(sent.attachment), `data.bin of ${row.subject}`).toBe(true);
          expect(JSON.parse(json.toString('utf8')).subject).toBe(row.subject);
        };
        const fresh = rows.filter((r) => !downloaded.has(r.id));
        for (let i = 0; i < fresh.length; i += 8) await Promise.all(fresh.slice(i, i + 8).map(checkRow));
        for (const r of fresh) downloaded.add(r.id);
        expect(await listFiles(base, key, box.id, { q: '_email/' })).toHaveLength(rows.length * 3);
        // Every file an upload session answered as saved is there, with its bytes.
        for (const [boxId, saved] of savedFiles) {
          const live = new Map((await listFiles(base, key, boxId)).map((f) => [f.path, f]));
          for (const f of saved) {
            const file = live.get(f.path);
            expect(file, `${f.path} was answered as saved but is missing`).toBeDefined();
            expect(file!.current_file_version?.sha256, f.path).toBe(sha256(f.bytes));
          }
          const unread = saved.filter((f) => !downloaded.has(`${boxId}/${f.path}`));
          for (let i = 0; i < unread.length; i += 8) {
            await Promise.all(unread.slice(i, i + 8).map(async (f) => expect(sha256(await downloadFile(base, key, boxId, live.get(f.path)!.id)), f.path).toBe(sha256(f.bytes))));
          }
          for (const f of unread) downloaded.add(`${boxId}/${f.path}`);
        }
        const mailbox = await (await fetch(`${base}/v1/mailboxes/${box.id}`, { headers: { authorization: `Bearer ${key}`, accept: 'application/json' } })).json();
        expect(mailbox.data.mailbox.email.message_count).toBe(rows.length);
        return rows.length;
      };

      // Kills alternate: at a 250, then mid-store. CRASH_CYCLES (default 2, as CI runs it) sets how many.
      let stored = 0;
      for (let round = 1; round <= CYCLES; round++) {
        const when = round % 2 === 1 ? 'ack' : 'data';
        const r = await deliverUntilKilled(round, when);
        const before = stored;
        stored = await verifyAfterCrash();
        console.log(
          `[${kind}] round ${round}, kill ${when === 'ack' ? 'at a 250' : 'mid-store'}: ${r.ackedThisRound} acknowledged, ${r.inFlightAtKill} senders in flight, ` +
            `${r.filesSaved} files saved; ${stored} stored in all (${stored - before} this round)`,
        );
      }

      // And it takes mail again.
      const smtp = await RawSmtp.open(server.smtpPort);
      try {
        const res = await smtp.send({ from: 'crash@example.com', to: [box.email.address], raw: crashMessage(999, 0).raw });
        expect(res.code, res.text).toBe(250);
      } finally {
        await smtp.quit();
      }
      const database = await openDatabase(databaseUrl, schema);
      try {
        expect(await assertWholeMailbox(database.db, box.id, path.join(dataDir, 'blobs'))).toHaveLength(stored + 1);
      } finally {
        await database.close();
      }
    }, 60_000 * CYCLES);
  });
}
