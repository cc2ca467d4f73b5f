import type { FastifyInstance, FastifyReply } from 'fastify';
import type { AppDeps, RequestCtx } from '../../context.ts';
import { AppError } from '../../errors.ts';
import { claimDomain, deleteDomain, listDomains, requestVerify } from '../../domains/domains.service.ts';
import { presentDomain } from '../../domains/domains.present.ts';
import { formatTime, html, messagePage, sendPage } from '../html.ts';
import { csrfInput, formField, input, type FormBody } from '../forms.ts';
import { accountLayout, accountPage, flash, isAdminRole, ROUTE } from './common.ts';
import { personCtx } from '../person-ctx.ts';

// /account/domains: custom receiving domains over the same service as /v1/account/email_domains.
// The signed-in person acts with a request credential of full-account, mailbox_admin scope,
// capped by their role in src/auth/access.ts (collaborators are refused there, like their keys).

const DONE: Record<string, string> = {
  added: 'Domain added. Publish the DNS records below, then verify.',
  verifying: 'Checking the DNS records now. Reload this page to see the result.',
  removed: 'Domain removed.',
};

function inUseMessage(err: AppError): string {
  const boxes = (err.details.assigned_mailboxes as { email: string }[] | undefined) ?? [];
  const pending = Number(err.details.pending_assignments ?? 0);
  const names = boxes.map((b) => b.email).join(', ');
  return `This domain is still in use${names ? ` by ${names}` : ''}${pending ? ` (${pending} address change${pending === 1 ? '' : 's'} pending)` : ''}. Move those addresses to another domain first.`;
}

export function registerDomainPages(web: FastifyInstance, deps: AppDeps): void {
  web.get('/account/domains', ROUTE, async (req, reply) => {
    const q = req.query as Record<string, unknown>;
    const p = await accountPage(deps, req, reply, q.account);
    if (!p) return reply;
    if (!p.current || !isAdminRole(p.current)) {
      return sendPage(reply, 403, messagePage('Owners and administrators only', 'Only owners and administrators of the account manage its email domains.', { href: '/account', text: 'Your account' }));
    }
    const ctx = personCtx(deps, req, p.session, p.current.accountId);
    const { enabled, views } = await listDomains(ctx, { accountId: p.current.accountId, limit: 100 });
    const hidden = html`${csrfInput(p.csrf)}<input type="hidden" name="account_id" value="${p.current.accountId}">`;
    const cards = views.map((v) => {
      const d = presentDomain(v.domain, v.assigned, deps.config.mxHost);
      const records = d.required_dns_records.map(
        (r) => html`<tr><td>${r.type}</td><td><code>${r.name}</code></td><td><code class="copy">${r.value}</code></td><td class="muted">${r.purpose}</td></tr>`,
      );
      const tag = d.status === 'ready' ? 'ok' : d.status === 'failed' || d.status === 'paused' ? 'bad' : '';
      return html`<div class="card" data-domain="${d.hostname}"><h2>${d.hostname} <span class="tag ${tag}">${d.status}</span></h2>
<p>${d.guidance}</p>
${d.root_domain ? html`<div class="alert bad" role="note">${d.root_guidance ?? ''}${d.suggested_subdomain ? html` Suggested: <code>${d.suggested_subdomain}</code>.` : ''}</div>` : ''}
${d.error ? html`<p class="error">${typeof d.error.message === 'string' ? d.error.message : JSON.stringify(d.error)}</p>` : ''}
<h3>DNS records to publish</h3>
<table><thead><tr><th>Type</th><th>Name</th><th>Value</th><th>Purpose</th></tr></thead><tbody>${records}</tbody></table>
<p class="hint">Last checked ${formatTime(d.last_checked_at)}${d.setup_expires_at && d.status !== 'ready' ? html`; finish setup before ${formatTime(d.setup_expires_at)}` : ''}.</p>
<p>${d.assigned_mailboxes.length ? html`Used by: ${d.assigned_mailboxes.map((b) => b.email).join(', ')}` : html`<span class="muted">No mailbox uses this domain.</span>`}</p>
<form method="post" action="/account/domains/verify" class="inline">${hidden}<input type="hidden" name="domain_id" value="${d.id}"><button type="submit">Verify now</button></form>
<form method="post" action="/account/domains/remove" class="inline">${hidden}<input type="hidden" name="domain_id" value="${d.id}"><input type="hidden" name="hostname" value="${d.hostname}"><button class="danger" type="submit">Remove ${d.hostname}</button></form>
</div>`;
    });
    const body = html`<h1>Email domains of ${p.current.name}</h1>
${flash('good', typeof q.done === 'string' ? DONE[q.done] : undefined)}
${
  enabled
    ? html`<div class="card"><h2>Add a domain</h2>
<form method="post" action="/account/domains/add" novalidate>${hidden}
${input('hostname', 'Hostname', {}, { required: true, maxlength: 253, hint: '(a subdomain such as inbox.example.com keeps your existing mail working)' })}
<div class="actions"><button type="submit">Add domain</button></div></form></div>`
    : html`<div class="card"><p class="muted">Custom email domains are not included in the ${p.current.plan} plan.</p></div>`
}
${cards.length ? cards : html`<p class="muted">No custom domains yet.</p>`}
<p><a href="/account/domains?account=${p.current.accountId}">Refresh status</a></p>`;
    return sendPage(reply, 200, accountLayout(p, 'Email domains', '/account/domains', body));
  });

  const action = (path: string, run: (ctx: RequestCtx, body: FormBody, accountId: string) => Promise<string>) =>
    web.post(path, ROUTE, async (req, reply: FastifyReply) => {
      const session = req.webSession;
      if (!session) return reply.redirect('/users/sign_in', 303);
      const body = req.body as FormBody;
      const accountId = formField(body, 'account_id', 100);
      const back = { href: `/account/domains?account=${encodeURIComponent(accountId)}`, text: 'Back to domains' };
      try {
        const done = await run(personCtx(deps, req, session, accountId), body, accountId);
        return reply.redirect(`/account/domains?account=${encodeURIComponent(accountId)}&done=${done}`, 303);
      } catch (err) {
        if (err instanceof AppError && err.code === 'EMAIL_DOMAIN_IN_USE') return sendPage(reply, err.status, messagePage('Domain in use', inUseMessage(err), back));
        if (err instanceof AppError && err.code === 'ACCOUNT_ACCESS_DENIED') return sendPage(reply, 403, messagePage('Not your account', 'You are not a member of that account.', back));
        if (!(err instanceof AppError)) throw err;
        return sendPage(reply, err.status, messagePage('That did not work', err.message + (typeof err.details.field === 'string' ? ` (${err.details.field})` : ''), back));
      }
    });

  action('/account/domains/add', async (ctx, body, accountId) => {
    await claimDomain(ctx, { accountId, hostname: formField(body, 'hostname', 300) });
    return 'added';
  });
  action('/account/domains/verify', async (ctx, body, accountId) => {
    await requestVerify(ctx, formField(body, 'domain_id', 100), { accountId });
    return 'verifying';
  });
  action('/account/domains/remove', async (ctx, body, accountId) => {
    await deleteDomain(ctx, formField(body, 'domain_id', 100), { accountId, hostname: formField(body, 'hostname', 300), confirm: true, queued: false });
    return 'removed';
  });
}
