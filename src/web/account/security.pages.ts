import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { AppDeps } from '../../context.ts';
import {
  changePassword,
  checkResetToken,
  disableTotp,
  enableTotp,
  endSessions,
  listSessions,
  pendingTotpSecret,
  recoveryCodesLeft,
  requestPasswordReset,
  resetPassword,
  SecurityError,
  startTotpSetup,
  totpSetupView,
  type TotpSetup,
} from '../../accounts/security.service.ts';
import { isEmail, MIN_PASSWORD_LENGTH, verifyPassword } from '../../users/users.service.ts';
import { formatTime, html, layout, messagePage, sendPage, type Html } from '../html.ts';
import { csrfInput, formField, input, type FieldErrors, type FormBody } from '../forms.ts';
import { csrfToken } from '../session.ts';
import { accountLayout, accountPage, flash, ROUTE, type AccountPage } from './common.ts';

// /account/security: password, two-factor sign-in, active sessions; and the password reset
// pages reached from the sign-in page.

const MAX_PASSWORD_INPUT = 1024;
const DONE: Record<string, string> = {
  password: 'Password changed. Your other sessions were signed out.',
  disabled: 'Two-factor sign-in is off.',
  ended: 'Signed out.',
  ended_all: 'Signed out everywhere else.',
};
const RESET_PROBLEM = {
  invalid: 'This reset link is not valid (it may belong to a login that no longer exists). Ask for a new one.',
  expired: 'This reset link has expired: links work for 30 minutes. Ask for a new one.',
  used: 'This reset link was already used. Ask for a new one if you need it.',
} as const;

async function securityPage(deps: AppDeps, p: AccountPage, opts: { notice?: string; errors?: FieldErrors; alert?: string } = {}): Promise<Html> {
  const userId = p.session.user.id;
  const user = await deps.db.selectFrom('users').select(['two_factor_enabled', 'password_changed_at']).where('id', '=', userId).executeTakeFirstOrThrow();
  const sessions = await listSessions(deps.db, userId, deps.now());
  const errors = opts.errors ?? {};
  const twoFactor = user.two_factor_enabled
    ? html`<p><span class="tag ok">on</span> Sign-in asks for a code from your authenticator app. ${await recoveryCodesLeft(deps.db, userId)} recovery codes left.</p>
<p class="hint">Agents cannot sign in with emailed codes while two-factor is on: connect them from this browser instead.</p>
<form method="post" action="/account/security/totp/disable" novalidate>${csrfInput(p.csrf)}
${input('disable_password', 'Password (to turn two-factor off)', errors, { type: 'password', autocomplete: 'current-password', required: true })}
<div class="actions"><button class="danger" type="submit">Turn off two-factor</button></div></form>`
    : html`<p><span class="tag">off</span> Protect your login with a code from an authenticator app as well as your password.</p>
<form method="post" action="/account/security/totp/start">${csrfInput(p.csrf)}<div class="actions"><button type="submit">Set up two-factor sign-in</button></div></form>`;
  const rows = sessions.map(
    (s) => html`<tr><td>${s.user_agent ?? html`<span class="muted">unknown browser</span>`}${s.id === p.session.id ? html` <span class="tag ok">this browser</span>` : ''}<div class="muted">${s.ip ?? ''}</div></td><td>${formatTime(s.created_at)}</td><td>${formatTime(s.last_seen_at)}</td>
<td>${s.id === p.session.id ? '' : html`<form method="post" action="/account/security/sessions/end" class="inline">${csrfInput(p.csrf)}<input type="hidden" name="session_id" value="${s.id}"><button class="danger" type="submit">Sign out</button></form>`}</td></tr>`,
  );
  const body = html`<h1>Sign-in and security</h1>
${flash('good', opts.notice ? DONE[opts.notice] : undefined)}${flash('bad', opts.alert)}
<div class="card"><h2>Password</h2>
<form method="post" action="/account/security/password" novalidate>${csrfInput(p.csrf)}
<input type="text" name="username" value="${p.session.user.email}" autocomplete="username" hidden>
${input('current_password', 'Current password', errors, { type: 'password', autocomplete: 'current-password', required: true })}
${input('new_password', 'New password', errors, { type: 'password', autocomplete: 'new-password', required: true, hint: `(at least ${MIN_PASSWORD_LENGTH} characters)` })}
<div class="actions"><button type="submit">Change password</button></div></form>
${user.password_changed_at ? html`<p class="hint">Last changed ${formatTime(user.password_changed_at)}.</p>` : ''}</div>
<div class="card"><h2>Two-factor sign-in</h2>${twoFactor}</div>
<div class="card"><h2>Active sessions</h2>
<table><thead><tr><th>Browser</th><th>Signed in</th><th>Last seen</th><th><span class="hint">Manage</span></th></tr></thead><tbody>${rows}</tbody></table>
${sessions.length > 1 ? html`<form method="post" action="/account/security/sessions/end">${csrfInput(p.csrf)}<input type="hidden" name="all" value="1"><div class="actions"><button class="danger" type="submit">Sign out everywhere else</button></div></form>` : ''}
</div>`;
  return accountLayout(p, 'Security', '/account/security', body);
}

function setupPage(p: AccountPage, setup: TotpSetup, error?: string): Html {
  const errors: FieldErrors = error ? { code: error } : {};
  return accountLayout(
    p,
    'Set up two-factor sign-in',
    '/account/security',
    html`<div class="card"><h1>Set up two-factor sign-in</h1>
${error ? html`<div class="alert bad" role="alert">Please fix the problem below.</div>` : ''}
<p>Scan this code with an authenticator app (any app that supports time-based codes), then enter the six-digit code it shows.</p>
<p><img src="${setup.qrDataUrl}" width="220" height="220" alt="QR code for your authenticator app"></p>
<p class="hint">Cannot scan? Enter this key by hand: <code data-testid="totp-secret">${setup.secret}</code></p>
<form method="post" action="/account/security/totp/enable" novalidate>${csrfInput(p.csrf)}
<input type="hidden" name="setup_token" value="${setup.setupToken}">
${input('code', 'Six-digit code', errors, { required: true, autocomplete: 'one-time-code', maxlength: 7, autofocus: true })}
<div class="actions"><button type="submit">Turn on two-factor</button></div></form></div>`,
  );
}

function codesPage(p: AccountPage, codes: string[]): Html {
  return accountLayout(
    p,
    'Recovery codes',
    '/account/security',
    html`<div class="card"><h1>Two-factor sign-in is on</h1>
<div class="alert good" role="status">Save these recovery codes now: they are shown only once. Each works once if you lose your phone.</div>
<pre class="mail" data-testid="recovery-codes">${codes.join('\n')}</pre>
<p><a href="/account/security">Done</a></p></div>`,
  );
}

function resetRequestPage(token: string, email: string, alert?: Html | string, good = false): Html {
  return layout({
    title: 'Reset your password',
    narrow: true,
    body: html`<div class="card"><h1>Reset your password</h1>
${alert ? html`<div class="alert ${good ? 'good' : 'bad'}" role="${good ? 'status' : 'alert'}">${alert}</div>` : ''}
<form method="post" action="/users/password/new" novalidate>${csrfInput(token)}
${input('email', 'Email', {}, { type: 'email', value: email, required: true, autocomplete: 'username', maxlength: 254, autofocus: true })}
<div class="actions"><button type="submit">Send reset link</button></div></form>
<p class="hint"><a href="/users/sign_in">Back to sign in</a></p></div>`,
  });
}

function resetPage(csrf: string, token: string, email: string, errors: FieldErrors = {}): Html {
  return layout({
    title: 'Choose a new password',
    narrow: true,
    body: html`<div class="card"><h1>Choose a new password</h1>
<form method="post" action="/users/password/edit" novalidate>${csrfInput(csrf)}
<input type="hidden" name="token" value="${token}">
<input type="text" name="username" value="${email}" autocomplete="username" hidden>
${input('password', 'New password', errors, { type: 'password', autocomplete: 'new-password', required: true, autofocus: true, hint: `(at least ${MIN_PASSWORD_LENGTH} characters)` })}
<div class="actions"><button type="submit">Set password and sign in again</button></div></form>
<p class="hint">Setting a new password signs you out everywhere.</p></div>`,
  });
}

export function registerSecurityPages(web: FastifyInstance, deps: AppDeps): void {
  const page = async (req: FastifyRequest, reply: FastifyReply) => accountPage(deps, req, reply);

  web.get('/account/security', ROUTE, async (req, reply) => {
    const p = await page(req, reply);
    if (!p) return reply;
    const done = (req.query as Record<string, unknown>).done;
    return sendPage(reply, 200, await securityPage(deps, p, { notice: typeof done === 'string' ? done : undefined }));
  });

  web.post('/account/security/password', ROUTE, async (req, reply) => {
    const p = await page(req, reply);
    if (!p) return reply;
    const body = req.body as FormBody;
    try {
      await changePassword(deps, p.session.user.id, formField(body, 'current_password', MAX_PASSWORD_INPUT), formField(body, 'new_password', MAX_PASSWORD_INPUT), p.session.id);
    } catch (err) {
      if (!(err instanceof SecurityError)) throw err;
      return sendPage(reply, 422, await securityPage(deps, p, { errors: { [err.field]: err.message }, alert: 'Your password was not changed.' }));
    }
    return reply.redirect('/account/security?done=password', 303);
  });

  web.post('/account/security/totp/start', ROUTE, async (req, reply) => {
    const p = await page(req, reply);
    if (!p) return reply;
    return sendPage(reply, 200, setupPage(p, await startTotpSetup(deps, p.session.user)));
  });

  web.post('/account/security/totp/enable', ROUTE, async (req, reply) => {
    const p = await page(req, reply);
    if (!p) return reply;
    const body = req.body as FormBody;
    const setupToken = formField(body, 'setup_token', 100);
    try {
      const codes = await enableTotp(deps, p.session.user.id, setupToken, formField(body, 'code', 20));
      return sendPage(reply, 200, codesPage(p, codes));
    } catch (err) {
      if (!(err instanceof SecurityError)) throw err;
      const secret = await pendingTotpSecret(deps, p.session.user.id, setupToken);
      if (!secret) return sendPage(reply, 410, messagePage('Setup expired', err.message, { href: '/account/security', text: 'Back to security' }));
      return sendPage(reply, 422, setupPage(p, await totpSetupView(p.session.user.email, secret, setupToken), err.message));
    }
  });

  web.post('/account/security/totp/disable', ROUTE, async (req, reply) => {
    const p = await page(req, reply);
    if (!p) return reply;
    const user = await deps.db.selectFrom('users').select('password_hash').where('id', '=', p.session.user.id).executeTakeFirstOrThrow();
    if (!(await verifyPassword(user.password_hash, formField(req.body as FormBody, 'disable_password', MAX_PASSWORD_INPUT)))) {
      return sendPage(reply, 422, await securityPage(deps, p, { errors: { disable_password: 'Your password is not correct.' }, alert: 'Two-factor sign-in is still on.' }));
    }
    await disableTotp(deps.db, p.session.user.id, deps.now());
    return reply.redirect('/account/security?done=disabled', 303);
  });

  web.post('/account/security/sessions/end', ROUTE, async (req, reply) => {
    const p = await page(req, reply);
    if (!p) return reply;
    const body = req.body as FormBody;
    const all = formField(body, 'all', 5) === '1';
    await endSessions(deps.db, p.session.user.id, all ? null : formField(body, 'session_id', 100), p.session.id);
    return reply.redirect(`/account/security?done=${all ? 'ended_all' : 'ended'}`, 303);
  });

  // ---- password reset ----

  web.get('/users/password/new', ROUTE, async (req, reply) => sendPage(reply, 200, resetRequestPage(csrfToken(req, reply, deps), '')));

  web.post('/users/password/new', ROUTE, async (req, reply) => {
    const email = formField(req.body as FormBody, 'email', 320).trim();
    if (!isEmail(email)) return sendPage(reply, 422, resetRequestPage(csrfToken(req, reply, deps), email, 'Enter your email address.'));
    await requestPasswordReset(deps, email);
    // The same answer whether or not the address has a login.
    return sendPage(reply, 200, resetRequestPage(csrfToken(req, reply, deps), email, `If ${email} has a Cubby login, a reset link is on its way. It works once, for 30 minutes.`, true));
  });

  web.get('/users/password/edit', ROUTE, async (req, reply) => {
    const token = formField(req.query as FormBody, 'token', 100);
    const found = await checkResetToken(deps.db, token, deps.now());
    if ('problem' in found) return sendPage(reply, found.problem === 'invalid' ? 404 : 410, messagePage('This link cannot be used', RESET_PROBLEM[found.problem], { href: '/users/password/new', text: 'Ask for a new link' }));
    return sendPage(reply, 200, resetPage(csrfToken(req, reply, deps), token, found.email));
  });

  web.post('/users/password/edit', ROUTE, async (req, reply) => {
    const body = req.body as FormBody;
    const token = formField(body, 'token', 100);
    try {
      const result = await resetPassword(deps, token, formField(body, 'password', MAX_PASSWORD_INPUT));
      if ('problem' in result) return sendPage(reply, result.problem === 'invalid' ? 404 : 410, messagePage('This link cannot be used', RESET_PROBLEM[result.problem], { href: '/users/password/new', text: 'Ask for a new link' }));
    } catch (err) {
      if (!(err instanceof SecurityError)) throw err;
      const found = await checkResetToken(deps.db, token, deps.now());
      return sendPage(reply, 422, resetPage(csrfToken(req, reply, deps), token, 'email' in found ? found.email : '', { password: err.message }));
    }
    return sendPage(reply, 200, messagePage('Password changed', 'Your new password is set and every session was signed out. Sign in with the new password.', { href: '/users/sign_in', text: 'Sign in' }));
  });

}
