import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { AppDeps, Actor } from '../context.ts';
import { AppError } from '../errors.ts';
import { readAgentHeaders } from '../auth/credential.ts';
import { formatTime, html, layout, messagePage, sendPage, type Html } from '../web/html.ts';
import { csrfInput, formField, input, type FieldErrors, type FormBody } from '../web/forms.ts';
import { csrfToken, toSignIn, type WebSession } from '../web/session.ts';
import { choiceFields, defaultChoice, loadChoiceContext, readChoice, type ChoiceValues } from './choice.views.ts';
import { listConnections, revokeOwnConnection } from './connections.service.ts';
import { createGrant, GRANT_TTL_SECONDS } from './grants.service.ts';

// The person's agent connections: what each may do, when it was last used, and a revoke
// button; plus "connect an agent" with a one-time connection code.

const ROUTE = { schema: { hide: true }, config: { auth: false } } as const;

const KIND_LABEL: Record<string, string> = {
  oauth_device: 'Device sign-in',
  oauth_code: 'OAuth (remote MCP)',
  email_code: 'Email code',
  grant: 'Connection code',
};

function actorOf(req: FastifyRequest, session: WebSession): Actor {
  return { userId: session.user.id, apiKeyId: null, agent: readAgentHeaders(req.headers), requestId: req.id };
}

interface Extras {
  values?: ChoiceValues;
  label?: string;
  errors?: FieldErrors;
  alert?: string;
  created?: { token: string; expiresAt: string };
}

async function render(req: FastifyRequest, reply: FastifyReply, deps: AppDeps, session: WebSession, status: number, x: Extras = {}) {
  const csrf = csrfToken(req, reply, deps);
  const [connections, ctx] = await Promise.all([listConnections(deps.db, session.user.id), loadChoiceContext(deps.db, session.user.id)]);
  const rows = connections.map((c) => {
    const revoked = c.revoked_at ?? c.key_revoked_at;
    return html`<tr data-connection-id="${c.id}">
<td><strong>${c.client_name ?? c.label ?? 'Agent'}</strong><div class="muted"><code>${c.id}</code></div></td>
<td>${KIND_LABEL[c.kind] ?? c.kind}</td>
<td>${c.account_name}</td>
<td>${c.scope}<div class="muted">${c.mailbox_access === 'all' ? 'all mailboxes' : 'selected mailboxes'}</div></td>
<td>${formatTime(c.created_at)}</td>
<td>${c.last_used_at ? formatTime(c.last_used_at) : html`<span class="muted">never</span>`}</td>
<td>${
      revoked
        ? html`<span class="tag bad">revoked</span><div class="muted">${c.revoked_reason ?? ''}</div>`
        : html`<span class="tag ok">active</span>
<form class="inline" method="post" action="/settings/connections/${c.id}/revoke">${csrfInput(csrf)}<button class="danger" type="submit" aria-label="Revoke ${c.client_name ?? c.label ?? c.id}">Revoke</button></form>`
    }</td></tr>`;
  });
  const created = x.created
    ? html`<div class="alert good" role="status"><strong>One-time connection code.</strong> Give it to your agent now; it works once, until ${formatTime(x.created.expiresAt)}, and is shown only here.
<code class="secret" data-testid="grant-token">${x.created.token}</code>
The agent trades it for its own API key with <code>POST ${deps.publicUrl()}/v1/agent_auth/exchange_grant</code> and body <code>{"grant_token": "…"}</code>.</div>`
    : '';
  const grantForm: Html = ctx.accounts.length
    ? html`<form method="post" action="/settings/connections/grants" novalidate>${csrfInput(csrf)}
${input('label', 'Label', x.errors ?? {}, { value: x.label ?? '', hint: '(which agent this is for)', maxlength: 100 })}
${choiceFields(ctx, x.values ?? defaultChoice(ctx), x.errors ?? {})}
<div class="actions"><button type="submit">Create connection code</button></div></form>`
    : html`<p class="muted">Only account owners and administrators can connect agents.</p>`;
  const body = html`<h1>Connections</h1>
${created}
${x.alert ? html`<div class="alert bad" role="alert">${x.alert}</div>` : ''}
<div class="card"><h2>Agents and applications you connected</h2>
${connections.length ? html`<table><thead><tr><th>Agent</th><th>How</th><th>Account</th><th>Access</th><th>Connected</th><th>Last used</th><th>Status</th></tr></thead><tbody>${rows}</tbody></table>` : html`<p class="muted">No connections yet.</p>`}
</div>
<div class="card"><h2>Connect an agent</h2>
<p>Make a one-time connection code (valid ${GRANT_TTL_SECONDS / 60} minutes) with exactly the access the agent should get. Remote MCP clients connect to <code>${deps.publicUrl()}/mcp</code> and ask you here for approval by themselves.</p>
${grantForm}</div>`;
  return sendPage(reply, status, layout({ title: 'Connections', user: session.user, csrf, body, active: 'connections' }));
}

export function registerConnectionPages(web: FastifyInstance, deps: AppDeps): void {
  web.get('/settings/connections', ROUTE, async (req, reply) => {
    if (!req.webSession) return toSignIn(req, reply);
    return render(req, reply, deps, req.webSession, 200);
  });

  web.post('/settings/connections/grants', ROUTE, async (req, reply) => {
    const session = req.webSession;
    if (!session) return toSignIn(req, reply);
    const body = req.body as FormBody;
    const ctx = await loadChoiceContext(deps.db, session.user.id);
    const { values, errors } = readChoice(body, ctx);
    const label = formField(body, 'label', 500).trim();
    if (label.length > 100) errors.label = 'Use at most 100 characters.';
    if (Object.keys(errors).length) return render(req, reply, deps, session, 422, { values, label, errors, alert: 'No code was made. Please fix the problems below.' });
    try {
      const created = await createGrant(deps, { userId: session.user.id, accountId: values.accountId, scope: values.scope, mailboxAccess: values.access, mailboxPermissions: values.permissions, label: label || null });
      return render(req, reply, deps, session, 201, { created });
    } catch (err) {
      if (!(err instanceof AppError)) throw err;
      return render(req, reply, deps, session, err.status, { values, label, alert: `No code was made: ${err.message}` });
    }
  });

  web.post('/settings/connections/:id/revoke', ROUTE, async (req, reply) => {
    const session = req.webSession;
    if (!session) return toSignIn(req, reply);
    try {
      await revokeOwnConnection(deps.db, session.user.id, (req.params as { id: string }).id.slice(0, 100), actorOf(req, session), deps.now());
    } catch (err) {
      if (err instanceof AppError && err.code === 'CONNECTION_NOT_FOUND') return sendPage(reply, 404, messagePage('Connection not found', 'There is no such connection.', { href: '/settings/connections', text: 'Back to connections' }));
      throw err;
    }
    return reply.redirect('/settings/connections', 303);
  });
}
