import type { IncomingMessage } from 'node:http';
import { createHmac, randomInt } from 'node:crypto';
import type { AppDeps } from '../../context.ts';
import { signToken, verifyToken } from '../../http/signed.ts';
import { iso } from '../../time.ts';
import { clientKey } from '../../web/throttle.ts';
import { isEmail, normalizeEmail } from '../../users/users.service.ts';
import { sendSystemMail } from '../../outbound/system-mail.ts';
import { siteId } from '../ids.ts';
import { openPassword, samePassword } from '../secrets.ts';
import type { Site } from './site-cache.ts';
import { codePage, emailPage, passwordPage, tooManyPage } from './pages.ts';

// Protected sites. Password: the form posts to /.cubby/password; require_email: /.cubby/email sends
// a one-time code by our own mail, /.cubby/code checks it. Success sets a cookie scoped to the site's
// own host, signed with the service secret and bound to the publication and its access epoch (a new
// password or mode, or unpublishing, ends every visitor's session). Attempts are counted in the
// database so that every node enforces the same limits.

export const ACCESS_COOKIE = 'cubby_site_access';
const COOKIE_PURPOSE = 'site-access';
const COOKIE_TTL_MS = 7 * 86_400_000;
const WINDOW_MS = 15 * 60_000;
const CODE_TTL_MS = 10 * 60_000;
const LIMITS = { passwordPerClient: 10, passwordPerSite: 200, sendsPerEmail: 3, sendsPerClient: 10, codeFailuresPerClient: 20, attemptsPerCode: 5 };

export type Send = (status: number, html: string, headers?: Record<string, string | string[]>) => void;

function cookieValue(header: string | undefined): string | undefined {
  if (!header) return undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === ACCESS_COOKIE) return part.slice(eq + 1).trim();
  }
  return undefined;
}

export function hasAccess(deps: AppDeps, site: Site, req: IncomingMessage): boolean {
  const token = cookieValue(req.headers.cookie);
  if (!token) return false;
  const p = verifyToken<{ p: string; e: number }>(deps.secret, COOKIE_PURPOSE, token, deps.now());
  return p !== null && p.p === site.publicationId && p.e === site.accessEpoch;
}

function accessCookie(deps: AppDeps, site: Site, secure: boolean, email: string | null): string {
  const exp = deps.now().getTime() + COOKIE_TTL_MS;
  const token = signToken(deps.secret, COOKIE_PURPOSE, { p: site.publicationId, e: site.accessEpoch, exp, ...(email ? { m: email } : {}) });
  return `${ACCESS_COOKIE}=${token}; Path=/; Max-Age=${COOKIE_TTL_MS / 1000}; HttpOnly; SameSite=Lax${secure ? '; Secure' : ''}`;
}

/** Where to go after signing in: a local path only, percent-encoded so it fits a Location header. */
export function safeNext(raw: string | null | undefined): string {
  if (!raw || raw.length > 2000 || !raw.startsWith('/') || raw.startsWith('//') || raw.startsWith('/\\') || /[\u0000-\u001f\u007f]/.test(raw)) return '/';
  try {
    return raw.replace(/[^\u0021-\u007e]/gu, (c) => encodeURIComponent(c));
  } catch {
    return '/'; // a lone surrogate
  }
}

export function clientOf(deps: AppDeps, req: IncomingMessage): string {
  let ip = req.socket.remoteAddress ?? 'unknown';
  const hops = deps.config.trustProxyHops;
  if (hops > 0 && typeof req.headers['x-forwarded-for'] === 'string') {
    const list = req.headers['x-forwarded-for'].split(',').map((s) => s.trim()).filter(Boolean);
    ip = list[Math.max(0, list.length - hops)] ?? ip;
  }
  return clientKey(ip);
}

async function countAttempts(deps: AppDeps, site: Site, kind: 'password_failed' | 'code_sent' | 'code_failed', by: { client?: string; email?: string }) {
  let q = deps.db
    .selectFrom('site_access_attempts')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('publication_id', '=', site.publicationId)
    .where('kind', '=', kind)
    .where('created_at', '>', iso(deps.now().getTime() - WINDOW_MS));
  if (by.client) q = q.where('client_key', '=', by.client);
  if (by.email) q = q.where('email', '=', by.email);
  return Number((await q.executeTakeFirstOrThrow()).n);
}

async function recordAttempt(deps: AppDeps, site: Site, kind: 'password_failed' | 'code_sent' | 'code_failed', client: string, email: string | null) {
  await deps.db.insertInto('site_access_attempts').values({ id: siteId('sat'), publication_id: site.publicationId, kind, client_key: client, email, created_at: iso(deps.now()) }).execute();
}

function codeHash(deps: AppDeps, site: Site, email: string, code: string): string {
  return createHmac('sha256', `${deps.secret}:site-code`).update(`${site.publicationId}:${email}:${code}`).digest('hex');
}

const TOO_MANY = WINDOW_MS / 1000;

export async function postPassword(deps: AppDeps, site: Site, req: IncomingMessage, form: URLSearchParams, send: Send, secure: boolean) {
  const next = safeNext(form.get('next'));
  const client = clientOf(deps, req);
  if ((await countAttempts(deps, site, 'password_failed', { client })) >= LIMITS.passwordPerClient || (await countAttempts(deps, site, 'password_failed', {})) >= LIMITS.passwordPerSite) {
    return send(429, tooManyPage(TOO_MANY), { 'retry-after': String(TOO_MANY) });
  }
  const sealed = await deps.db.selectFrom('publications').select('password_sealed').where('id', '=', site.publicationId).executeTakeFirst();
  const given = form.get('password') ?? '';
  if (sealed?.password_sealed && given && samePassword(given, openPassword(deps.secret, sealed.password_sealed))) {
    return send(303, '', { location: next, 'set-cookie': accessCookie(deps, site, secure, null) });
  }
  await recordAttempt(deps, site, 'password_failed', client, null);
  return send(401, passwordPage(next, 'That password is not right.'));
}

export async function postEmail(deps: AppDeps, site: Site, req: IncomingMessage, form: URLSearchParams, send: Send, origin: string) {
  const next = safeNext(form.get('next'));
  const raw = (form.get('email') ?? '').trim();
  if (!isEmail(raw) || raw.length > 254) return send(422, emailPage(next, 'Enter a valid email address.'));
  const email = normalizeEmail(raw);
  const client = clientOf(deps, req);
  if ((await countAttempts(deps, site, 'code_sent', { email })) >= LIMITS.sendsPerEmail || (await countAttempts(deps, site, 'code_sent', { client })) >= LIMITS.sendsPerClient) {
    return send(429, tooManyPage(TOO_MANY), { 'retry-after': String(TOO_MANY) });
  }
  const code = String(randomInt(0, 1_000_000)).padStart(6, '0');
  const now = deps.now();
  await deps.db.transaction().execute(async (trx) => {
    // A new code replaces the earlier ones.
    await trx.updateTable('site_email_codes').set({ consumed_at: iso(now) }).where('publication_id', '=', site.publicationId).where('email', '=', email).where('consumed_at', 'is', null).execute();
    await trx.insertInto('site_email_codes').values({ id: siteId('sec'), publication_id: site.publicationId, email, code_hash: codeHash(deps, site, email, code), attempts: 0, expires_at: iso(now.getTime() + CODE_TTL_MS), consumed_at: null, created_at: iso(now) }).execute();
    await trx.insertInto('site_access_attempts').values({ id: siteId('sat'), publication_id: site.publicationId, kind: 'code_sent', client_key: client, email, created_at: iso(now) }).execute();
    await sendSystemMail(
      deps,
      { to: email, subject: `Your code for ${new URL(origin).host}: ${code}`, text: `Your one-time code for ${origin} is:\n\n${code}\n\nIt expires in 10 minutes. If you did not ask for it, ignore this email.` },
      { db: trx },
    );
  });
  return send(200, codePage(next, email, null));
}

export async function postCode(deps: AppDeps, site: Site, req: IncomingMessage, form: URLSearchParams, send: Send, secure: boolean) {
  const next = safeNext(form.get('next'));
  const email = normalizeEmail((form.get('email') ?? '').trim());
  const code = (form.get('code') ?? '').replace(/\s+/g, '');
  const client = clientOf(deps, req);
  if ((await countAttempts(deps, site, 'code_failed', { client })) >= LIMITS.codeFailuresPerClient) return send(429, tooManyPage(TOO_MANY), { 'retry-after': String(TOO_MANY) });
  const now = deps.now();
  const row = await deps.db
    .selectFrom('site_email_codes')
    .selectAll()
    .where('publication_id', '=', site.publicationId)
    .where('email', '=', email)
    .where('consumed_at', 'is', null)
    .where('expires_at', '>', iso(now))
    .orderBy('created_at', 'desc')
    .executeTakeFirst();
  if (row && row.attempts < LIMITS.attemptsPerCode && /^\d{6}$/.test(code) && samePassword(row.code_hash, codeHash(deps, site, email, code))) {
    const used = await deps.db.updateTable('site_email_codes').set({ consumed_at: iso(now) }).where('id', '=', row.id).where('consumed_at', 'is', null).executeTakeFirst();
    if (Number(used.numUpdatedRows) === 1) return send(303, '', { location: next, 'set-cookie': accessCookie(deps, site, secure, email) });
  }
  if (row) await deps.db.updateTable('site_email_codes').set((eb) => ({ attempts: eb('attempts', '+', 1) })).where('id', '=', row.id).execute();
  await recordAttempt(deps, site, 'code_failed', client, email);
  if (!row || row.attempts + 1 >= LIMITS.attemptsPerCode) return send(401, emailPage(next, 'That code is not valid any more; request a new one.'));
  return send(401, codePage(next, email, 'That code is not right.'));
}
