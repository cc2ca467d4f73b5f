import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../src/db/database.ts';
import { SERVER_VERSION } from '../src/version.ts';
import { DATABASES } from './harness.ts';
import { adminUserAndKey, serveEnv } from './serve-process.ts';
import { crashMessage, spawnServe, type ServeChild } from './crash-helpers.ts';
import { RawSmtp, storedBytes } from './smtp-raw-client.ts';
import { downloadFile, emailDir, listFiles, sha256 } from './mail-store-checks.ts';
import { call, createMailbox, cubbyCli, dropPostgres, postgresUrlFor, treeOf, until, upload } from './ops-helpers.ts';
import { useS3rver } from './s3-harness.ts';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';

// `cubby admin backup` of a live `cubby serve` while SMTP senders keep delivering, then
// `cubby admin restore` into a fresh data dir (and, on Postgres, a fresh database), and the restored
// server boots and serves every email acknowledged before the backup began and every file, byte
// for byte. Then the refusals: a backup into a non-empty directory, a restore from something that
// is not a backup, into a data dir that is not empty, or with another secret key; each changes nothing.

const SENDERS = 3;

for (const kind of DATABASES) {
  describe(`backup and restore under SMTP load [${kind}]`, () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cubby-backup-'));
    const schema = kind === 'postgres' ? `t_backup_${randomBytes(5).toString('hex')}` : undefined;
    const restoreDb = kind === 'postgres' ? `cubby_restore_${randomBytes(5).toString('hex')}` : undefined;
    const dataDir = path.join(dir, 'data');
    const env = serveEnv(dataDir, schema ? { CUBBY_DATABASE_URL: process.env.CUBBY_TEST_POSTGRES_URL!, CUBBY_DATABASE_SCHEMA: schema } : {});
    const restoredDir = path.join(dir, 'restored');
    const restoredEnv: Record<string, string> = {
      ...serveEnv(restoredDir, schema ? { CUBBY_DATABASE_URL: postgresUrlFor(restoreDb!), CUBBY_DATABASE_SCHEMA: schema } : {}),
      CUBBY_SECRET_KEY: env.CUBBY_SECRET_KEY!,
    };
    const backupDir = path.join(dir, 'backup');
    const servers: ServeChild[] = [];

    afterAll(async () => {
      for (const s of servers) await s.stop();
      fs.rmSync(dir, { recursive: true, force: true });
      if (schema) await dropPostgres({ schema, database: restoreDb });
    });

    it('restores a backup taken under load: every acknowledged email and every file, in a server that boots', { timeout: 300_000 }, async () => {
      const { key } = await adminUserAndKey(env, 'paid');
      const server = await spawnServe(env);
      servers.push(server);
      const box = await createMailbox(server.base, key, 'backed up');
      const files = new Map<string, Buffer>();
      for (let i = 0; i < 4; i++) {
        const bytes = randomBytes(1000 + i * 40_000);
        files.set(await upload(server.base, key, box.id, `docs/file-${i}.bin`, bytes), bytes);
      }

      // Senders deliver until told to stop; the backup starts after the first dozen 250s.
      const acked: { id: string; conn: number; n: number; at: number }[] = [];
      let stop = false;
      const sender = async (conn: number) => {
        const smtp = await RawSmtp.open(server.smtpPort);
        for (let n = 0; !stop; n++) {
          const res = await smtp.send({ from: 'load@example.com', to: [box.address], raw: crashMessage(conn, n).raw });
          expect(res.code, res.text).toBe(250);
          acked.push({ id: res.emailIds[0]!, conn, n, at: Date.now() });
        }
        await smtp.quit();
      };
      const load = Promise.all(Array.from({ length: SENDERS }, (_, i) => sender(i)));
      await until('a dozen emails acknowledged', () => acked.length >= 12);
      const backupStarted = Date.now();
      const ackedBefore = acked.filter((a) => a.at < backupStarted);
      const taken = await cubbyCli(env, ['admin', 'backup', '--out', backupDir]);
      const ackedDuring = acked.length - ackedBefore.length;
      stop = true;
      await load;
      expect(taken.code, taken.stdout + taken.stderr).toBe(0);
      expect(taken.json).toMatchObject({ backup: backupDir, dialect: kind, migrations: expect.any(Number), secret: 'environment', note: expect.stringContaining('CUBBY_SECRET_KEY') });
      expect(ackedDuring, 'mail kept arriving while the backup ran').toBeGreaterThan(0);
      const manifest = JSON.parse(fs.readFileSync(path.join(backupDir, 'cubby-backup.json'), 'utf8'));
      expect(manifest).toMatchObject({ format: 'cubby-backup', format_version: 1, cubby_version: SERVER_VERSION, database: { dialect: kind }, blobs: { dir: 'blobs', count: taken.json.blobs } });
      expect(fs.statSync(backupDir).mode & 0o777).toBe(0o700);
      await server.stop();

      if (restoreDb) {
        // Restore goes into an existing, empty database (creating databases is the operator's call).
        const client = new pg.Client({ connectionString: process.env.CUBBY_TEST_POSTGRES_URL });
        await client.connect();
        await client.query(`CREATE DATABASE "${restoreDb}"`);
        await client.end();
      }
      const restored = await cubbyCli(restoredEnv, ['admin', 'restore', '--from', backupDir]);
      expect(restored.code, restored.stdout + restored.stderr).toBe(0);
      expect(restored.json).toMatchObject({ dialect: kind, data_dir: restoredDir, blobs: manifest.blobs.count, bytes: manifest.blobs.bytes });

      const again = await spawnServe(restoredEnv);
      servers.push(again);
      // Every email acknowledged before the backup began is there, whole; the worker labels any the
      // snapshot caught unlabeled before the API shows them.
      const database = await openDatabase(restoredEnv.CUBBY_DATABASE_URL ?? `sqlite:${path.join(restoredDir, 'cubby.db')}`, schema);
      let rows;
      try {
        rows = await database.db.selectFrom('emails').select(['id', 'subject', 'received_at']).where('mailbox_id', '=', box.id).execute();
      } finally {
        await database.close();
      }
      const ids = new Set(rows.map((r) => r.id));
      for (const a of ackedBefore) expect(ids.has(a.id), `${a.id} was acknowledged before the backup`).toBe(true);
      await until('every restored email to be readable', async () => (await listFiles(again.base, key, box.id, { q: '_email/' })).length === rows.length * 3);
      for (const row of rows) {
        const d = emailDir(row.received_at, row.id);
        const [eml] = await listFiles(again.base, key, box.id, { folder: d });
        const [conn, n] = /^crash c(\d+) n(\d+)$/.exec(row.subject ?? '')!.slice(1).map(Number);
        const sent = crashMessage(conn!, n!);
        expect((await downloadFile(again.base, key, box.id, eml!.id)).equals(storedBytes(sent.raw)), row.subject!).toBe(true);
        const [attachment] = await listFiles(again.base, key, box.id, { folder: `${d}/attachments` });
        expect((await downloadFile(again.base, key, box.id, attachment!.id)).equals(sent.attachment), row.subject!).toBe(true);
      }
      for (const [id, bytes] of files) expect((await downloadFile(again.base, key, box.id, id)).equals(bytes)).toBe(true);

      // The restored server takes mail and uploads.
      const smtp = await RawSmtp.open(again.smtpPort);
      expect((await smtp.send({ from: 'load@example.com', to: [box.address], raw: crashMessage(9, 0).raw })).code).toBe(250);
      await smtp.quit();
      await upload(again.base, key, box.id, 'docs/after-restore.txt', Buffer.from('new'));
      console.log(`[${kind}] backup under load: ${ackedBefore.length} acknowledged before, ${ackedDuring} during; restored ${rows.length} emails, ${manifest.blobs.count} blobs (${manifest.blobs.bytes} bytes)`);
    });

    it('refuses a non-empty backup target, a source that is not a backup, a non-empty data dir and another secret key; nothing changes', { timeout: 120_000 }, async () => {
      for (const s of servers) await s.stop();
      // Each refusal is its own `cubby admin` process, and none of them writes anything (which is
      // what this checks): the refusals that touch different directories run side by side.
      const busy = path.join(dir, 'busy');
      fs.mkdirSync(busy);
      fs.writeFileSync(path.join(busy, 'notes.txt'), 'mine');
      const before = treeOf(busy);
      const fresh = path.join(dir, 'fresh');
      const freshEnv = { ...restoredEnv, CUBBY_DATA_DIR: fresh, ...(schema ? { CUBBY_DATABASE_URL: process.env.CUBBY_TEST_POSTGRES_URL!, CUBBY_DATABASE_SCHEMA: `${schema}_x` } : {}) };
      const fake = path.join(dir, 'fake');
      fs.mkdirSync(fake);
      fs.writeFileSync(path.join(fake, 'cubby-backup.json'), JSON.stringify({ format: 'cubby-backup', format_version: 1 }));
      const sources = [busy, dataDir, path.join(dir, 'nowhere')];
      const [refused, notBackups, damaged, otherKey, otherSchema] = await Promise.all([
        // A backup into a directory that has something in it.
        cubbyCli(env, ['admin', 'backup', '--out', busy]),
        // A restore from a directory that is not a backup: the data dir is not even created.
        Promise.all(sources.map((source) => cubbyCli(freshEnv, ['admin', 'restore', '--from', source]))),
        // A damaged manifest is not a backup either.
        cubbyCli(freshEnv, ['admin', 'restore', '--from', fake]),
        // The backed-up server's secret came from CUBBY_SECRET_KEY: another key is refused.
        cubbyCli({ ...freshEnv, CUBBY_SECRET_KEY: randomBytes(32).toString('hex'), ...(schema ? { CUBBY_DATABASE_SCHEMA: schema } : {}) }, ['admin', 'restore', '--from', backupDir]),
        // Postgres restores into a schema of the backup's name: another name is refused before anything is written.
        schema ? cubbyCli(freshEnv, ['admin', 'restore', '--from', backupDir]) : undefined,
      ]);
      expect(refused.code).toBe(1);
      expect(refused.json.error).toMatch(/^BACKUP_TARGET_NOT_EMPTY: .*is not empty/);
      expect(treeOf(busy)).toEqual(before);
      notBackups.forEach((r, i) => {
        expect(r.code, sources[i]).toBe(1);
        expect(r.json.error, sources[i]).toMatch(/^RESTORE_SOURCE_NOT_A_BACKUP: .* is not a Cubby backup/);
      });
      expect(damaged.json.error).toMatch(/^RESTORE_SOURCE_NOT_A_BACKUP: .*not a backup manifest/);
      expect(otherKey.code).toBe(1);
      expect(otherKey.json.error).toMatch(/^RESTORE_MISMATCH: .*CUBBY_SECRET_KEY/);
      expect(fs.existsSync(fresh)).toBe(false);
      if (schema) {
        expect(otherSchema!.json.error).toMatch(/^RESTORE_MISMATCH: the backup holds postgres schema/);
        const client = new pg.Client({ connectionString: process.env.CUBBY_TEST_POSTGRES_URL });
        await client.connect();
        const exists = await client.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [`${schema}_x`]);
        await client.end();
        expect(exists.rowCount).toBe(0);
      }

      // A restore into a data dir that is in use (the original one, and the restored one); after the
      // commands above, so that nothing else has either data dir open while its tree is compared.
      const targets = [env, restoredEnv];
      const trees = targets.map((target) => treeOf(target.CUBBY_DATA_DIR!));
      const intoUsed = await Promise.all(targets.map((target) => cubbyCli(target, ['admin', 'restore', '--from', backupDir])));
      targets.forEach((target, i) => {
        expect(intoUsed[i]!.code).toBe(1);
        expect(intoUsed[i]!.json.error).toMatch(/^RESTORE_TARGET_NOT_EMPTY: /);
        expect(treeOf(target.CUBBY_DATA_DIR!)).toEqual(trees[i]);
      });
    });
  });
}

describe('backup and restore of a generated secret key', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cubby-backup-secret-'));
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('carries secret.key along (0600) and refuses a different CUBBY_SECRET_KEY at restore', { timeout: 120_000 }, async () => {
    const env = { CUBBY_DATA_DIR: path.join(dir, 'data') };
    expect((await cubbyCli(env, ['admin', 'create-user', '--email', 'k@example.com', '--password', 'a long enough password', '--name', 'K'])).code).toBe(0);
    // What `cubby serve` generates on first start when CUBBY_SECRET_KEY is not set.
    const secret = `${randomBytes(48).toString('base64url')}\n`;
    fs.writeFileSync(path.join(env.CUBBY_DATA_DIR, 'secret.key'), secret, { mode: 0o600 });
    const backupDir = path.join(dir, 'backup');
    const taken = await cubbyCli(env, ['admin', 'backup', '--out', backupDir]);
    expect(taken.code, taken.stdout + taken.stderr).toBe(0);
    expect(taken.json).toMatchObject({ secret: 'file' });
    expect(taken.json.note).toBeUndefined();

    const other = { CUBBY_DATA_DIR: path.join(dir, 'other'), CUBBY_SECRET_KEY: randomBytes(32).toString('hex') };
    const target = { CUBBY_DATA_DIR: path.join(dir, 'restored') };
    // Two restores of the same backup into different data dirs, side by side (each reads the backup only).
    const [refused, restored] = await Promise.all([cubbyCli(other, ['admin', 'restore', '--from', backupDir]), cubbyCli(target, ['admin', 'restore', '--from', backupDir])]);
    expect(refused.code).toBe(1);
    expect(refused.json.error).toMatch(/^RESTORE_MISMATCH: .*secret\.key.*unset CUBBY_SECRET_KEY/);
    expect(fs.existsSync(other.CUBBY_DATA_DIR)).toBe(false);

    expect(restored.code, restored.stdout + restored.stderr).toBe(0);
    const file = path.join(target.CUBBY_DATA_DIR, 'secret.key');
    expect(fs.readFileSync(file, 'utf8')).toBe(secret);
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    expect(fs.statSync(path.join(target.CUBBY_DATA_DIR, 'cubby.db')).mode & 0o777).toBe(0o600);
    const users = await cubbyCli(target, ['admin', 'list-users']);
    expect(users.json.users.map((u: { email: string }) => u.email)).toEqual(['k@example.com']);
  });
});

describe('backup and restore with the S3 blob store [sqlite]', () => {
  const s3 = useS3rver();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cubby-backup-s3-'));
  let server: ServeChild | undefined;
  afterAll(async () => {
    await server?.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('copies the bucket\'s blobs into the backup and puts them into another bucket on restore', { timeout: 240_000 }, async () => {
    const env = serveEnv(path.join(dir, 'data'), s3);
    const { key } = await adminUserAndKey(env, 'paid');
    server = await spawnServe(env);
    const box = await createMailbox(server.base, key, 's3 backed');
    const bytes = randomBytes(300_000);
    const fileId = await upload(server.base, key, box.id, 'docs/on-s3.bin', bytes);
    const taken = await cubbyCli(env, ['admin', 'backup', '--out', path.join(dir, 'backup')]);
    expect(taken.code, taken.stdout + taken.stderr).toBe(0);
    expect(taken.json.blobs).toBe(1);
    expect(fs.readFileSync(path.join(dir, 'backup', 'blobs', sha256(bytes).slice(0, 2), sha256(bytes)))).toEqual(bytes);
    await server.stop();

    const client = new S3Client({ region: 'us-east-1', endpoint: s3.CUBBY_S3_ENDPOINT, forcePathStyle: true, credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' } });
    await client.send(new CreateBucketCommand({ Bucket: 'cubby-restored' }));
    client.destroy();
    const restoredEnv = { ...serveEnv(path.join(dir, 'restored'), { ...s3, CUBBY_S3_BUCKET: 'cubby-restored' }), CUBBY_SECRET_KEY: env.CUBBY_SECRET_KEY! };
    const restored = await cubbyCli(restoredEnv, ['admin', 'restore', '--from', path.join(dir, 'backup')]);
    expect(restored.code, restored.stdout + restored.stderr).toBe(0);
    server = await spawnServe(restoredEnv);
    const link = await call(server.base, key, 'GET', `/v1/mailboxes/${box.id}/files/${fileId}/download`);
    expect(link.status, link.text).toBe(200);
    expect(link.body.data.download.url).toContain('cubby-restored');
    expect(await downloadFile(server.base, key, box.id, fileId)).toEqual(bytes);
  });
});
