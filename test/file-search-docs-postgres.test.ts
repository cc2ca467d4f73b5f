import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WriteBatch } from '../src/db/write-batch.ts';
import { startTestApp, type TestApp } from './harness.ts';

// Postgres keeps `file_search_docs` (one row per live file with a searchable current version) by
// triggers (migrations 0026, 0027). Every way a file and its versions change must leave exactly
// the rows that `files` and `file_versions` imply, including a file and its version written in one
// statement, as the group commit writes received mail (src/db/write-batch.ts).

describe.skipIf(!process.env.CUBBY_TEST_POSTGRES_URL)('file search rows on Postgres', () => {
  let app: TestApp;
  let mailboxId = '';
  let otherMailboxId = '';
  let accountId = '';
  beforeAll(async () => {
    app = await startTestApp('postgres');
    const u = await app.user();
    accountId = u.accountId;
    mailboxId = (await app.request('POST', '/v1/mailboxes', { key: u.key, body: { mailbox: { title: 'Docs' } } })).body.data.mailbox.id;
    otherMailboxId = (await app.request('POST', '/v1/mailboxes', { key: u.key, body: { mailbox: { title: 'Other' } } })).body.data.mailbox.id;
  });
  afterAll(() => app?.stop());

  const now = '2026-11-27T00:00:00.000Z';
  let n = 0;
  const file = (id: string, currentVersionId: string | null) => ({
    id, mailbox_id: mailboxId, account_id: accountId, path: `f/${id}`, live_path: `f/${id}`, folder: 'f', basename: id, role: 'source' as const, created_by_system: 'api' as const,
    current_version_id: currentVersionId, version_count: 1, created_at: now, updated_at: now,
  });
  const version = (id: string, fileId: string, sha256: string | null) => ({
    id, file_id: fileId, mailbox_id: mailboxId, version_number: ++n, name: fileId, path: `f/${fileId}`, mime_type: 'text/plain', sha256, byte_size: 1, created_by_system: 'api' as const, deleted: 0, created_at: now,
  });

  /** The rows the triggers keep, against the rows `files` and `file_versions` imply, for these files. */
  async function rows(ids: string[]) {
    const { db } = app.started.deps;
    const kept = await sql<{ file_id: string; mailbox_id: string; sha256: string }>`select file_id, mailbox_id, sha256 from file_search_docs where file_id in (${sql.join(ids)}) order by file_id`.execute(db);
    const implied = await sql<{ file_id: string; mailbox_id: string; sha256: string }>`select f.id as file_id, f.mailbox_id, v.sha256 from files f join file_versions v on v.id = f.current_version_id
      where f.id in (${sql.join(ids)}) and f.deleted_at is null and v.sha256 is not null order by f.id`.execute(db);
    return { kept: kept.rows, implied: implied.rows };
  }

  it('match files and versions through inserts, new versions, moves, deletions and restores', async () => {
    const { db } = app.started.deps;
    const ids = ['fsd_a', 'fsd_b', 'fsd_c'];
    // A file, then its version (as file writes do).
    await db.transaction().execute(async (trx) => {
      await trx.insertInto('files').values(file('fsd_a', 'fsv_a1')).execute();
      await trx.insertInto('file_versions').values(version('fsv_a1', 'fsd_a', 'sha-a1')).execute();
    });
    // A file and its version in one statement (the group commit), and one with no content.
    await db.transaction().execute((trx) =>
      new WriteBatch('postgres')
        .add(trx.insertInto('files').values([file('fsd_b', 'fsv_b1'), file('fsd_c', 'fsv_c1')]).compile())
        .add(trx.insertInto('file_versions').values([version('fsv_b1', 'fsd_b', 'sha-b1'), version('fsv_c1', 'fsd_c', null)]).compile())
        .run(trx),
    );
    let r = await rows(ids);
    expect(r.kept).toEqual(r.implied);
    expect(r.kept.map((x) => x.file_id)).toEqual(['fsd_a', 'fsd_b']);

    // A new current version, a move to another mailbox, a version without content.
    await db.insertInto('file_versions').values(version('fsv_a2', 'fsd_a', 'sha-a2')).execute();
    await db.updateTable('files').set({ current_version_id: 'fsv_a2' }).where('id', '=', 'fsd_a').execute();
    await db.updateTable('files').set({ mailbox_id: otherMailboxId }).where('id', '=', 'fsd_b').execute();
    await db.insertInto('file_versions').values(version('fsv_c2', 'fsd_c', 'sha-c2')).execute();
    await db.updateTable('files').set({ current_version_id: 'fsv_c2' }).where('id', '=', 'fsd_c').execute();
    r = await rows(ids);
    expect(r.kept).toEqual(r.implied);
    expect(r.kept.map((x) => [x.file_id, x.sha256])).toEqual([['fsd_a', 'sha-a2'], ['fsd_b', 'sha-b1'], ['fsd_c', 'sha-c2']]);

    // Back to a version without content; deleted; restored; the row removed with the file.
    await db.updateTable('files').set({ current_version_id: 'fsv_c1' }).where('id', '=', 'fsd_c').execute();
    await db.updateTable('files').set({ deleted_at: now }).where('id', '=', 'fsd_a').execute();
    r = await rows(ids);
    expect(r.kept).toEqual(r.implied);
    expect(r.kept.map((x) => x.file_id)).toEqual(['fsd_b']);
    await db.updateTable('files').set({ deleted_at: null }).where('id', '=', 'fsd_a').execute();
    await db.deleteFrom('file_versions').where('file_id', '=', 'fsd_b').execute();
    await db.deleteFrom('files').where('id', '=', 'fsd_b').execute();
    r = await rows(ids);
    expect(r.kept).toEqual(r.implied);
    expect(r.kept.map((x) => [x.file_id, x.sha256])).toEqual([['fsd_a', 'sha-a2']]);
  });

  type Db = typeof app.started.deps.db;
  /**
   * Rows of file_search_docs that `work` inserts and updates. The counts read are the session's
   * not yet reported to the statistics (earlier transactions' included), so a difference taken
   * within one transaction, where nothing is reported.
   */
  async function writesBy(work: (trx: Db) => Promise<void>) {
    const counts = async (trx: Db) =>
      (await sql<{ ins: number; upd: number }>`select n_tup_ins::int as ins, n_tup_upd::int as upd from pg_stat_xact_user_tables where relid = 'file_search_docs'::regclass`.execute(trx)).rows[0]!;
    return app.started.deps.db.transaction().execute(async (trx) => {
      const before = await counts(trx);
      await work(trx);
      const after = await counts(trx);
      return { ins: after.ins - before.ins, upd: after.upd - before.upd };
    });
  }

  it('write each row once: a file and its version in one statement, or one after the other, and an update that changes nothing', async () => {
    // As the group commit writes received mail: both triggers fire at the statement's end, on the same row.
    const together = await writesBy(async (trx) => {
      await new WriteBatch('postgres')
        .add(trx.insertInto('files').values([file('fsd_d', 'fsv_d1'), file('fsd_e', 'fsv_e1')]).compile())
        .add(trx.insertInto('file_versions').values([version('fsv_d1', 'fsd_d', 'sha-d1'), version('fsv_e1', 'fsd_e', 'sha-e1')]).compile())
        .run(trx);
    });
    expect(together).toEqual({ ins: 2, upd: 0 });
    // As file writes do: the file, then its version.
    const apart = await writesBy(async (trx) => {
      await trx.insertInto('files').values(file('fsd_f', 'fsv_f1')).execute();
      await trx.insertInto('file_versions').values(version('fsv_f1', 'fsd_f', 'sha-f1')).execute();
      // The trigger's columns set to what they are: nothing to rewrite.
      await trx.updateTable('files').set({ current_version_id: 'fsv_f1', mailbox_id: mailboxId }).where('id', '=', 'fsd_f').execute();
    });
    expect(apart).toEqual({ ins: 1, upd: 0 });
    // A real change is still written.
    const moved = await writesBy(async (trx) => {
      await trx.updateTable('files').set({ mailbox_id: otherMailboxId }).where('id', '=', 'fsd_f').execute();
    });
    expect(moved).toEqual({ ins: 0, upd: 1 });
    const r = await rows(['fsd_d', 'fsd_e', 'fsd_f']);
    expect(r.kept).toEqual(r.implied);
    expect(r.kept.map((x) => [x.file_id, x.mailbox_id, x.sha256])).toEqual([['fsd_d', mailboxId, 'sha-d1'], ['fsd_e', mailboxId, 'sha-e1'], ['fsd_f', otherMailboxId, 'sha-f1']]);
  });
});
