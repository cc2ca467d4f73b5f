import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Kysely } from 'kysely';
import type { AppDeps } from '../context.ts';
import type { DB } from '../db/schema.ts';
import { newId, randomToken, sha256Hex } from '../ids.ts';
import { iso } from '../time.ts';

// Browser sessions live in the database so that every node sees them. The cookie holds a
// random token; the table holds only its SHA-256. Sessions last 14 days from sign-in.

export const SESSION_COOKIE = 'cubby_session';
export const SESSION_TTL_MS = 14 * 24 * 60 * 60 * 1000;
const TOKEN_LENGTH = 43; // base62: about 256 bits
const TOKEN_SHAPE = /^[A-Za-z0-9]{43}$/;
// last_seen_at is written at most once a minute per session.
const LAST_SEEN_RESOLUTION_MS = 60_000;

export interface WebSession {
  id: string;
  expiresAt: string;
  user: { id: string; email: string; name: string };
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The signed-in browser session, or null (web routes only). */
    webSession: WebSession | null;
  }
}

export async function startSession(db: Kysely<DB>, userId: string, now: Date, meta: { userAgent?: string; ip?: string } = {}): Promise<{ token: string; expiresAt: string }> {
  const token = randomToken(TOKEN_LENGTH);
  const expiresAt = iso(now.getTime() + SESSION_TTL_MS);
  await db
    .insertInto('sessions')
    .values({
      id: newId('ses'),
      token_hash: sha256Hex(token),
      user_id: userId,
      created_at: iso(now),
      expires_at: expiresAt,
      last_seen_at: iso(now),
      user_agent: meta.userAgent?.slice(0, 300) ?? null,
      ip: meta.ip ?? null,
    })
    .execute();
  return { token, expiresAt };
}

export async function loadSession(db: Kysely<DB>, token: string | undefined, now: Date): Promise<WebSession | null> {
  if (!token || !TOKEN_SHAPE.test(token)) return null;
  const row = await db
    .selectFrom('sessions')
    .innerJoin('users', 'users.id', 'sessions.user_id')
    .select(['sessions.id', 'sessions.expires_at', 'sessions.last_seen_at', 'users.id as user_id', 'users.email', 'users.name'])
    .where('sessions.token_hash', '=', sha256Hex(token))
    .executeTakeFirst();
  if (!row || Date.parse(row.expires_at) <= now.getTime()) return null;
  if (now.getTime() - Date.parse(row.last_seen_at) > LAST_SEEN_RESOLUTION_MS) {
    await db.updateTable('sessions').set({ last_seen_at: iso(now) }).where('id', '=', row.id).execute();
  }
  return { id: row.id, expiresAt: row.expires_at, user: { id: row.user_id, email: row.email, name: row.name } };
}

export async function endSession(db: Kysely<DB>, token: string | undefined): Promise<void> {
  if (!token || !TOKEN_SHAPE.test(token)) return;
  await db.deleteFrom('sessions').where('token_hash', '=', sha256Hex(token)).execute();
}

/** Deletes expired sessions; for the worker's periodic sweep. */
export async function sweepSessions(db: Kysely<DB>, now: Date): Promise<number> {
  const res = await db.deleteFrom('sessions').where('expires_at', '<=', iso(now)).executeTakeFirst();
  return Number(res.numDeletedRows);
}

/** Cookie attributes shared by the session and CSRF cookies. */
export function cookieBase(deps: AppDeps) {
  return { path: '/', httpOnly: true, sameSite: 'lax' as const, secure: deps.publicUrl().startsWith('https:') };
}

export function setSessionCookie(reply: FastifyReply, deps: AppDeps, token: string, expiresAt: string): void {
  reply.setCookie(SESSION_COOKIE, token, { ...cookieBase(deps), expires: new Date(expiresAt) });
}

export function clearSessionCookie(reply: FastifyReply, deps: AppDeps): void {
  reply.clearCookie(SESSION_COOKIE, cookieBase(deps));
}

export function sessionToken(req: FastifyRequest): string | undefined {
  return req.cookies[SESSION_COOKIE];
}

/** Same-site path to return to after sign-in; anything else becomes `/`. */
export function safeNext(value: unknown): string {
  if (typeof value !== 'string' || value.length > 500) return '/';
  // One leading slash, then printable ASCII without backslashes: never another origin.
  if (!/^\/(?![/\\])[\x21-\x5b\x5d-\x7e]*$/.test(value)) return '/';
  return value;
}

/** userInfo bound into CSRF tokens: the session, so that a token minted for one session fails in another. */
export function csrfUserInfo(req: FastifyRequest): string {
  return req.webSession?.id ?? 'anonymous';
}

/** A CSRF token for forms on this page (sets the secret cookie on first use). */
export function csrfToken(req: FastifyRequest, reply: FastifyReply, deps: AppDeps): string {
  return reply.generateCsrf({ ...cookieBase(deps), userInfo: csrfUserInfo(req) });
}

/** Sends the browser to sign in, coming back here afterwards. */
export function toSignIn(req: FastifyRequest, reply: FastifyReply): FastifyReply {
  const here = req.method === 'GET' ? req.url : '/';
  return reply.redirect(here === '/' ? '/users/sign_in' : `/users/sign_in?next=${encodeURIComponent(here)}`, 303);
}
