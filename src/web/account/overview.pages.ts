import type { FastifyInstance } from 'fastify';
import type { AppDeps } from '../../context.ts';
import { accountUsage, type UsageLine } from '../../accounts/usage.service.ts';
import { html, sendPage } from '../html.ts';
import { csrfInput } from '../forms.ts';
import { accountLayout, accountPage, flash, ROUTE } from './common.ts';

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
    const sent = q.sent === 'verification' ? flash('good', 'We sent a new confirmation link.') : '';
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
<div class="card"><h2>Usage</h2><table><thead><tr><th>Limit</th><th>Used</th><th><span class="hint">Share of the limit</span></th></tr></thead><tbody>${usage.map(usageRow)}</tbody></table>
<p class="hint">Storage, mailboxes and mail traffic are shared by the billing group (an agency and its client accounts). Monthly figures reset on the 1st (UTC).</p></div>`;
    return sendPage(reply, 200, accountLayout(p, 'Account', '/account', body));
  });
}
