import type { FastifyReply, FastifyRequest } from 'fastify';
import type { AppDeps } from '../../context.ts';
import { AppError } from '../../errors.ts';
import { html, layout, messagePage, sendPage, type Html } from '../html.ts';
import { csrfToken, toSignIn, type WebSession } from '../session.ts';
import { listMemberships, type MembershipView } from '../web.data.ts';

// Shared by the account pages (/account, /account/members, /account/security): the signed-in
// person, the account the page is about (?account=…, else the first where they administer),
// the sub-navigation and AppErrors shown as pages with their catalogue message.

export const ROUTE = { schema: { hide: true }, config: { auth: false } } as const;

export interface AccountPage {
  session: WebSession;
  memberships: MembershipView[];
  current: MembershipView | null;
  csrf: string;
}

export function isAdminRole(m: MembershipView | null): boolean {
  return m?.role === 'owner' || m?.role === 'administrator';
}

/** The signed-in person and their chosen account, or null after sending them to sign in. */
export async function accountPage(deps: AppDeps, req: FastifyRequest, reply: FastifyReply, accountId?: unknown): Promise<AccountPage | null> {
  const session = req.webSession;
  if (!session) {
    toSignIn(req, reply);
    return null;
  }
  const memberships = await listMemberships(deps.db, session.user.id);
  const wanted = typeof accountId === 'string' ? memberships.find((m) => m.accountId === accountId) : undefined;
  const current = wanted ?? memberships.find((m) => m.role !== 'collaborator') ?? memberships[0] ?? null;
  return { session, memberships, current, csrf: csrfToken(req, reply, deps) };
}

const TABS = [
  ['/account', 'Overview'],
  ['/account/members', 'Members'],
  ['/account/security', 'Security'],
  ['/account/activity', 'Activity'],
] as const;

/** The account pages' own tabs and, with several accounts, a switcher. */
export function accountNav(p: AccountPage, here: string): Html {
  const q = p.current ? `?account=${encodeURIComponent(p.current.accountId)}` : '';
  const tabs = TABS.map(([href, text]) => (href === here ? html`<strong aria-current="page">${text}</strong>` : html`<a href="${href}${href === '/account/security' ? '' : q}">${text}</a>`));
  const switcher =
    p.memberships.length > 1 && here !== '/account/security'
      ? html`<form method="get" action="${here}" class="inline"><label for="f-account">Account</label>
<select id="f-account" name="account">${p.memberships.map((m) => html`<option value="${m.accountId}"${m.accountId === p.current?.accountId ? html` selected` : ''}>${m.name} (${m.role})</option>`)}</select>
<button type="submit">Switch</button></form>`
      : '';
  const joined = tabs.flatMap((t, i) => (i ? [html` · `, t] : [t]));
  return html`<nav class="card" aria-label="Account pages"><p>${joined}</p>${switcher}</nav>`;
}

export function accountLayout(p: AccountPage, title: string, here: string, body: Html): Html {
  return layout({ title, user: p.session.user, csrf: p.csrf, body: html`${accountNav(p, here)}${body}` });
}

/** Sends an AppError as a page: the catalogue's status and message, nothing else. */
export function errorPage(reply: FastifyReply, err: unknown, back: { href: string; text: string }): FastifyReply {
  if (!(err instanceof AppError)) throw err;
  const field = typeof err.details.field === 'string' ? ` (${err.details.field})` : '';
  return sendPage(reply, err.status, messagePage('That did not work', `${err.message}${field}`, back));
}

export function flash(kind: 'good' | 'bad', text: string | Html | undefined | null): Html | '' {
  return text ? html`<div class="alert ${kind}" role="${kind === 'bad' ? 'alert' : 'status'}">${text}</div>` : '';
}
