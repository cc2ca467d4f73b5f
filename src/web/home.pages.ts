import type { FastifyInstance } from 'fastify';
import type { AppDeps } from '../context.ts';
import { html, layout, sendPage } from './html.ts';
import { csrfToken, toSignIn } from './session.ts';
import { listMailboxes, listMemberships } from './web.data.ts';
import { searchForm } from './search.pages.ts';

const ROUTE = { schema: { hide: true }, config: { auth: false } } as const;

export function registerHomePage(web: FastifyInstance, deps: AppDeps): void {
  web.get('/', ROUTE, async (req, reply) => {
    const session = req.webSession;
    if (!session) return toSignIn(req, reply);
    const memberships = await listMemberships(deps.db, session.user.id);
    const { mailboxes } = await listMailboxes(
      deps.db,
      memberships.map((m) => m.accountId),
    );
    const accountName = new Map(memberships.map((m) => [m.accountId, m.name]));
    const mailboxRows = mailboxes.map(
      (b) => html`<tr><td><a href="/mailboxes/${b.id}">${b.title || b.id}</a>${b.archived ? html` <span class="tag">archived</span>` : ''}</td><td>${accountName.get(b.accountId) ?? b.accountId}</td></tr>`,
    );
    const rows = memberships.map(
      (m) => html`<tr>
<td><strong>${m.name}</strong><div class="muted"><code>${m.accountId}</code></div></td>
<td>${m.role}</td>
<td>${m.plan}${m.kind !== 'standard' ? html` <span class="tag">${m.kind}</span>` : ''}</td>
<td>${m.suspended ? html`<span class="tag bad">suspended</span>` : m.status === 'read_only' ? html`<span class="tag bad">read-only</span>` : html`<span class="tag ok">active</span>`}</td>
</tr>`,
    );
    const body = html`<h1>Welcome, ${session.user.name}</h1>
${searchForm()}
<div class="card">
<h2>Your accounts</h2>
${
  memberships.length
    ? html`<table><thead><tr><th>Account</th><th>Role</th><th>Plan</th><th>Status</th></tr></thead><tbody>${rows}</tbody></table>`
    : html`<p class="muted">You are not a member of any account.</p>`
}
</div>
<div class="card">
<h2>Mailboxes</h2>
${
  mailboxRows.length
    ? html`<table><thead><tr><th>Mailbox</th><th>Account</th></tr></thead><tbody>${mailboxRows}</tbody></table>`
    : html`<p class="muted">No mailboxes yet. Create one through the API or the CLI.</p>`
}
</div>
<div class="card">
<h2>API keys</h2>
<p>Agents, scripts and the CLI use API keys to reach your mailboxes through the HTTP API.</p>
<p><a href="/settings/api_keys">Manage API keys →</a></p>
</div>`;
    return sendPage(reply, 200, layout({ title: 'Dashboard', user: session.user, csrf: csrfToken(req, reply, deps), body }));
  });
}
