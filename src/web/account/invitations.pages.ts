import type { FastifyInstance } from 'fastify';
import type { AppDeps } from '../../context.ts';
import { AppError } from '../../errors.ts';
import { acceptInvitation, findInvitation } from '../../accounts/members.service.ts';
import { sendVerification, verifyEmail } from '../../accounts/signup.service.ts';
import { html, layout, messagePage, sendPage } from '../html.ts';
import { csrfInput, formField, type FormBody } from '../forms.ts';
import { csrfToken, toSignIn } from '../session.ts';
import { ROUTE } from './common.ts';

// Links that arrive by email: accepting an invitation and confirming an address.

const PROBLEM_TEXT = {
  invalid: 'This confirmation link is not valid. Ask for a new one on your account page.',
  expired: 'This confirmation link has expired. Ask for a new one on your account page.',
  used: 'This confirmation link was already used.',
} as const;

export function registerInvitationPages(web: FastifyInstance, deps: AppDeps): void {
  web.get('/invitations/:token', ROUTE, async (req, reply) => {
    const { token } = req.params as { token: string };
    let inv;
    try {
      inv = await findInvitation(deps.db, token, deps.now());
    } catch (err) {
      if (!(err instanceof AppError)) throw err;
      return sendPage(reply, err.status, messagePage('This invitation cannot be used', err.message));
    }
    const session = req.webSession;
    const here = `/invitations/${encodeURIComponent(token)}`;
    const body = session
      ? html`<div class="card"><h1>Join ${inv.account_name}</h1>
<p>You were invited to <strong>${inv.account_name}</strong> as <strong>${inv.role}</strong> (sent to ${inv.email}).</p>
<form method="post" action="${here}">${csrfInput(csrfToken(req, reply, deps))}<div class="actions"><button type="submit">Accept invitation</button></div></form></div>`
      : html`<div class="card"><h1>Join ${inv.account_name}</h1>
<p>You were invited to <strong>${inv.account_name}</strong> as <strong>${inv.role}</strong> (sent to ${inv.email}).</p>
<p><a href="/users/sign_in?next=${encodeURIComponent(here)}">Sign in to accept</a> if you already use Cubby with this address, or <a href="/users/sign_up?invitation=${encodeURIComponent(token)}">create your login</a>.</p></div>`;
    return sendPage(reply, 200, layout({ title: 'Invitation', narrow: true, user: session?.user, csrf: session ? csrfToken(req, reply, deps) : undefined, body }));
  });

  web.post('/invitations/:token', ROUTE, async (req, reply) => {
    const session = req.webSession;
    if (!session) return toSignIn(req, reply);
    const { token } = req.params as { token: string };
    try {
      const { accountId } = await acceptInvitation(deps, token, session.user);
      return reply.redirect(`/account/members?account=${encodeURIComponent(accountId)}`, 303);
    } catch (err) {
      if (!(err instanceof AppError)) throw err;
      return sendPage(reply, err.status, messagePage('This invitation cannot be used', err.message));
    }
  });

  web.get('/users/verify_email', ROUTE, async (req, reply) => {
    const token = formField(req.query as FormBody, 'token', 100);
    const result = await verifyEmail(deps.db, token, deps.now());
    if ('problem' in result) return sendPage(reply, result.problem === 'invalid' ? 404 : 410, messagePage('Email not confirmed', PROBLEM_TEXT[result.problem], { href: '/account', text: 'Your account' }));
    return sendPage(reply, 200, messagePage('Email confirmed', 'Thank you: your address is confirmed. Your accounts can now send mail and publish sites.', { href: '/account', text: 'Your account' }));
  });

  web.post('/account/verify_email', ROUTE, async (req, reply) => {
    const session = req.webSession;
    if (!session) return toSignIn(req, reply);
    const user = await deps.db.selectFrom('users').select(['id', 'email', 'name', 'email_verified_at']).where('id', '=', session.user.id).executeTakeFirstOrThrow();
    if (!user.email_verified_at) await sendVerification(deps, user);
    return reply.redirect('/account?sent=verification', 303);
  });
}
