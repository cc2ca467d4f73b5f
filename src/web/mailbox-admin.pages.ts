import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { AppDeps } from '../context.ts';
import { archiveMailbox, createMailbox, deleteMailbox, unarchiveMailbox } from '../mailboxes/mailboxes.service.ts';
import { html, layout, messagePage, sendPage } from './html.ts';
import { csrfInput, formField, input, type FieldErrors, type FormBody } from './forms.ts';
import { openMailbox, personCtx } from './person-ctx.ts';
import { csrfToken, toSignIn, type WebSession } from './session.ts';
import { attempt, errorField, refusalPage, refusalText } from './ui.ts';
import { accountMutable, chosenAccount } from './home.pages.ts';
import { listMemberships, type MembershipView } from './web.data.ts';

// Creating, archiving, unarchiving and deleting mailboxes from the browser. Each action is the
// API's service function with the person's request context: the same tenancy, roles, limits and
// typed confirmation for delete.

const ROUTE = { schema: { hide: true }, config: { auth: false } } as const;

interface NewForm {
  accountId: string;
  title: string;
  username: string;
  domain: string;
}

async function readyDomains(deps: AppDeps, accountId: string): Promise<string[]> {
  const rows = await deps.db
    .selectFrom('email_domains')
    .select('hostname')
    .where('account_id', '=', accountId)
    .where('status', '=', 'ready')
    .orderBy('hostname')
    .limit(100)
    .execute();
  return rows.map((r) => r.hostname);
}

async function renderNew(req: FastifyRequest, reply: FastifyReply, deps: AppDeps, session: WebSession, memberships: MembershipView[], form: NewForm, errors: FieldErrors, alert: string | null, status = 200) {
  const csrf = csrfToken(req, reply, deps);
  const domains = await readyDomains(deps, form.accountId);
  const writable = memberships.filter(accountMutable);
  const body = html`<p class="crumbs"><a href="/">Mailboxes</a> / new</p><h1>New mailbox</h1>
${alert ? html`<div class="alert bad" role="alert">${alert}</div>` : ''}
<div class="card"><form method="post" action="/mailboxes/new">${csrfInput(csrf)}
${
  writable.length > 1
    ? html`<label for="f-account_id">Account</label><select id="f-account_id" name="account_id">${writable.map(
        (m) => html`<option value="${m.accountId}"${m.accountId === form.accountId ? html` selected` : ''}>${m.name}</option>`,
      )}</select>`
    : html`<input type="hidden" name="account_id" value="${form.accountId}">`
}
${input('title', 'Title', errors, { value: form.title, hint: 'what this mailbox is for, e.g. “Invoices”', maxlength: 200, autofocus: true })}
${input('username', 'Address name', errors, { value: form.username, hint: 'optional; taken from the title when empty', maxlength: 40 })}
<label for="f-domain">Domain</label>
<select id="f-domain" name="domain"${errors.domain ? html` aria-invalid="true" aria-describedby="f-domain-error"` : ''}>
<option value="">${deps.config.mailDomain} (a short suffix is added to the name)</option>
${domains.map((d) => html`<option value="${d}"${d === form.domain ? html` selected` : ''}>${d} (exact name)</option>`)}
</select>${errors.domain ? html`<div class="error" id="f-domain-error">${errors.domain}</div>` : ''}
<div class="actions"><button type="submit">Create mailbox</button><a href="/">Cancel</a></div>
</form></div>`;
  return sendPage(reply, status, layout({ title: 'New mailbox', user: session.user, csrf, active: 'mailboxes', body, narrow: true }));
}

export function registerMailboxAdminPages(web: FastifyInstance, deps: AppDeps): void {
  web.get('/mailboxes/new', ROUTE, async (req: FastifyRequest<{ Querystring: { account?: string } }>, reply) => {
    const session = req.webSession;
    if (!session) return toSignIn(req, reply);
    const memberships = await listMemberships(deps.db, session.user.id);
    const current = chosenAccount(memberships.filter(accountMutable), req.query.account);
    if (!current) {
      return sendPage(reply, 403, messagePage('You cannot create mailboxes', 'None of your accounts accepts changes now.', { href: '/', text: 'Back to your mailboxes' }, { user: session.user, csrf: csrfToken(req, reply, deps), status: 403 }));
    }
    return renderNew(req, reply, deps, session, memberships, { accountId: current.accountId, title: '', username: '', domain: '' }, {}, null);
  });

  web.post('/mailboxes/new', ROUTE, async (req, reply) => {
    const session = req.webSession;
    if (!session) return toSignIn(req, reply);
    const body = req.body as FormBody;
    const memberships = await listMemberships(deps.db, session.user.id);
    const form: NewForm = {
      accountId: formField(body, 'account_id', 100),
      title: formField(body, 'title', 300).trim(),
      username: formField(body, 'username', 100).trim(),
      domain: formField(body, 'domain', 300).trim(),
    };
    const member = memberships.find((m) => m.accountId === form.accountId);
    if (!member) return renderNew(req, reply, deps, session, memberships, { ...form, accountId: memberships[0]?.accountId ?? '' }, {}, 'Choose one of your accounts.', 422);
    const ctx = personCtx(deps, req, session, member.accountId);
    const done = await attempt(() =>
      createMailbox(ctx, { accountId: member.accountId, title: form.title || null, username: form.username || null, domain: form.domain || null, field: 'mailbox' }),
    );
    if (!done.ok) {
      const field = errorField(done.error);
      const known = field && ['title', 'username', 'domain'].includes(field) ? field : null;
      return renderNew(req, reply, deps, session, memberships, form, known ? { [known]: refusalText(done.error) } : {}, known ? null : refusalText(done.error), done.error.status);
    }
    return reply.redirect(`/mailboxes/${encodeURIComponent(done.value.mailbox.id)}?done=created`, 303);
  });

  const actions = {
    archive: (ctx: Parameters<typeof archiveMailbox>[0], id: string) => archiveMailbox(ctx, id, {}),
    unarchive: (ctx: Parameters<typeof archiveMailbox>[0], id: string) => unarchiveMailbox(ctx, id, {}),
  } as const;
  for (const [name, run] of Object.entries(actions)) {
    web.post(`/mailboxes/:id/${name}`, ROUTE, async (req: FastifyRequest<{ Params: { id: string } }>, reply) => {
      const session = req.webSession;
      if (!session) return toSignIn(req, reply);
      const opened = await openMailbox(deps, req, session, req.params.id);
      if (!opened) return sendPage(reply, 404, messagePage('Mailbox not found', 'There is no such mailbox, or you are not a member of its account.', undefined, { status: 404 }));
      const here = `/mailboxes/${encodeURIComponent(opened.loaded.mailbox.id)}`;
      const done = await attempt(() => run(opened.ctx, opened.loaded.mailbox.id));
      if (!done.ok) return refusalPage(req, reply, deps, session, done.error, { href: here, text: 'Back to the mailbox' });
      const acct = `account=${encodeURIComponent(opened.loaded.access.account.id)}`;
      return reply.redirect(name === 'archive' ? `/?${acct}&view=archived&done=archived` : `${here}?done=unarchived`, 303);
    });
  }

  web.post('/mailboxes/:id/delete', ROUTE, async (req: FastifyRequest<{ Params: { id: string } }>, reply) => {
    const session = req.webSession;
    if (!session) return toSignIn(req, reply);
    const opened = await openMailbox(deps, req, session, req.params.id);
    if (!opened) return sendPage(reply, 404, messagePage('Mailbox not found', 'There is no such mailbox, or you are not a member of its account.', undefined, { status: 404 }));
    const acct = `account=${encodeURIComponent(opened.loaded.access.account.id)}`;
    const done = await attempt(() => deleteMailbox(opened.ctx, opened.loaded.mailbox.id, { confirmation: formField(req.body as FormBody, 'confirmation', 200).trim() }));
    if (!done.ok) return refusalPage(req, reply, deps, session, done.error, { href: `/?${acct}&view=archived`, text: 'Back to archived mailboxes' });
    return reply.redirect(`/?${acct}&view=archived&done=deleted`, 303);
  });
}
