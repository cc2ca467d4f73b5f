import type { AppDeps, RequestCtx } from '../context.ts';
import { html, type Html } from './html.ts';
import { csrfInput, formField, type FormBody } from './forms.ts';
import { formatTime } from './html.ts';
import { presentSiteDomain } from '../sites/domains/site-domains.present.ts';
import { addSiteDomain, makePrimary, removeSiteDomain, verifySiteDomain } from '../sites/domains/site-domains.service.ts';

// The "Custom domains" card of the site page (/mailboxes/{id}/site): add a hostname, see the DNS
// records to create as a table with what the last check found, verify, make primary, remove.
// Every action is the API's service with the person's request context (site.pages.ts posts them).

const STATUS_TEXT = { pending: 'Waiting for DNS', verified: 'Connected', failed: 'Failed' } as const;
const RECORD_TEXT = { found: 'found', missing: 'missing', unchecked: 'not checked' } as const;

export async function siteDomainsCard(deps: AppDeps, mailboxId: string, csrf: string, base: string, canWrite: boolean): Promise<Html> {
  const rows = await deps.db.selectFrom('site_domains').selectAll().where('mailbox_id', '=', mailboxId).orderBy('id').execute();
  const hidden = (id: string) => html`${csrfInput(csrf)}<input type="hidden" name="domain_id" value="${id}">`;
  const domains = rows.map((r) => {
    const d = presentSiteDomain(deps, r);
    return html`<section class="domain" data-testid="site-domain"><div class="head"><h3>${d.hostname}</h3><span>${d.primary ? html`<span class="tag accent">primary</span> ` : ''}<span class="tag${d.status === 'verified' ? ' ok' : d.status === 'failed' ? ' bad' : ''}" role="status">${STATUS_TEXT[d.status]}</span></span></div>
${d.status === 'verified' ? html`<p><a href="${d.url}" target="_blank" rel="noopener">${d.url}</a></p>` : ''}
${d.error ? html`<p class="small${d.status === 'failed' ? ' error' : ' muted'}">${d.error.message}</p>` : ''}
<div class="table-wrap"><table><caption class="hint">DNS records to create at your DNS provider${r.last_checked_at ? html` (checked ${formatTime(r.last_checked_at)})` : ''}</caption>
<thead><tr><th scope="col">Type</th><th scope="col">Name</th><th scope="col">Value</th><th scope="col">Found</th></tr></thead>
<tbody>${d.dns_records.map((x) => html`<tr><td>${x.type}</td><td><code>${x.relative_name}</code></td><td><code>${x.value}</code></td><td>${RECORD_TEXT[x.status]}</td></tr>`)}</tbody></table></div>
${
  canWrite
    ? html`<div class="actions"><form class="inline" method="post" action="${base}/site/domain-verify">${hidden(d.id)}<button type="submit">Verify</button></form>${
        d.primary ? '' : html`<form class="inline" method="post" action="${base}/site/domain-primary">${hidden(d.id)}<button class="secondary" type="submit">Make primary</button></form>`
      }<form class="inline" method="post" action="${base}/site/domain-remove">${hidden(d.id)}<button class="danger" type="submit">Remove</button></form></div>`
    : ''
}</section>`;
  });
  const add = canWrite
    ? html`${rows.length ? html`<h3>Add a domain</h3>` : ''}<form method="post" action="${base}/site/domain-add" class="toolbar">${csrfInput(csrf)}<label for="f-domain">Domain</label><input class="grow" id="f-domain" name="hostname" type="text" placeholder="www.example.org" required maxlength="253" autocomplete="off"><button class="secondary" type="submit">Add domain</button></form>
<p class="hint">Create the records shown, then press Verify. The primary domain becomes the site's address; the site name's address redirects to it.</p>`
    : '';
  if (!rows.length && !canWrite) return html``;
  return html`<div class="card" id="custom-domains"><h2>Custom domains</h2>${rows.length ? domains : html`<p class="muted">The site answers only on its own address.</p>`}${add}</div>`;
}

type Opened = { ctx: RequestCtx; loaded: { mailbox: { id: string }; access: { account: { id: string } } } };

/** The card's form actions, posted to /mailboxes/{id}/site/<name> (site.pages.ts registers them). */
export const siteDomainActions: Record<string, (o: Opened, b: FormBody) => Promise<unknown>> = {
  'domain-add': (o, b) => addSiteDomain(o.ctx, o.loaded.mailbox.id, o.loaded.access.account.id, { hostname: formField(b, 'hostname', 300) }, null),
  'domain-verify': (o, b) => verifySiteDomain(o.ctx, o.loaded.mailbox.id, o.loaded.access.account.id, formField(b, 'domain_id', 100)),
  'domain-primary': (o, b) => makePrimary(o.ctx, o.loaded.mailbox.id, o.loaded.access.account.id, formField(b, 'domain_id', 100), true, null),
  'domain-remove': (o, b) => removeSiteDomain(o.ctx, o.loaded.mailbox.id, o.loaded.access.account.id, formField(b, 'domain_id', 100), null),
};
