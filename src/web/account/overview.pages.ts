import type { FastifyInstance } from 'fastify';
import type { AppDeps } from '../../context.ts';
import { accountUsage, type UsageLine } from '../../accounts/usage.service.ts';
import { html, sendPage } from '../html.ts';
import { csrfInput } from '../forms.ts';
import { accountLayout, accountPage, flash, isAdminRole, ROUTE, type AccountPage } from './common.ts';
import { input } from '../forms.ts';
import { logoCard } from './logo.pages.ts';
import { MAX_ACCOUNT_NAME, MAX_CLIENT_NAME } from '../../accounts/accounts.service.ts';
import { AGENCY_MAX_ACCOUNTS } from '../../accounts/plans.ts';
import type { AppDeps as Deps } from '../../context.ts';

async function clientsCard(deps: Deps, p: AccountPage, agencyId: string) {
  const clients = await deps.db.selectFrom('accounts').select(['id', 'name', 'client_name', 'created_at']).where('parent_account_id', '=', agencyId).orderBy('created_at').execute();
  const rows = clients.map((c) => html`<tr><td><a href="/account?account=${c.id}">${c.name}</a></td><td>${c.client_name ?? html`<span class="muted">—</span>`}</td><td><code>${c.id}</code></td></tr>`);
  return html`<div class="card"><h2>Client accounts <span class="hint">(${clients.length + 1} of ${AGENCY_MAX_ACCOUNTS} accounts, the agency included)</span></h2>
${clients.length ? html`<table><thead><tr><th>Account</th><th>Client</th><th>Id</th></tr></thead><tbody>${rows}</tbody></table>` : html`<p class="muted">No client accounts yet.</p>`}
<form method="post" action="/account/clients" novalidate>${csrfInput(p.csrf)}<input type="hidden" name="account_id" value="${agencyId}">
<div class="grid"><div>${input('client_account_name', 'New client account name', {}, { required: true, maxlength: MAX_ACCOUNT_NAME })}</div>
<div>${input('client_name', 'Client name', {}, { maxlength: MAX_CLIENT_NAME, hint: '(optional)' })}</div></div>
<div class="actions"><button type="submit">Create client account</button></div></form></div>`;
}

// /account: the account's plan, state and usage against every limit of GET /v1/account/limits.

function amount(n: number, bytes?: boolean): string {
  if (!bytes) return n.toLocaleString('en');
  const units = ['B', 'KB', 'MB', 'GB', 'TB'];
  let v = n;
  let i = 0;
  while (v >= 1000 && i < units.length - 1) (v /= 1000), i++;
  return `${i ? v.toFixed(1) : v} ${units[i]}`;
}

function usageRow(u: UsageLine, i: number) {
  const id = `use-${i}`;
  const of = u.limit === null ? 'no limit' : `of ${amount(u.limit, u.bytes)}`;
  const meter =
    u.limit === null || u.limit === 0
      ? html`<span class="muted">${u.limit === 0 ? 'not included in the plan' : 'unlimited'}</span>`
      : html`<meter id="${id}" min="0" max="${u.limit}" low="${Math.floor(u.limit * 0.8)}" high="${Math.floor(u.limit * 0.95)}" optimum="0" value="${Math.min(u.used, u.limit)}">${amount(u.used, u.bytes)} ${of}</meter>`;
  return html`<tr><td>${u.limit === null || u.limit === 0 ? u.label : html`<label for="${id}">${u.label}</label>`}</td><td>${amount(u.used, u.bytes)} <span class="muted">${of}</span></td><td>${meter}</td></tr>`;
}

export function registerOverviewPage(web: FastifyInstance, deps: AppDeps): void {
  web.get('/account', ROUTE, async (req, reply) => {
    const q = req.query as Record<string, unknown>;
    const p = await accountPage(deps, req, reply, q.account);
    if (!p) return reply;
    const user = await deps.db.selectFrom('users').select(['email_verified_at', 'two_factor_enabled']).where('id', '=', p.session.user.id).executeTakeFirstOrThrow();
    const verify = user.email_verified_at
      ? ''
      : html`<div class="alert bad" role="alert">Confirm your email address (${p.session.user.email}) to send mail and publish sites: follow the link we sent you.
<form method="post" action="/account/verify_email" class="inline">${csrfInput(p.csrf)}<button class="link" type="submit">Send the link again</button></form></div>`;
    const notices: Record<string, string> = { renamed: 'Account renamed.', logo: 'Logo saved. Published file listings show it after their rebuild.', logo_removed: 'Logo removed.', client_created: 'Client account created. You are looking at it now.' };
    const sent = q.sent === 'verification' ? flash('good', 'We sent a new confirmation link.') : q.sent === 'wait' ? flash('bad', 'We sent three links in the last half hour: check your inbox (and spam folder), or try again later.') : typeof q.done === 'string' ? flash('good', notices[q.done]) : '';
    if (!p.current) return sendPage(reply, 200, accountLayout(p, 'Account', '/account', html`<h1>Your account</h1>${sent}${verify}<p class="muted">You are not a member of any account.</p>`));
    const account = await deps.db.selectFrom('accounts').selectAll().where('id', '=', p.current.accountId).executeTakeFirstOrThrow();
    const usage = await accountUsage(deps.db, account, deps.now());
    const state = account.suspended_at ? html`<span class="tag bad">suspended</span>` : account.status === 'read_only' ? html`<span class="tag bad">read-only</span>` : html`<span class="tag ok">active</span>`;
    const body = html`<h1>${account.name}</h1>
${sent}${verify}
<div class="card"><h2>Account</h2>
<dl class="meta">
<dt>Your role</dt><dd>${p.current.role}</dd>
<dt>Plan</dt><dd>${account.plan}${account.kind !== 'standard' ? html` <span class="tag">${account.kind}</span>` : ''}</dd>
<dt>State</dt><dd>${state}</dd>
<dt>Website publishing</dt><dd>${account.website_publishing_enabled ? html`<span class="tag ok">enabled</span>` : html`<span class="tag">not enabled</span> <span class="muted">(an operator turns it on)</span>`}</dd>
<dt>Two-factor sign-in</dt><dd>${user.two_factor_enabled ? html`<span class="tag ok">on</span>` : html`<a href="/account/security">off — turn it on</a>`}</dd>
<dt>Account id</dt><dd><code>${account.id}</code></dd>
</dl></div>
${isAdminRole(p.current) ? html`<div class="card"><h2>Name</h2>
<form method="post" action="/account/rename" novalidate>${csrfInput(p.csrf)}<input type="hidden" name="account_id" value="${account.id}">
${input('name', 'Account name', {}, { value: account.name, required: true, maxlength: MAX_ACCOUNT_NAME, hint: '(shown as {{account_name}} on published file listings)' })}
<div class="actions"><button type="submit">Rename</button></div></form></div>
${logoCard(account, p.csrf)}` : ''}
${account.kind === 'agency' && p.current.role === 'owner' ? await clientsCard(deps, p, account.id) : ''}
${account.parent_account_id ? html`<p class="hint">Client account of <a href="/account?account=${account.parent_account_id}">its agency</a>${account.client_name ? html` for ${account.client_name}` : ''}.</p>` : ''}
<div class="card"><h2>Usage</h2><table><thead><tr><th>Limit</th><th>Used</th><th><span class="hint">Share of the limit</span></th></tr></thead><tbody>${usage.map(usageRow)}</tbody></table>
<p class="hint">Storage, mailboxes and mail traffic are shared by the billing group (an agency and its client accounts). Monthly figures reset on the 1st (UTC).</p></div>`;
    return sendPage(reply, 200, accountLayout(p, 'Account', '/account', body));
  });
}
