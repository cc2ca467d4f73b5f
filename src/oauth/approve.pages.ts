import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { AppDeps, Actor } from '../context.ts';
import type { Scope } from '../db/schema.ts';
import { AppError } from '../errors.ts';
import { readAgentHeaders } from '../auth/credential.ts';
import { formActionSource, html, layout, messagePage, sendPage, type Html } from '../web/html.ts';
import { csrfInput, formField, type FieldErrors, type FormBody } from '../web/forms.ts';
import { csrfToken, toSignIn, type WebSession } from '../web/session.ts';
import { choiceFields, defaultChoice, loadChoiceContext, readChoice, type ChoiceContext, type ChoiceValues } from '../agent-auth/choice.views.ts';
import { approveDevice, denyDevice, findPendingDevice, formatUserCode } from './device.service.ts';
import { approveAuthorization, AuthorizePageError, denyAuthorization, findPendingAuthorization, startAuthorization } from './authorize.service.ts';
import { OAuthError, permissionHint } from './oauth.http.ts';

// The pages where a signed-in owner or administrator approves an agent: the device page
// (RFC 8628 verification URI) and the consent page of the authorization-code flow. Both show
// exactly what is asked and let the person choose the account, scope and mailboxes.

const ROUTE = { schema: { hide: true }, config: { auth: false } } as const;

function actorOf(req: FastifyRequest, session: WebSession): Actor {
  return { userId: session.user.id, apiKeyId: null, agent: readAgentHeaders(req.headers), requestId: req.id };
}

interface ApprovalView {
  title: string;
  clientName: string;
  connectionId?: string;
  action: string;
  hidden: Html;
  details: Html;
  ctx: ChoiceContext;
  values: ChoiceValues;
  errors: FieldErrors;
  alert?: string;
  /** Where deciding redirects to (the client's redirect URI), for the page's form-action. */
  returnTo?: string;
}

function approvalPage(req: FastifyRequest, reply: FastifyReply, deps: AppDeps, session: WebSession, status: number, v: ApprovalView) {
  const csrf = csrfToken(req, reply, deps);
  const canApprove = v.ctx.accounts.length > 0;
  const body = html`<div class="card">
${v.connectionId ? html`<p class="hint">Connection ID</p><code class="secret" data-testid="connection-id">${v.connectionId}</code>
<p class="hint">Check that your agent or terminal shows the same Connection ID. It is only a safety check: never type it into a chat.</p>` : ''}
<h1>${v.title}</h1>
<p><strong>${v.clientName}</strong> <span class="hint">(the name the application gave itself)</span> asks to reach your Cubby mailboxes on your behalf.</p>
${v.details}
${v.alert ? html`<div class="alert bad" role="alert">${v.alert}</div>` : ''}
${
  canApprove
    ? html`<form method="post" action="${v.action}" novalidate>
${csrfInput(csrf)}${v.hidden}
${choiceFields(v.ctx, v.values, v.errors)}
<div class="actions"><button type="submit" name="decision" value="approve">Confirm connection</button> <button class="danger" type="submit" name="decision" value="deny">Deny</button></div>
</form>`
    : html`<div class="alert bad" role="alert">Only an account owner or administrator can connect an agent, and you are not one in any account.</div>
<form method="post" action="${v.action}">${csrfInput(csrf)}${v.hidden}<button class="danger" type="submit" name="decision" value="deny">Deny</button></form>`
}
<p class="hint">You can see and revoke connections later under <a href="/settings/connections">Connections</a>.</p>
</div>`;
  // Approve and deny both answer with a redirect to the client; without its origin in
  // form-action, browsers block that redirect and the person is stuck on this page.
  const target = v.returnTo ? formActionSource(v.returnTo) : null;
  return sendPage(reply, status, layout({ title: v.title, user: session.user, csrf, body }), { formAction: target ? [target] : [] });
}

function done(reply: FastifyReply, title: string, text: string) {
  return sendPage(reply, 200, messagePage(title, text, { href: '/settings/connections', text: 'See your connections' }));
}

function enterCodePage(req: FastifyRequest, reply: FastifyReply, deps: AppDeps, session: WebSession, status: number, alert?: string) {
  const body = html`<div class="card"><h1>Connect a device</h1>
${alert ? html`<div class="alert bad" role="alert">${alert}</div>` : ''}
<form method="get" action="/oauth/device"><label for="f-user_code">Code shown by your device or terminal</label>
<input id="f-user_code" name="user_code" type="text" autocomplete="off" maxlength="20" required>
<div class="actions"><button type="submit">Continue</button></div></form></div>`;
  return sendPage(reply, status, layout({ title: 'Connect a device', user: session.user, csrf: csrfToken(req, reply, deps), body, narrow: true }));
}

export function registerApprovalPages(web: FastifyInstance, deps: AppDeps): void {
  web.get('/oauth/device', ROUTE, async (req, reply) => {
    const session = req.webSession;
    if (!session) return toSignIn(req, reply);
    const userCode = formField(req.query as FormBody, 'user_code', 40);
    if (!userCode) return enterCodePage(req, reply, deps, session, 200);
    const device = await findPendingDevice(deps, userCode);
    if (!device) return enterCodePage(req, reply, deps, session, 404, 'That code is unknown, expired or already used. Start the connection again on your device.');
    const ctx = await loadChoiceContext(deps.db, session.user.id);
    return approvalPage(req, reply, deps, session, 200, deviceView(device, ctx, defaultChoice(ctx, permissionHint(device.scope) ?? 'mailbox_write'), {}));
  });

  web.post('/oauth/device', ROUTE, async (req, reply) => {
    const session = req.webSession;
    if (!session) return toSignIn(req, reply);
    const body = req.body as FormBody;
    const device = await findPendingDevice(deps, formField(body, 'user_code', 40));
    if (!device) return enterCodePage(req, reply, deps, session, 404, 'That request is unknown, expired or was already decided. Start the connection again on your device.');
    if (formField(body, 'decision', 10) !== 'approve') {
      await denyDevice(deps, device.id, session.user.id);
      return done(reply, 'Connection denied', 'The device was not connected. You can close this page.');
    }
    const ctx = await loadChoiceContext(deps.db, session.user.id);
    const { values, errors } = readChoice(body, ctx);
    if (Object.keys(errors).length) return approvalPage(req, reply, deps, session, 422, deviceView(device, ctx, values, errors, 'Nothing was connected. Please fix the problems below.'));
    try {
      await approveDevice(deps, device, { userId: session.user.id, accountId: values.accountId, scope: values.scope, mailboxAccess: values.access, mailboxPermissions: values.permissions }, actorOf(req, session));
    } catch (err) {
      if (err instanceof AppError || err instanceof OAuthError) return approvalPage(req, reply, deps, session, err instanceof AppError ? err.status : 409, deviceView(device, ctx, values, {}, `Nothing was connected: ${err.message}`));
      throw err;
    }
    return done(reply, 'Device connected', 'The connection is approved. Return to your agent or terminal; it continues by itself.');
  });

  web.get('/oauth/authorize', ROUTE, async (req, reply) => {
    const q = req.query as Record<string, string | undefined>;
    if (q.pending) {
      const session = req.webSession;
      if (!session) return toSignIn(req, reply);
      const pending = await findPendingAuthorization(deps, q.pending);
      if (!pending) return sendPage(reply, 404, messagePage('Request expired', 'This authorization request is unknown or expired. Start again from the application.'));
      const ctx = await loadChoiceContext(deps.db, session.user.id);
      return approvalPage(req, reply, deps, session, 200, authorizeView(pending, ctx, defaultChoice(ctx, (permissionHint(pending.scope) ?? 'mailbox_write') as Scope), {}));
    }
    let started;
    try {
      started = await startAuthorization(deps, Object.fromEntries(Object.entries(q).map(([k, v]) => [k, typeof v === 'string' ? v.slice(0, 2000) : undefined])));
    } catch (err) {
      if (err instanceof AuthorizePageError || err instanceof OAuthError) return sendPage(reply, 400, messagePage('This request cannot be authorized', err.message));
      throw err;
    }
    if ('redirect' in started) return reply.redirect(started.redirect, 303);
    // The request is stored; the page refers to it by id (short enough to survive sign-in).
    return reply.redirect(`/oauth/authorize?pending=${started.pendingId}`, 303);
  });

  web.post('/oauth/authorize', ROUTE, async (req, reply) => {
    const session = req.webSession;
    if (!session) return toSignIn(req, reply);
    const body = req.body as FormBody;
    const pending = await findPendingAuthorization(deps, formField(body, 'pending', 60));
    if (!pending) return sendPage(reply, 404, messagePage('Request expired', 'This authorization request is unknown, expired or already decided. Start again from the application.'));
    if (formField(body, 'decision', 10) !== 'approve') return reply.redirect(await denyAuthorization(deps, pending), 303);
    const ctx = await loadChoiceContext(deps.db, session.user.id);
    const { values, errors } = readChoice(body, ctx);
    if (Object.keys(errors).length) return approvalPage(req, reply, deps, session, 422, authorizeView(pending, ctx, values, errors, 'Nothing was authorized. Please fix the problems below.'));
    try {
      const to = await approveAuthorization(deps, pending, { userId: session.user.id, accountId: values.accountId, scope: values.scope, mailboxAccess: values.access, mailboxPermissions: values.permissions }, actorOf(req, session));
      return reply.redirect(to, 303);
    } catch (err) {
      if (err instanceof AppError || err instanceof AuthorizePageError) return approvalPage(req, reply, deps, session, err instanceof AppError ? err.status : 409, authorizeView(pending, ctx, values, {}, `Nothing was authorized: ${err.message}`));
      throw err;
    }
  });
}

function deviceView(device: { user_code: string; client_name: string; want_api_key: number }, ctx: ChoiceContext, values: ChoiceValues, errors: FieldErrors, alert?: string): ApprovalView {
  return {
    title: 'Connect a device',
    clientName: device.client_name,
    connectionId: formatUserCode(device.user_code),
    action: '/oauth/device',
    hidden: html`<input type="hidden" name="user_code" value="${formatUserCode(device.user_code)}">`,
    details: device.want_api_key ? html`<p class="hint">The device also receives an API key for the HTTP API, limited to what you choose here.</p>` : html``,
    ctx,
    values,
    errors,
    alert,
  };
}

function authorizeView(pending: { id: string; client_name: string; redirect_uri: string; resource: string; want_api_key: number }, ctx: ChoiceContext, values: ChoiceValues, errors: FieldErrors, alert?: string): ApprovalView {
  let host = pending.redirect_uri;
  try {
    const u = new URL(pending.redirect_uri);
    host = u.origin !== 'null' ? u.origin : `${u.protocol}//${u.host}`;
  } catch {}
  return {
    title: 'Authorize an application',
    clientName: pending.client_name,
    action: '/oauth/authorize',
    hidden: html`<input type="hidden" name="pending" value="${pending.id}">`,
    returnTo: pending.redirect_uri,
    details: html`<p class="hint">After you decide you return to <code>${host}</code>. Access is for <code>${pending.resource}</code>${pending.want_api_key ? ' and includes an API key for the HTTP API' : ''}.</p>`,
    ctx,
    values,
    errors,
    alert,
  };
}
