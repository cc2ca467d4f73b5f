import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { AppDeps } from '../../context.ts';
import { checkSecondFactor } from '../../accounts/security.service.ts';
import { findUserToken, issueUserToken, useUserToken } from '../../accounts/user-tokens.ts';
import { html, layout, messagePage, sendPage } from '../html.ts';
import { csrfInput, formField, input, type FormBody } from '../forms.ts';
import { cookieBase, csrfToken, safeNext } from '../session.ts';
import { signIn, tooManyAttempts } from '../auth.pages.ts';
import { attemptSucceeded, recordSignInFailure, signInRetryAfter } from '../throttle.ts';
import { ROUTE } from './common.ts';

// The second step of signing in for people with two-factor on. The password step leaves a
// one-time token (5 minutes, 5 wrong codes) in a cookie; this page takes a TOTP code or a
// recovery code and then starts the session.

export const PENDING_COOKIE = 'cubby_2fa';
const PENDING_TTL_MS = 5 * 60_000;
const MAX_WRONG = 5;

interface Pending {
  next: string;
  wrong: number;
  /** The password step's sign_in_attempts row, marked successful once the code is right. */
  attempt: string;
}

/** After a correct password: sends the browser to the second step. */
export async function startSecondFactor(reply: FastifyReply, deps: AppDeps, userId: string, next: string, attempt: string): Promise<FastifyReply> {
  const now = deps.now();
  const token = await issueUserToken(deps.db, userId, 'two_factor', PENDING_TTL_MS, now, JSON.stringify({ next, wrong: 0, attempt } satisfies Pending));
  reply.setCookie(PENDING_COOKIE, token, { ...cookieBase(deps), expires: new Date(now.getTime() + PENDING_TTL_MS) });
  return reply.redirect('/users/two_factor', 303);
}

function codePage(csrf: string, alert?: string) {
  return layout({
    title: 'Two-factor sign-in',
    narrow: true,
    body: html`<div class="card"><h1>Enter your code</h1>
${alert ? html`<div class="alert bad" role="alert">${alert}</div>` : ''}
<p>Open your authenticator app and enter the six-digit code for Cubby. Lost your phone? Enter one of your recovery codes instead.</p>
<form method="post" action="/users/two_factor" novalidate>${csrfInput(csrf)}
${input('code', 'Code', {}, { required: true, autocomplete: 'one-time-code', maxlength: 20, autofocus: true })}
<div class="actions"><button type="submit">Sign in</button></div></form>
<p class="hint"><a href="/users/sign_in">Start again</a></p></div>`,
  });
}

async function pending(deps: AppDeps, req: FastifyRequest) {
  const token = req.cookies[PENDING_COOKIE];
  if (!token) return null;
  const found = await findUserToken(deps.db, token, 'two_factor', deps.now());
  return found.row ?? null;
}

const expired = (reply: FastifyReply) =>
  sendPage(reply, 410, messagePage('Sign in again', 'This sign-in has expired or was already finished. Enter your email and password again.', { href: '/users/sign_in', text: 'Sign in' }));

export function registerTwoFactorPages(web: FastifyInstance, deps: AppDeps): void {
  web.get('/users/two_factor', ROUTE, async (req, reply) => {
    if (!(await pending(deps, req))) return expired(reply);
    return sendPage(reply, 200, codePage(csrfToken(req, reply, deps)));
  });

  web.post('/users/two_factor', ROUTE, async (req, reply) => {
    const row = await pending(deps, req);
    if (!row) return expired(reply);
    const state = JSON.parse(row.data ?? '{}') as Pending;
    const now = deps.now();
    // Wrong codes count against the same (email, client) and client limits as wrong passwords.
    const wait = await signInRetryAfter(deps.db, row.email, req.ip, now);
    if (wait !== null) return tooManyAttempts(reply, wait, 'Too many failed sign-in attempts.');
    const result = await checkSecondFactor(deps, row.user_id, formField(req.body as FormBody, 'code', 40));
    if (result !== 'ok') {
      await recordSignInFailure(deps.db, row.email, req.ip, now);
      const wrong = state.wrong + 1;
      if (wrong >= MAX_WRONG) {
        await useUserToken(deps.db, row.id, deps.now());
        reply.clearCookie(PENDING_COOKIE, cookieBase(deps));
        return sendPage(reply, 429, messagePage('Too many wrong codes', 'Sign in again with your email and password.', { href: '/users/sign_in', text: 'Sign in' }));
      }
      await deps.db.updateTable('user_tokens').set({ data: JSON.stringify({ ...state, wrong }) }).where('id', '=', row.id).execute();
      const alert = result === 'reused' ? 'That code was already used. Wait for the next code from your app (or use another recovery code).' : 'That code is not correct.';
      return sendPage(reply, 422, codePage(csrfToken(req, reply, deps), alert));
    }
    if (!(await useUserToken(deps.db, row.id, deps.now()))) return expired(reply);
    await attemptSucceeded(deps.db, state.attempt);
    reply.clearCookie(PENDING_COOKIE, cookieBase(deps));
    return signIn(req, reply, deps, row.user_id, safeNext(state.next));
  });
}
