import type { Kysely } from 'kysely';
import type { DB, UploadSessionsTable } from '../db/schema.ts';
import type { Actor, RequestCtx } from '../context.ts';
import { AppError } from '../errors.ts';
import { iso } from '../time.ts';
import { recordActivity } from '../activity/activity.service.ts';
import { findSession, LOCK_KIND, lockHolder, lockMailboxRow, sessionDeadline, touchSessions } from './upload-sessions.repo.ts';

// Closing a session: finalized, failed (canceled) or expired. Files a session saved before it
// closed stay saved, so closing records the session's one mailbox version whenever the
// session changed anything, and always releases the write lock.

const SYSTEM: Actor = { userId: null, apiKeyId: null, agent: null, requestId: null };
const SESSION_ID = /^bus_[A-Za-z0-9]{1,64}$/;

/** Past its hard deadline, or idle for `idleSeconds` (CUBBY_UPLOAD_SESSION_IDLE_S). */
export function isExpired(session: UploadSessionsTable, now: Date, idleSeconds: number): boolean {
  return sessionDeadline(session, idleSeconds) <= now.getTime();
}

/** Call inside a transaction that holds the mailbox row lock. */
export async function closeSession(trx: Kysely<DB>, session: UploadSessionsTable, status: 'finalized' | 'failed' | 'expired', now: Date, actor: Actor): Promise<UploadSessionsTable> {
  const at = iso(now);
  if (status !== 'finalized') {
    await trx.updateTable('upload_session_files').set({ status: 'failed' }).where('session_id', '=', session.id).where('status', '=', 'pending').execute();
  }
  const saved = await trx.selectFrom('upload_session_files').select((eb) => eb.fn.countAll<number>().as('n')).where('session_id', '=', session.id).where('status', '=', 'saved').executeTakeFirstOrThrow();
  const changes = Number(saved.n) + Number(session.pruned_files_count);
  const m = await trx.selectFrom('mailboxes').select(['version_number', 'lock_kind', 'lock_progress']).where('id', '=', session.mailbox_id).executeTakeFirstOrThrow();
  let target: string | null = null;
  const patch: Record<string, unknown> = {};
  if (changes > 0) {
    target = session.reserved_version_id;
    const number = Number(m.version_number) + 1;
    await trx
      .insertInto('mailbox_versions')
      .values({
        id: target,
        mailbox_id: session.mailbox_id,
        version_number: number,
        action: status === 'finalized' ? 'upload_session.finalize' : status === 'failed' ? 'upload_session.cancel' : 'upload_session.expire',
        files_changed: changes,
        created_by_user_id: actor.userId ?? session.created_by_user_id,
        created_by_api_key_id: actor.userId ? actor.apiKeyId : session.created_by_api_key_id,
        created_at: at,
      })
      .execute();
    Object.assign(patch, { version_id: target, version_number: number, updated_at: at });
  }
  if (lockHolder(m) === session.id) {
    Object.assign(patch, { lock_kind: null, lock_message: null, locked_until: null, locked_by_user_id: null, locked_by_api_key_id: null, lock_progress: null });
  }
  if (Object.keys(patch).length) await trx.updateTable('mailboxes').set(patch).where('id', '=', session.mailbox_id).execute();
  const closed = { status, pending_slot: null, session_closed_at: at, target_mailbox_version_id: target, updated_at: at };
  await trx.updateTable('upload_sessions').set(closed).where('id', '=', session.id).execute();
  await recordActivity(trx, actor, now, { accountId: session.account_id, action: `upload_session.${status === 'failed' ? 'cancel' : status === 'expired' ? 'expire' : 'finalize'}`, targetType: 'upload_session', targetId: session.id });
  return { ...session, ...closed };
}

/** Expires one session if it is still pending and past its time (or idle). */
export async function expireSession(db: Kysely<DB>, sessionId: string, now: Date, idleSeconds: number): Promise<void> {
  await db.transaction().execute(async (trx) => {
    const s = await trx.selectFrom('upload_sessions').selectAll().where('id', '=', sessionId).executeTakeFirst();
    if (!s || s.status !== 'pending' || !isExpired(s, now, idleSeconds)) return;
    await lockMailboxRow(trx, s.mailbox_id);
    const fresh = await trx.selectFrom('upload_sessions').selectAll().where('id', '=', sessionId).executeTakeFirstOrThrow();
    if (fresh.status !== 'pending' || !isExpired(fresh, now, idleSeconds)) return;
    await closeSession(trx, fresh, 'expired', now, SYSTEM);
  });
}

/** Pending sessions past their hard deadline or idle since `now - idleSeconds`. */
function dueSessions(db: Kysely<DB>, now: Date, idleSeconds: number) {
  const idleSince = iso(now.getTime() - idleSeconds * 1000);
  return db
    .selectFrom('upload_sessions')
    .select('id')
    .where('status', '=', 'pending')
    .where((eb) => eb.or([eb('uploads_expire_at', '<=', iso(now)), eb('updated_at', '<=', idleSince)]));
}

/**
 * The sweeper: marks every pending session past `uploads_expire_at`, or idle for `idleSeconds`,
 * expired, discards its unsaved uploads and releases its lock. Returns how many it expired.
 */
export async function expireUploadSessions(db: Kysely<DB>, now: Date, idleSeconds: number): Promise<number> {
  let total = 0;
  for (;;) {
    const due = await dueSessions(db, now, idleSeconds).orderBy('id').limit(100).execute();
    for (const { id } of due) await expireSession(db, id, now, idleSeconds);
    total += due.length;
    if (due.length < 100) return total;
  }
}

/** Expires the mailbox's pending sessions that are past their time (lazily, before a new one starts). */
export async function expireDueSessionsOf(db: Kysely<DB>, mailboxId: string, now: Date, idleSeconds: number): Promise<void> {
  const due = await dueSessions(db, now, idleSeconds).where('mailbox_id', '=', mailboxId).execute();
  for (const { id } of due) await expireSession(db, id, now, idleSeconds);
}

/** A session of this (already authorised) mailbox; a pending one past its time is expired first. */
export async function loadSession(ctx: RequestCtx, mailboxId: string, sessionId: string): Promise<UploadSessionsTable> {
  let s = SESSION_ID.test(sessionId) ? await findSession(ctx.db, mailboxId, sessionId) : undefined;
  if (!s) throw new AppError('UPLOAD_SESSION_NOT_FOUND', undefined, { session_id: sessionId });
  const idle = ctx.config.uploadSessionIdleSeconds;
  if (s.status === 'pending' && isExpired(s, ctx.now(), idle)) {
    await expireSession(ctx.db, s.id, ctx.now(), idle);
    s = (await findSession(ctx.db, mailboxId, sessionId))!;
  }
  return s;
}

export function closedError(s: UploadSessionsTable): AppError {
  return new AppError('UPLOAD_SESSION_CLOSED', `The upload session is ${s.status}; start a new one.`, { session_id: s.id, status: s.status });
}

export function requirePending(s: UploadSessionsTable): void {
  if (s.status !== 'pending') throw closedError(s);
}

/**
 * Inside a write transaction (after the mailbox row lock): the session must still be pending and
 * unexpired. The call is activity: the idle clock restarts and the lock is extended.
 */
export async function recheckPending(trx: Kysely<DB>, sessionId: string, now: Date, idleSeconds: number): Promise<UploadSessionsTable> {
  const s = await trx.selectFrom('upload_sessions').selectAll().where('id', '=', sessionId).executeTakeFirstOrThrow();
  if (s.status !== 'pending') throw closedError(s);
  if (isExpired(s, now, idleSeconds)) throw closedError({ ...s, status: 'expired' });
  const touched = await touchSessions(trx, [s.id], now, idleSeconds);
  return touched.has(s.id) ? { ...s, updated_at: iso(now) } : s;
}

export { LOCK_KIND };
