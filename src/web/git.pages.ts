import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { AppDeps } from '../context.ts';
import { connectGitSync, disconnectGitSync, readGitSync, requestGitSync } from '../gitsync/gitsync.service.ts';
import { formatTime, html, layout, sendPage } from './html.ts';
import { csrfInput, formField, type FormBody } from './forms.ts';
import { mayChange, openMailbox, type OpenedMailbox } from './person-ctx.ts';
import { csrfToken, toSignIn, type WebSession } from './session.ts';
import { addressChip, attempt, refusalText } from './ui.ts';
import { mailboxBase, mailboxHeader, mailboxName } from './mailbox.views.ts';
import { notFound } from './mailbox.pages.ts';

// The mailbox's git sync (github_sync_setup.settings_url): the connection's state, connect or
// change it (admins), sync now, disconnect. Every action is the API's git sync service with the
// person's request context; the webhook secret is shown once, on the page that issued it.

const ROUTE = { schema: { hide: true }, config: { auth: false } } as const;

const STATE_TEXT: Record<string, string> = { queued: 'Waiting to sync…', syncing: 'Syncing…', synced: 'In sync', failed: 'Sync failed' };
const BLOCKED_TEXT: Record<string, string> = {
  feature_disabled: 'Git sync is switched off on this Cubby (CUBBY_GIT_SYNC).',
  bucket_archived: 'The mailbox is archived; unarchive it to sync.',
  account_capability_unavailable: 'The account is suspended or read-only.',
  encrypted_account: 'Encrypted accounts cannot sync.',
};

async function renderGit(req: FastifyRequest, reply: FastifyReply, deps: AppDeps, session: WebSession, opened: OpenedMailbox, notice: { alert?: string; secret?: string }, status = 200) {
  const csrf = csrfToken(req, reply, deps);
  const m = opened.loaded.mailbox;
  const base = mailboxBase(m);
  const { github_sync: s, github_sync_setup: setup } = await readGitSync(opened.ctx, m.id, opened.loaded.access.account.id);
  const canWrite = mayChange(opened.loaded) && setup.eligible;
  const canAdmin = mayChange(opened.loaded, 'admin') && setup.eligible;
  const pending = s && (s.sync_state === 'queued' || s.sync_state === 'syncing');
  const stateCard = s
    ? html`<div class="card"${pending ? html` data-refresh-while-pending` : ''}><div class="head"><h2>Repository</h2><span class="tag${s.sync_state === 'synced' ? ' ok' : s.sync_state === 'failed' ? ' bad' : ''}" role="status">${STATE_TEXT[s.sync_state] ?? s.sync_state}</span></div>
<dl class="meta">
<dt>Repository</dt><dd><code>${s.repository_url}</code></dd>
<dt>Branch</dt><dd><code>${s.branch}</code>${s.subdirectory ? html`, folder <code>${s.subdirectory}/</code>` : ''}</dd>
<dt>Commit</dt><dd>${s.last_commit ? html`<code>${s.last_commit.slice(0, 12)}</code>` : html`<span class="muted">none yet</span>`}</dd>
<dt>Last sync</dt><dd>${s.last_synced_at ? formatTime(s.last_synced_at) : html`<span class="muted">never</span>`}</dd>
<dt>Last check</dt><dd>${s.last_checked_at ? formatTime(s.last_checked_at) : html`<span class="muted">never</span>`}</dd>
<dt>Files</dt><dd>${s.synced_files_count} from the repository${s.skipped_files.length ? html`; ${s.skipped_files.length} left out (${s.skipped_files.slice(0, 5).map((f) => f.path).join(', ')})` : ''}</dd>
<dt>Website</dt><dd>${s.auto_publish ? 'rebuilt after every sync' : 'not rebuilt automatically'}</dd>
<dt>Push webhook</dt><dd>${addressChip(s.webhook_url)}</dd>
${s.error ? html`<dt>Error</dt><dd class="error"><code>${s.error.code}</code> ${s.error.message}</dd>` : ''}
</dl>
${
  canWrite
    ? html`<div class="actions"><form class="inline" method="post" action="${base}/git/sync">${csrfInput(csrf)}<button type="submit">Sync now</button></form>${
        canAdmin ? html`<form class="inline" method="post" action="${base}/git/disconnect">${csrfInput(csrf)}<button class="danger" type="submit">Disconnect</button></form>` : ''
      }</div>`
    : ''
}
</div>`
    : html`<div class="card"><h2>Repository</h2><p class="muted">This mailbox is not connected to a git repository.</p></div>`;
  const form = canAdmin
    ? html`<div class="card"><h2>${s ? 'Change the connection' : 'Connect a repository'}</h2>
<form method="post" action="${base}/git/connect">${csrfInput(csrf)}
<label for="g-url">Repository URL <span class="hint">HTTPS clone URL, e.g. https://github.com/owner/site.git</span></label>
<input id="g-url" name="repository_url" type="url" required maxlength="2048" value="${s?.repository_url ?? ''}">
<label for="g-branch">Branch</label><input id="g-branch" name="branch" type="text" required maxlength="255" value="${s?.branch ?? 'main'}">
<label for="g-sub">Folder <span class="hint">the repository folder that becomes the mailbox root; empty for all</span></label><input id="g-sub" name="subdirectory" type="text" maxlength="1024" value="${s?.subdirectory ?? ''}">
<label for="g-token">Access token <span class="hint">${s?.token_configured ? 'a token is stored; leave empty to keep it (it is dropped if the repository moves to another host)' : 'for private repositories; stored encrypted'}</span></label><input id="g-token" name="token" type="password" autocomplete="off" maxlength="1000">
<label class="choice"><input type="checkbox" name="auto_publish" value="1"${s?.auto_publish ? html` checked` : ''}> Rebuild the website after every sync</label>
${s ? html`<label class="choice"><input type="checkbox" name="rotate_webhook_secret" value="1"> Make a new webhook secret</label>` : ''}
<div class="actions"><button type="submit">${s ? 'Save and sync' : 'Connect and sync'}</button></div>
</form></div>`
    : '';
  const body = html`${mailboxHeader({ mailbox: m, tab: 'site', canWrite: mayChange(opened.loaded), canAdmin: mayChange(opened.loaded, 'admin'), csrf })}
<h2>Git sync</h2>
${notice.alert ? html`<div class="alert bad" role="alert">${notice.alert}</div>` : ''}
${
  notice.secret
    ? html`<div class="alert info" role="status">Webhook secret, shown once: <code class="secret" data-testid="git-webhook-secret">${notice.secret}</code>. At the git host, add a push webhook to the URL below with content type <code>application/json</code> and this secret.</div>`
    : ''
}
${setup.blocked_reason ? html`<div class="alert info" role="note">${BLOCKED_TEXT[setup.blocked_reason] ?? setup.blocked_reason}</div>` : ''}
<p class="hint">Each sync writes the branch into this mailbox as one version: new, changed and removed files. Mail under <code>_email/</code> and files the repository never had are left alone.</p>
${stateCard}
${form}`;
  return sendPage(reply, status, layout({ title: `Git sync · ${mailboxName(m)}`, user: session.user, csrf, body, active: 'mailboxes' }));
}

export function registerGitPages(web: FastifyInstance, deps: AppDeps): void {
  web.get('/mailboxes/:id/git', ROUTE, async (req: FastifyRequest<{ Params: { id: string } }>, reply) => {
    const session = req.webSession;
    if (!session) return toSignIn(req, reply);
    const opened = await openMailbox(deps, req, session, req.params.id);
    if (!opened) return notFound(reply, 'Mailbox', undefined, session);
    return renderGit(req, reply, deps, session, opened, {});
  });

  const action = (name: string, run: (o: OpenedMailbox, b: FormBody) => Promise<{ secret?: string } | unknown>) =>
    web.post(`/mailboxes/:id/git/${name}`, ROUTE, async (req: FastifyRequest<{ Params: { id: string } }>, reply) => {
      const session = req.webSession;
      if (!session) return toSignIn(req, reply);
      const opened = await openMailbox(deps, req, session, req.params.id);
      if (!opened) return notFound(reply, 'Mailbox', undefined, session);
      const done = await attempt(() => run(opened, req.body as FormBody));
      if (!done.ok) return renderGit(req, reply, deps, session, opened, { alert: refusalText(done.error) }, done.error.status);
      const secret = (done.value as { secret?: string } | undefined)?.secret;
      // The secret exists only in this answer: show it here instead of redirecting.
      if (secret) return renderGit(req, reply, deps, session, opened, { secret });
      return reply.redirect(`${mailboxBase(opened.loaded.mailbox)}/git`, 303);
    });
  const acct = (o: OpenedMailbox) => o.loaded.access.account.id;
  action('connect', async (o, b) => {
    const token = formField(b, 'token', 1000).trim();
    const r = await connectGitSync(
      o.ctx,
      o.loaded.mailbox.id,
      acct(o),
      {
        repository_url: formField(b, 'repository_url', 2048).trim(),
        branch: formField(b, 'branch', 255).trim() || 'main',
        subdirectory: formField(b, 'subdirectory', 1024),
        ...(token ? { token } : {}),
        auto_publish: formField(b, 'auto_publish', 2) === '1',
        rotate_webhook_secret: formField(b, 'rotate_webhook_secret', 2) === '1',
      },
      null,
    );
    return { secret: r.webhook_secret };
  });
  action('sync', (o) => requestGitSync(o.ctx, o.loaded.mailbox.id, acct(o), null));
  action('disconnect', (o) => disconnectGitSync(o.ctx, o.loaded.mailbox.id, acct(o), null));
}
