import type { FastifyInstance } from 'fastify';
import type { AppDeps, RequestCtx } from '../context.ts';
import { sha256Hex } from '../ids.ts';
import { iso } from '../time.ts';
import { invalidArgument } from '../errors.ts';
import { newSecret } from '../oauth/tokens.ts';
import { messagePage, sendPage } from '../web/html.ts';
import { safeNext } from '../web/session.ts';
import { agentId } from './connections.service.ts';

// browser_login_link: a single-use link an agent hands to its person to open the dashboard at
// a page. It grants nothing: it never signs anyone in; the person still signs in as
// themselves, and then lands on the page.

export const LINK_TTL_SECONDS = 600;
const LINK_SHAPE = /^cubby_ll_[A-Za-z0-9]{43}$/;

export async function createLoginLink(ctx: RequestCtx, redirectPath: string | undefined) {
  const path = safeNext(redirectPath ?? '/');
  if (redirectPath !== undefined && path !== redirectPath) throw invalidArgument('redirect_path', 'must be a path on this site, such as /settings/connections');
  const link = newSecret('cubby_ll_');
  const now = ctx.now();
  await ctx.db
    .insertInto('browser_login_links')
    .values({ id: agentId('bll'), token_hash: link.hash, user_id: ctx.credential.user.id, api_key_id: ctx.credential.keyId, redirect_path: path, expires_at: iso(now.getTime() + LINK_TTL_SECONDS * 1000), used_at: null, created_at: iso(now) })
    .execute();
  const linkPath = `/auth/link/${link.token}`;
  return { url: `${ctx.publicUrl()}${linkPath}`, path: linkPath, single_use: true, requires_login: true, redirect_path: path, expires_in: LINK_TTL_SECONDS };
}

/** The page the link opens (dashboard scope: it reads the browser session, never creates one). */
export function registerLoginLinkPage(web: FastifyInstance, deps: AppDeps): void {
  web.get('/auth/link/:token', { schema: { hide: true }, config: { auth: false } }, async (req, reply) => {
    const token = (req.params as { token: string }).token;
    const now = deps.now();
    const row = LINK_SHAPE.test(token) ? await deps.db.selectFrom('browser_login_links').selectAll().where('token_hash', '=', sha256Hex(token)).executeTakeFirst() : undefined;
    const used = row ? await deps.db.updateTable('browser_login_links').set({ used_at: iso(now) }).where('id', '=', row.id).where('used_at', 'is', null).where('expires_at', '>', iso(now)).executeTakeFirst() : undefined;
    if (!row || Number(used?.numUpdatedRows ?? 0) !== 1) {
      return sendPage(reply, 410, messagePage('This link has expired', 'Links like this work once and for ten minutes. Sign in to Cubby directly instead.', { href: '/users/sign_in', text: 'Sign in' }));
    }
    reply.header('referrer-policy', 'no-referrer');
    const session = req.webSession;
    if (session && session.user.id === row.user_id) return reply.redirect(row.redirect_path, 303);
    if (session) {
      return sendPage(reply, 409, messagePage('Signed in as someone else', 'This link was made for another person. Sign out first, then sign in as that person.', { href: row.redirect_path, text: 'Continue as yourself' }));
    }
    return reply.redirect(row.redirect_path === '/' ? '/users/sign_in' : `/users/sign_in?next=${encodeURIComponent(row.redirect_path)}`, 303);
  });
}
