import { setTimeout } from 'node:timers/promises';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { AppDeps } from '../context.ts';
import { checkNewPerson, registerUser, RegistrationError, MAX_ACCOUNT_NAME } from '../accounts/accounts.service.ts';
import { openSignUpAllowed, sendVerification } from '../accounts/signup.service.ts';
import { acceptInvitation, findInvitation } from '../accounts/members.service.ts';
import { insertUser, normalizeEmail } from '../users/users.service.ts';
import { AppError } from '../errors.ts';
import { startSecondFactor } from './account/two-factor.pages.ts';
import { dummyPasswordCheck, findUserByEmail, isEmail, MIN_PASSWORD_LENGTH, verifyPassword } from '../users/users.service.ts';
import { html, layout, messagePage, sendPage, type Html } from './html.ts';
import { csrfInput, formField, input, type FieldErrors, type FormBody } from './forms.ts';
import { clearSessionCookie, csrfToken, endSession, safeNext, sessionToken, setSessionCookie, startSession } from './session.ts';
import { attemptSucceeded, claimSignIn, claimSignUp } from './throttle.ts';

const ROUTE = { schema: { hide: true }, config: { auth: false } } as const;
const MAX_PASSWORD_INPUT = 1024;

interface SignUpValues {
  email: string;
  name: string;
  account_name: string;
}

interface InvitationView {
  token: string;
  accountName: string;
}

function signUpPage(token: string, values: SignUpValues, errors: FieldErrors, alert?: string, invitation?: InvitationView): Html {
  return layout({
    title: 'Create your account',
    narrow: true,
    body: html`<div class="card">
<h1>${invitation ? 'Join ' + invitation.accountName : 'Create your account'}</h1>
${alert ? html`<div class="alert bad" role="alert">${alert}</div>` : ''}
${invitation ? html`<p>You were invited to the account <strong>${invitation.accountName}</strong>. Choose your name and password to join it.</p>` : ''}
<form method="post" action="/users/sign_up" novalidate>
${csrfInput(token)}
${invitation ? html`<input type="hidden" name="invitation" value="${invitation.token}">` : ''}
${input('email', 'Email', errors, { type: 'email', value: values.email, required: true, autocomplete: 'email', maxlength: 254, autofocus: !invitation })}
${input('name', 'Your name', errors, { value: values.name, required: true, autocomplete: 'name', maxlength: MAX_ACCOUNT_NAME, autofocus: !!invitation })}
${invitation ? '' : input('account_name', 'Account name', errors, { value: values.account_name, hint: '(optional, e.g. your team or company)', autocomplete: 'organization', maxlength: MAX_ACCOUNT_NAME })}
${input('password', 'Password', errors, { type: 'password', hint: `(at least ${MIN_PASSWORD_LENGTH} characters)`, required: true, autocomplete: 'new-password' })}
<div class="actions"><button type="submit">Create account</button></div>
</form>
<p class="hint">Already have an account? <a href="/users/sign_in">Sign in</a>.</p>
</div>`,
  });
}

function signInPage(token: string, email: string, next: string, alert?: string): Html {
  return layout({
    title: 'Sign in',
    narrow: true,
    body: html`<div class="card">
<h1>Sign in to Cubby</h1>
${alert ? html`<div class="alert bad" role="alert">${alert}</div>` : ''}
<form method="post" action="/users/sign_in" novalidate>
${csrfInput(token)}
${next !== '/' ? html`<input type="hidden" name="next" value="${next}">` : ''}
${input('email', 'Email', {}, { type: 'email', value: email, required: true, autocomplete: 'username', maxlength: 254, autofocus: !email })}
${input('password', 'Password', {}, { type: 'password', required: true, autocomplete: 'current-password', autofocus: !!email })}
<div class="actions"><button type="submit">Sign in</button></div>
</form>
<p class="hint"><a href="/users/password/new">Forgot your password?</a> · New to Cubby? <a href="/users/sign_up">Create an account</a>.</p>
</div>`,
  });
}

export function tooManyAttempts(reply: FastifyReply, seconds: number, what: string): FastifyReply {
  const minutes = Math.ceil(seconds / 60);
  reply.header('retry-after', String(seconds));
  return sendPage(
    reply,
    429,
    messagePage('Too many attempts', `${what} Wait ${minutes} minute${minutes === 1 ? '' : 's'} and try again.`, { href: '/users/sign_in', text: 'Back to sign in' }),
  );
}

export async function signIn(req: FastifyRequest, reply: FastifyReply, deps: AppDeps, userId: string, next: string): Promise<FastifyReply> {
  // A fresh token on every sign-in; whatever session the browser had before ends.
  await endSession(deps.db, sessionToken(req));
  const { token, expiresAt } = await startSession(deps.db, userId, deps.now(), { userAgent: req.headers['user-agent'], ip: req.ip });
  setSessionCookie(reply, deps, token, expiresAt);
  return reply.redirect(next, 303);
}

export function registerAuthPages(web: FastifyInstance, deps: AppDeps): void {
  const closedPage = (reply: FastifyReply) =>
    sendPage(
      reply,
      403,
      messagePage('Sign-up is by invitation', 'New accounts on this Cubby need an invitation: ask an account owner or administrator to invite you, then follow the link in their email.', {
        href: '/users/sign_in',
        text: 'Sign in',
      }),
    );
  /** The invitation behind a token, or a page explaining why it cannot be used (sent). */
  const invitationFor = async (reply: FastifyReply, token: string) => {
    try {
      return await findInvitation(deps.db, token, deps.now());
    } catch (err) {
      if (!(err instanceof AppError)) throw err;
      sendPage(reply, err.status, messagePage('This invitation cannot be used', err.message, { href: '/users/sign_in', text: 'Sign in' }));
      return null;
    }
  };

  web.get('/users/sign_up', ROUTE, async (req, reply) => {
    const invitationToken = formField(req.query as FormBody, 'invitation', 100);
    if (invitationToken && req.webSession) return reply.redirect(`/invitations/${encodeURIComponent(invitationToken)}`, 303);
    if (req.webSession) return reply.redirect('/', 303);
    if (invitationToken) {
      const inv = await invitationFor(reply, invitationToken);
      if (!inv) return reply;
      return sendPage(reply, 200, signUpPage(csrfToken(req, reply, deps), { email: inv.email, name: '', account_name: '' }, {}, undefined, { token: invitationToken, accountName: inv.account_name }));
    }
    if (!(await openSignUpAllowed(deps.db, deps.config.signup))) return closedPage(reply);
    return sendPage(reply, 200, signUpPage(csrfToken(req, reply, deps), { email: '', name: '', account_name: '' }, {}));
  });

  web.post('/users/sign_up', ROUTE, async (req, reply) => {
    const body = req.body as FormBody;
    const values: SignUpValues = {
      email: formField(body, 'email', 320).trim(),
      name: formField(body, 'name', 300),
      account_name: formField(body, 'account_name', 300),
    };
    const password = formField(body, 'password', MAX_PASSWORD_INPUT);
    const invitationToken = formField(body, 'invitation', 100);
    const now = deps.now();
    let invitation: InvitationView | undefined;
    if (invitationToken) {
      const inv = await invitationFor(reply, invitationToken);
      if (!inv) return reply;
      invitation = { token: invitationToken, accountName: inv.account_name };
      if (normalizeEmail(values.email) !== inv.email) {
        return sendPage(
          reply,
          403,
          signUpPage(csrfToken(req, reply, deps), values, { email: `This invitation was sent to ${inv.email}; sign up with that address.` }, 'Please fix the problem below.', invitation),
        );
      }
    } else if (!(await openSignUpAllowed(deps.db, deps.config.signup))) return closedPage(reply);
    const attempt = await claimSignUp(deps.db, req.ip, now);
    if ('wait' in attempt) return tooManyAttempts(reply, attempt.wait, 'Too many sign-up attempts from your network.');
    try {
      let userId: string;
      if (invitation) {
        // Invited people join the inviting account (no account of their own); the link proved the address.
        const person = await checkNewPerson(deps.db, { email: values.email, password, name: values.name });
        userId = await deps.db.transaction().execute(async (trx) => {
          const user = await insertUser(trx, { ...person, verified: true }, now);
          await acceptInvitation(deps, invitationToken, user, trx);
          return user.id;
        });
      } else {
        const { user } = await registerUser(
          deps.db,
          { email: values.email, password, name: values.name, accountName: values.account_name.trim() || undefined, verified: false },
          now,
          (trx, u) => sendVerification(deps, u, trx),
        );
        userId = user.id;
      }
      await attemptSucceeded(deps.db, attempt.id);
      return await signIn(req, reply, deps, userId, invitation ? '/account/members' : '/');
    } catch (err) {
      if (err instanceof AppError) return sendPage(reply, err.status, messagePage('This invitation cannot be used', err.message, { href: '/users/sign_in', text: 'Sign in' }));
      if (!(err instanceof RegistrationError)) throw err;
      return sendPage(reply, 422, signUpPage(csrfToken(req, reply, deps), values, { [err.field]: err.message }, 'Please fix the problem below.', invitation));
    }
  });

  web.get('/users/sign_in', ROUTE, async (req, reply) => {
    const next = safeNext((req.query as Record<string, unknown> | undefined)?.next);
    if (req.webSession) return reply.redirect(next, 303);
    return sendPage(reply, 200, signInPage(csrfToken(req, reply, deps), '', next));
  });

  web.post('/users/sign_in', ROUTE, async (req, reply) => {
    const body = req.body as FormBody;
    const email = formField(body, 'email', 320).trim();
    const password = formField(body, 'password', MAX_PASSWORD_INPUT);
    const next = safeNext(formField(body, 'next', 500) || '/');
    const again = (status: number, alert: string) => sendPage(reply, status, signInPage(csrfToken(req, reply, deps), email, next, alert));
    if (!isEmail(email) || !password) return again(422, 'Enter your email address and password.');

    const now = deps.now();
    const attempt = await claimSignIn(deps.db, email, req.ip, now);
    if ('wait' in attempt) return tooManyAttempts(reply, attempt.wait, 'Too many failed sign-in attempts.');
    if (attempt.delayMs) await setTimeout(attempt.delayMs);
    const user = await findUserByEmail(deps.db, email);
    // Unknown addresses cost the same time as wrong passwords.
    const ok = user ? await verifyPassword(user.password_hash, password) : (await dummyPasswordCheck(password), false);
    if (!user || !ok) return again(422, 'Incorrect email or password.');
    // With two-factor on, the attempt counts as failed until the code is right too: restarting
    // sign-in cannot buy fresh guesses at the code.
    if (user.two_factor_enabled) return startSecondFactor(reply, deps, user.id, next, attempt.id);
    await attemptSucceeded(deps.db, attempt.id);
    return signIn(req, reply, deps, user.id, next);
  });

  web.post('/users/sign_out', ROUTE, async (req, reply) => {
    await endSession(deps.db, sessionToken(req));
    clearSessionCookie(reply, deps);
    return reply.redirect('/users/sign_in', 303);
  });
}

