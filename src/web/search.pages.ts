import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { AppDeps } from '../context.ts';
import { AppError } from '../errors.ts';
import { jsonArray, type EmailAddress } from '../emails/emails.present.ts';
import { search, type SearchHit } from '../search/search.service.ts';
import { MAX_QUERY_LENGTH } from '../search/query.ts';
import { MAX_RANKED_MATCHES } from '../search/search-index.ts';
import { downloadLink } from '../files/blob.routes.ts';
import { formatTime, html, layout, sendPage, type Html } from './html.ts';
import { csrfToken, toSignIn } from './session.ts';
import { personCtx } from './person-ctx.ts';
import { listMemberships } from './web.data.ts';

// The dashboard's search: `/search?q=…[&mailbox=bkt_…]`, over every account the person is a member
// of, through the same service as GET /v1/search (so the same tenancy and syntax). A person is not
// an API key: withheld mail (Junk, being labeled) is found too, as the mailbox pages show it.
// A GET form: searching changes nothing, so it carries no CSRF token.

const ROUTE = { schema: { hide: true }, config: { auth: false } } as const;
const MAILBOX_ID = /^bkt_[A-Za-z0-9]{1,64}$/;
const SYNTAX = 'words, "phrases", -word, from:, to:, subject:, filename:, has:attachment, before:/after:2025-03-31';

/** The search box, for the home and mailbox pages; with a mailbox id it searches that mailbox. */
export function searchForm(opts: { q?: string; mailboxId?: string | null } = {}): Html {
  // Not `q`: the home page's mailbox filter already uses that id.
  const id = opts.mailboxId ? 'q-mailbox' : 'q-all';
  return html`<form method="get" action="/search" role="search" class="card">
<label for="${id}">${opts.mailboxId ? 'Search this mailbox' : 'Search mail and files'} <span class="hint">${SYNTAX}</span></label>
<input type="text" id="${id}" name="q" maxlength="${MAX_QUERY_LENGTH}" value="${opts.q ?? ''}">
${opts.mailboxId ? html`<input type="hidden" name="mailbox" value="${opts.mailboxId}">` : ''}
<div class="actions"><button type="submit">Search</button></div>
</form>`;
}

type Query = { q?: unknown; mailbox?: unknown; cursor?: unknown };

function one(v: unknown): string | undefined {
  return typeof v === 'string' ? v : Array.isArray(v) && typeof v[0] === 'string' ? v[0] : undefined;
}

function resultRow(hit: SearchHit, titles: Map<string, string>, link: string | null): Html {
  const mailbox = html`<a href="/mailboxes/${encodeURIComponent(hit.mailboxId)}">${titles.get(hit.mailboxId) ?? hit.mailboxId}</a>`;
  const snippet = hit.snippet ? html`<div class="muted">${hit.snippet}</div>` : '';
  if (hit.email) {
    const e = hit.email;
    const from = jsonArray<EmailAddress>(e.from_addresses)[0];
    const href = `/mailboxes/${encodeURIComponent(hit.mailboxId)}/emails/${encodeURIComponent(e.id)}`;
    return html`<tr><td><span class="tag">email</span></td><td><a href="${href}">${e.subject || '(no subject)'}</a>${snippet}</td><td>${from ? (from.name ?? from.address) : ''}</td><td>${mailbox}</td><td>${formatTime(e.received_at)}</td></tr>`;
  }
  const f = hit.file!;
  const name = link ? html`<a href="${link}">${f.basename}</a>` : html`${f.basename}`;
  return html`<tr><td><span class="tag">file</span></td><td>${name} <span class="muted">in <code>${f.folder || '/'}</code></span>${snippet}</td><td></td><td>${mailbox}</td><td>${formatTime(f.updated_at)}</td></tr>`;
}

export function registerSearchPage(web: FastifyInstance, deps: AppDeps): void {
  web.get('/search', ROUTE, async (req: FastifyRequest<{ Querystring: Query }>, reply) => {
    const session = req.webSession;
    if (!session) return toSignIn(req, reply);
    const q = (one(req.query.q) ?? '').trim();
    const mailboxParam = one(req.query.mailbox);
    const mailboxId = mailboxParam && MAILBOX_ID.test(mailboxParam) ? mailboxParam : null;
    const cursor = one(req.query.cursor);
    const memberships = await listMemberships(deps.db, session.user.id);
    const csrf = csrfToken(req, reply, deps);
    const page = (status: number, results: Html) =>
      sendPage(reply, status, layout({ title: q ? `Search: ${q.slice(0, 60)}` : 'Search', user: session.user, csrf, body: html`<p class="muted"><a href="/">Dashboard</a> / search</p><h1>Search</h1>${searchForm({ q, mailboxId })}${results}` }));
    if (!q || !memberships.length) return page(200, html``);

    const ctx = personCtx(deps, req, session, memberships[0]!.accountId);
    ctx.credential.grantedAccountIds = memberships.map((m) => m.accountId);
    let result;
    try {
      const accountId = mailboxId ? (await deps.db.selectFrom('mailboxes').select('account_id').where('id', '=', mailboxId).executeTakeFirst())?.account_id : undefined;
      result = await search(ctx, { q, mailboxId, accountId: mailboxId ? (accountId ?? 'acct_none') : undefined, limit: 25, cursor });
    } catch (err) {
      if (err instanceof AppError && (err.code === 'INVALID_ARGUMENT' || err.code === 'MAILBOX_NOT_FOUND' || err.code === 'ACCOUNT_ACCESS_DENIED')) {
        const message = err.code === 'INVALID_ARGUMENT' ? err.message.replace(/^q: /, 'The search ') : 'There is no such mailbox, or you are not a member of its account.';
        return page(err.code === 'INVALID_ARGUMENT' ? 422 : 404, html`<div class="alert bad" role="alert">${message}</div>`);
      }
      throw err;
    }
    const ids = [...new Set(result.items.map((h) => h.mailboxId))];
    const titles = new Map((ids.length ? await deps.db.selectFrom('mailboxes').select(['id', 'title']).where('id', 'in', ids).execute() : []).map((m) => [m.id, m.title || m.id]));
    const links = await Promise.all(
      result.items.map(async (h) => {
        if (!h.file?.current_version_id) return null;
        const v = await deps.db.selectFrom('file_versions').selectAll().where('id', '=', h.file.current_version_id).executeTakeFirst();
        return v?.sha256 ? (await downloadLink(deps, { sha256: v.sha256, filename: v.name, contentType: v.mime_type, byteSize: Number(v.byte_size) })).url : null;
      }),
    );
    const rows = result.items.map((h, i) => resultRow(h, titles, links[i] ?? null));
    const more = result.pagination.next_cursor
      ? html`<div class="pager"><a href="/search?${new URLSearchParams({ q, ...(mailboxId ? { mailbox: mailboxId } : {}), cursor: result.pagination.next_cursor }).toString()}">More results →</a></div>`
      : '';
    return page(
      200,
      html`<div class="card"><h2>Results</h2>${
        rows.length
          ? html`${cutNote(result.truncated)}<table><thead><tr><th>Kind</th><th>Match</th><th>From</th><th>Mailbox</th><th>Date</th></tr></thead><tbody>${rows}</tbody></table>${more}`
          : html`<p class="muted">Nothing matches.</p>`
      }</div>`,
    );
  });
}

/** The index ranks only the newest matches of a very common query (MAX_RANKED_MATCHES): say so, and how to reach older ones. */
function cutNote(truncated: boolean): Html | '' {
  return truncated
    ? html`<p class="muted" role="note">So many items match that only the newest ${MAX_RANKED_MATCHES.toLocaleString('en-US')} matching emails (and as many files) were ranked. Add words, <code>from:</code> or <code>before:</code> to reach older ones.</p>`
    : '';
}
