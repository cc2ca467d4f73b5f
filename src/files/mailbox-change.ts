import type { Kysely } from 'kysely';
import type { DB } from '../db/schema.ts';
import type { Actor } from '../context.ts';
import type { Dialect } from '../db/database.ts';
import { AppError } from '../errors.ts';
import { newId } from '../ids.ts';
import { iso } from '../time.ts';
import { queueExtraction, type ExtractPayload } from '../search/queue-extraction.ts';

/**
 * One change to a mailbox's file tree, inside one transaction: it locks the mailbox row,
 * checks the expected version, and on commit records one mailbox version (only when
 * something changed) with exact storage and file-count deltas.
 */
export class MailboxChange {
  private versionId: string | null = null;
  /** Id to use for the mailbox version instead of a new one (an upload session's reserved id). */
  private presetVersionId: string | null = null;
  private changed = 0;
  storageDelta = 0;
  filesDelta = 0;
  readonly number: number;
  /** Contents written by this change: their text is extracted for search once it commits. */
  readonly written: ExtractPayload[] = [];
  private dialect: Dialect = 'sqlite';

  private constructor(
    readonly trx: Kysely<DB>,
    readonly mailboxId: string,
    readonly accountId: string,
    private readonly current: { version_id: string | null; version_number: number; storage_bytes: number; files_count: number },
    readonly actor: Actor,
    readonly now: Date,
    private readonly action: string,
  ) {
    this.number = current.version_number + 1;
  }

  static async begin(
    trx: Kysely<DB>,
    dialect: Dialect,
    mailboxId: string,
    opts: {
      actor: Actor;
      now: Date;
      action: string;
      expectedVersion?: string | null;
      allowArchived?: boolean;
      sessionId?: string | null;
      versionId?: string | null;
      /** Received email is written beside a batch upload: it only adds files under `_email/`, which a session never touches. */
      ignoreUploadLock?: boolean;
    },
  ): Promise<MailboxChange> {
    let q = trx
      .selectFrom('mailboxes')
      .select(['id', 'account_id', 'version_id', 'version_number', 'storage_bytes', 'files_count', 'archived_at', 'deleted_at', 'lock_kind', 'locked_until', 'lock_progress'])
      .where('id', '=', mailboxId);
    if (dialect === 'postgres') q = q.forUpdate();
    const m = await q.executeTakeFirst();
    if (!m || m.deleted_at) throw new AppError('MAILBOX_NOT_FOUND', undefined, { mailbox_id: mailboxId });
    if (m.archived_at && !opts.allowArchived) throw new AppError('MAILBOX_ARCHIVED', undefined, { mailbox_id: mailboxId });
    const locked = m.locked_until !== null && Date.parse(m.locked_until) > opts.now.getTime();
    if (locked && m.lock_kind === 'upload_session' && !opts.ignoreUploadLock) {
      const holder = m.lock_progress ? (JSON.parse(m.lock_progress) as { session_id?: string }).session_id : undefined;
      if (!opts.sessionId || holder !== opts.sessionId) {
        throw new AppError('MAILBOX_LOCKED', undefined, { mailbox_id: mailboxId, locked_until: m.locked_until, kind: m.lock_kind, retry_after: Math.max(1, Math.ceil((Date.parse(m.locked_until!) - opts.now.getTime()) / 1000)) });
      }
    }
    if (opts.expectedVersion !== undefined && opts.expectedVersion !== null && opts.expectedVersion !== (m.version_id ?? '')) {
      throw new AppError('MAILBOX_VERSION_CONFLICT', undefined, { mailbox_id: mailboxId, expected_mailbox_version: opts.expectedVersion, current_mailbox_version: m.version_id });
    }
    const change = new MailboxChange(trx, mailboxId, m.account_id, { ...m, storage_bytes: Number(m.storage_bytes), files_count: Number(m.files_count) }, opts.actor, opts.now, opts.action);
    change.presetVersionId = opts.versionId ?? null;
    change.dialect = dialect;
    return change;
  }

  get currentStorage(): number {
    return this.current.storage_bytes + this.storageDelta;
  }
  get currentFiles(): number {
    return this.current.files_count + this.filesDelta;
  }

  /** The id of the mailbox version this change will create; allocating it marks the change. */
  version(): string {
    this.changed++;
    this.versionId ??= this.presetVersionId ?? newId('bktrv');
    return this.versionId;
  }

  get hasChanges(): boolean {
    return this.changed > 0;
  }

  async commit(): Promise<{ versionId: string | null; versionNumber: number }> {
    if (!this.versionId) return { versionId: this.current.version_id, versionNumber: this.current.version_number };
    await queueExtraction(this.trx, this.dialect, this.now, this.written);
    await this.trx
      .insertInto('mailbox_versions')
      .values({
        id: this.versionId,
        mailbox_id: this.mailboxId,
        version_number: this.number,
        action: this.action,
        files_changed: this.changed,
        created_by_user_id: this.actor.userId,
        created_by_api_key_id: this.actor.apiKeyId,
        created_at: iso(this.now),
      })
      .execute();
    await this.trx
      .updateTable('mailboxes')
      .set({
        version_id: this.versionId,
        version_number: this.number,
        storage_bytes: this.current.storage_bytes + this.storageDelta,
        files_count: this.current.files_count + this.filesDelta,
        updated_at: iso(this.now),
      })
      .where('id', '=', this.mailboxId)
      .execute();
    return { versionId: this.versionId, versionNumber: this.number };
  }
}
