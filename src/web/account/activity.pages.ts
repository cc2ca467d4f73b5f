import type { FastifyInstance } from 'fastify';
import type { AppDeps } from '../../context.ts';
import { activityActions, activityCsv, listActivity, type ActivityFilters } from '../../activity/activity.query.ts';
import { decodeCursor, encodeCursor } from '../../http/cursor.ts';
import { AppError } from '../../errors.ts';
import { formatTime, html, messagePage, sendPage } from '../html.ts';
import { listMembers } from '../../accounts/members.service.ts';
import { listMailboxes } from '../web.data.ts';
import { accountLayout, accountPage, isAdminRole, ROUTE } from './common.ts';

// /account/activity: who (person, key or agent) did what and when, with the reason given;
// filters by mailbox, person, key and action; the same rows as CSV. Owners and administrators.

const PAGE = 50;
const CSV_MAX = 10_000;
const ID = /^[a-z]{2,5}_[A-Za-z0-9]{1,64}$/;

function filtersOf(q: Record<string, unknown>): ActivityFilters {
  const pick = (name: string, shape: RegExp) => (typeof q[name] === 'string' && shape.test(q[name] as string) ? (q[name] as string) : undefined);
  return { userId: pick('user_id', ID), apiKeyId: pick('api_key_id', ID), mailboxId: pick('mailbox_id', ID), action: pick('action', /^[a-z_.]{1,100}$/) };
}

function agentText(agent: Record<string, unknown> | null): string {
  if (!agent) return '';
  // The agent's own identification headers; a bare browser User-Agent says nothing useful here.
  const parts = [agent.agent, agent.client, agent.version].filter((x): x is string => typeof x === 'string' && x !== '');
  return parts.join(' ');
}

export function registerActivityPages(web: FastifyInstance, deps: AppDeps): void {
  const load = async (req: any, reply: any) => {
    const q = req.query as Record<string, unknown>;
    const p = await accountPage(deps, req, reply, q.account);
    if (!p) return null;
    if (!p.current || !isAdminRole(p.current)) {
      sendPage(reply, 403, messagePage('Owners and administrators only', 'Only owners and administrators of the account can read its activity history.', { href: '/account', text: 'Your account' }));
      return null;
    }
    return { p, q, filters: filtersOf(q) };
  };

  web.get('/account/activity', ROUTE, async (req, reply) => {
    const got = await load(req, reply);
    if (!got) return reply;
    const { p, q, filters } = got;
    const accountId = p.current!.accountId;
    const cursorFilters = { account: accountId, ...filters };
    let after: [string, string] | null = null;
    if (typeof q.cursor === 'string' && q.cursor) {
      try {
        after = decodeCursor(deps.secret, q.cursor, 'activity-page', cursorFilters) as [string, string];
      } catch (err) {
        if (!(err instanceof AppError)) throw err;
        return sendPage(reply, 422, messagePage('Page link not valid', 'This page link belongs to other filters. Start from the first page.', { href: '/account/activity', text: 'Activity' }));
      }
    }
    const rows = await listActivity(deps.db, accountId, filters, after, PAGE + 1);
    const more = rows.length > PAGE;
    const shown = rows.slice(0, PAGE);
    const [members, { mailboxes }, actions, keys] = await Promise.all([
      listMembers(deps.db, accountId),
      listMailboxes(deps.db, [accountId], { userId: p.session.user.id }),
      activityActions(deps.db, accountId),
      deps.db.selectFrom('api_keys').select(['id', 'label', 'token_hint']).where('default_account_id', '=', accountId).orderBy('created_at', 'desc').limit(200).execute(),
    ]);
    const params = new URLSearchParams({ account: accountId });
    for (const [k, v] of Object.entries({ user_id: filters.userId, api_key_id: filters.apiKeyId, mailbox_id: filters.mailboxId, action: filters.action })) if (v) params.set(k, v);
    const next = more ? `/account/activity?${params}&cursor=${encodeURIComponent(encodeCursor(deps.secret, 'activity-page', cursorFilters, [shown.at(-1)!.created_at, shown.at(-1)!.id]))}` : null;
    const option = (value: string, text: string, selected: string | undefined) => html`<option value="${value}"${value === selected ? html` selected` : ''}>${text}</option>`;
    const form = html`<form method="get" action="/account/activity" class="card"><input type="hidden" name="account" value="${accountId}">
<div class="grid">
<div><label for="f-mailbox">Mailbox</label><select id="f-mailbox" name="mailbox_id">${option('', 'Any mailbox', filters.mailboxId)}${mailboxes.map((b) => option(b.id, b.title || b.id, filters.mailboxId))}</select></div>
<div><label for="f-person">Person</label><select id="f-person" name="user_id">${option('', 'Anyone', filters.userId)}${members.map((m) => option(m.userId, `${m.name} <${m.email}>`, filters.userId))}</select></div>
<div><label for="f-key">API key</label><select id="f-key" name="api_key_id">${option('', 'Any key or the browser', filters.apiKeyId)}${keys.map((k) => option(k.id, `${k.label ?? 'unnamed'} (…${k.token_hint})`, filters.apiKeyId))}</select></div>
<div><label for="f-action">Action</label><select id="f-action" name="action">${option('', 'Any action', filters.action)}${actions.map((a) => option(a, a, filters.action))}</select></div>
</div>
<div class="actions"><button type="submit">Filter</button> <a href="/account/activity.csv?${params}">Download CSV</a></div></form>`;
    const rowsHtml = shown.map(
      (e) => html`<tr><td>${formatTime(e.created_at)}</td><td><code>${e.action}</code><div class="muted">${e.target_type}${e.target_id ? html` <code>${e.target_id}</code>` : ''}</div></td>
<td>${e.user ? html`${e.user.name ?? ''}<div class="muted">${e.user.email ?? e.user.id}</div>` : html`<span class="muted">system</span>`}</td>
<td>${e.api_key ? html`${e.api_key.label ?? 'API key'} <code>${e.api_key.id}</code>` : html`<span class="muted">browser</span>`}${agentText(e.agent) ? html`<div class="muted">agent: ${agentText(e.agent)}</div>` : ''}</td>
<td>${e.reason ?? html`<span class="muted">—</span>`}</td></tr>`,
    );
    const body = html`<h1>Activity of ${p.current!.name}</h1>${form}
<div class="card">${
      shown.length
        ? html`<table><thead><tr><th>When</th><th>What</th><th>Who</th><th>Key or agent</th><th>Reason</th></tr></thead><tbody>${rowsHtml}</tbody></table>`
        : html`<p class="muted">No activity matches.</p>`
    }
${next ? html`<div class="pager"><a href="${next}">Older entries →</a></div>` : ''}</div>`;
    return sendPage(reply, 200, accountLayout(p, 'Activity', '/account/activity', body));
  });

  web.get('/account/activity.csv', ROUTE, async (req, reply) => {
    const got = await load(req, reply);
    if (!got) return reply;
    const rows = await listActivity(deps.db, got.p.current!.accountId, got.filters, null, CSV_MAX);
    return reply
      .code(200)
      .header('content-type', 'text/csv; charset=utf-8')
      .header('content-disposition', `attachment; filename="activity-${got.p.current!.accountId}.csv"`)
      .header('cache-control', 'no-store')
      .header('x-content-type-options', 'nosniff')
      .send(activityCsv(rows));
  });
}
