import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { AppDeps } from '../context.ts';
import { listMailboxes as listMailboxesService } from '../mailboxes/mailboxes.list.ts';
import type { MailboxRow } from '../mailboxes/mailboxes.repo.ts';
import { deleteConfirmation } from '../mailboxes/mailboxes.service.ts';
import { formatTime, html, layout, sendPage } from './html.ts';
import { csrfInput } from './forms.ts';
import { personCtx } from './person-ctx.ts';
import { csrfToken, toSignIn } from './session.ts';
import { addressChip, notice } from './ui.ts';
import { formatSize, mailboxName } from './mailbox.views.ts';
import { listMemberships, type MembershipView } from './web.data.ts';
import { searchForm } from './search.pages.ts';

// Home: the mailboxes of one of the person's accounts (a switcher when there are several), with
// search by title or address, the archived view with unarchive and delete, and "New mailbox".
// The list is the API's (listMailboxes) with the person's request context, so tenancy and the
// address visibility rules are the same.

const ROUTE = { schema: { hide: true }, config: { auth: false } } as const;
const HOME_LIMIT = 200;

type HomeQuery = { account?: string; view?: string; q?: string };

/** The account the page shows: `?account=` when the person is a member there, else the first. */
export function chosenAccount(memberships: MembershipView[], wanted: unknown): MembershipView | undefined {
  return memberships.find((m) => m.accountId === wanted) ?? memberships[0];
}

export function accountMutable(m: MembershipView): boolean {
  return !m.suspended && m.status !== 'read_only';
}

function mailboxItem(b: MailboxRow, archived: boolean, admin: boolean, csrf: string) {
  const href = `/mailboxes/${encodeURIComponent(b.id)}`;
  const unread = Number(b.unread_count);
  const site = (b as MailboxRow & { site_state?: string | null }).site_state;
  return html`<li class="${unread ? 'unread' : ''}">
<div class="main"><a class="title" href="${href}">${unread ? html`<span class="dot" aria-hidden="true"></span>` : ''}${mailboxName(b)}</a>
<div class="small">${addressChip(b.address)}</div></div>
<div class="side">
<span title="unread / total"><strong>${unread}</strong> unread · ${Number(b.message_count)} total</span>
<span>Last mail ${formatTime(b.last_received_at)}</span>
<span>${formatSize(Number(b.storage_bytes))}</span>
${site === 'published' ? html`<a class="tag ok" href="${href}/site">published</a>` : site ? html`<span class="tag">${site}</span>` : ''}
${
  archived && admin
    ? html`<form class="inline" method="post" action="${href}/unarchive">${csrfInput(csrf)}<button class="secondary small" type="submit">Unarchive</button></form>
<details><summary class="small">Delete…</summary><form method="post" action="${href}/delete" class="stack">${csrfInput(csrf)}
<label for="confirm-${b.id}">Type <code>${deleteConfirmation(b.id)}</code> to delete this mailbox, its mail and its files</label>
<input id="confirm-${b.id}" name="confirmation" type="text" autocomplete="off" data-confirm="${deleteConfirmation(b.id)}">
<button class="danger small" type="submit">Delete forever</button></form></details>`
    : ''
}
</div></li>`;
}

export function registerHomePage(web: FastifyInstance, deps: AppDeps): void {
  web.get('/', ROUTE, async (req: FastifyRequest<{ Querystring: HomeQuery }>, reply) => {
    const session = req.webSession;
    if (!session) return toSignIn(req, reply);
    const csrf = csrfToken(req, reply, deps);
    const memberships = await listMemberships(deps.db, session.user.id);
    const current = chosenAccount(memberships, req.query.account);
    if (!current) {
      const body = html`<h1>Mailboxes</h1><div class="card empty">You are not a member of any account yet. Ask an owner to invite you.</div>`;
      return sendPage(reply, 200, layout({ title: 'Mailboxes', user: session.user, csrf, active: 'mailboxes', body }));
    }
    const archived = req.query.view === 'archived';
    const q = typeof req.query.q === 'string' ? req.query.q.slice(0, 200) : '';
    const ctx = personCtx(deps, req, session, current.accountId);
    const { page, counts } = await listMailboxesService(ctx, { accountId: current.accountId, status: archived ? 'archived' : 'active', q, limit: HOME_LIMIT });
    const rows = page.items as MailboxRow[];
    const writable = accountMutable(current);
    const admin = accountMutable(current) && current.role !== 'collaborator';
    const acct = memberships.length > 1 ? `account=${encodeURIComponent(current.accountId)}&` : '';
    const switcher =
      memberships.length > 1
        ? html`<form method="get" action="/" class="toolbar"><label for="account" class="sr-only">Account</label>
<select id="account" name="account">${memberships.map((m) => html`<option value="${m.accountId}"${m.accountId === current.accountId ? html` selected` : ''}>${m.name} (${m.role})</option>`)}</select>
<button class="secondary" type="submit">Switch account</button></form>`
        : '';
    const state = !accountMutable(current)
      ? html`<div class="alert bad" role="status">This account is ${current.suspended ? 'suspended' : 'read-only'}: you can read everything, but changes are refused. See <a href="/account">Account</a>.</div>`
      : '';
    const body = html`<div class="head"><div><h1>Mailboxes</h1><p class="muted small">${current.name} · ${current.role}${current.plan ? ` · ${current.plan} plan` : ''}</p></div>${writable ? html`<a class="button" href="/mailboxes/new${acct ? `?account=${encodeURIComponent(current.accountId)}` : ''}">New mailbox</a>` : ''}</div>
${notice(req.query)}${state}${switcher}
${searchForm()}
<form method="get" action="/" class="toolbar" role="search">
${memberships.length > 1 ? html`<input type="hidden" name="account" value="${current.accountId}">` : ''}${archived ? html`<input type="hidden" name="view" value="archived">` : ''}
<label for="q" class="sr-only">Search mailboxes by title or address</label>
<input class="grow" id="q" type="search" name="q" value="${q}" placeholder="Search by title or address  ( / )">
<button class="secondary" type="submit">Filter</button>${q ? html` <a href="/?${acct}${archived ? 'view=archived' : ''}">Clear</a>` : ''}
</form>
<nav class="tabs" aria-label="Mailbox status">
<a href="/?${acct}"${archived ? '' : html` aria-current="page"`}>Active <span class="tag">${counts.active}</span></a>
<a href="/?${acct}view=archived"${archived ? html` aria-current="page"` : ''}>Archived <span class="tag">${counts.archived}</span></a>
</nav>
<div class="card flush">
${
  rows.length
    ? html`<ul class="rows" data-keys>${rows.map((b) => mailboxItem(b, archived, admin, csrf))}</ul>`
    : html`<div class="empty">${
        q
          ? html`No mailbox matches “${q}”.`
          : archived
            ? 'No archived mailboxes.'
            : writable
              ? html`No mailboxes yet. <a href="/mailboxes/new">Create your first mailbox</a>: it gets its own email address and a private file space.`
              : 'No mailboxes yet.'
      }</div>`
}
</div>
${page.pagination.has_more ? html`<p class="hint">Showing the newest ${HOME_LIMIT}; search to find others.</p>` : ''}`;
    return sendPage(reply, 200, layout({ title: 'Mailboxes', user: session.user, csrf, active: 'mailboxes', body }));
  });
}
