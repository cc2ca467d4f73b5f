import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { AppDeps } from '../context.ts';
import type { PublicationsTable } from '../sites/sites.schema.ts';
import { findPublication } from '../sites/publications.repo.ts';
import { presentPublication } from '../sites/publications.present.ts';
import { requestPublish, retryPublish } from '../sites/publish.service.ts';
import { renameSlug, requestUnpublish } from '../sites/manage.service.ts';
import { checkExplicitSlug } from '../sites/slugs.ts';
import { AppError } from '../errors.ts';
import { isPaidPlan } from '../accounts/plans.ts';
import { formatTime, html, layout, sendPage, type Html } from './html.ts';
import { csrfInput, formField, type FormBody } from './forms.ts';
import { mayChange, openMailbox, type OpenedMailbox } from './person-ctx.ts';
import { csrfToken, toSignIn, type WebSession } from './session.ts';
import { addressChip, attempt, refusalText } from './ui.ts';
import { mailboxBase, mailboxHeader, mailboxName } from './mailbox.views.ts';
import { notFound } from './mailbox.pages.ts';
import { folderListing } from './files.data.ts';
import { siteDomainActions, siteDomainsCard } from './site-domains.views.ts';
import { rangeKey, siteVisits, visitsCard } from './site-analytics.views.ts';

// The mailbox's website: publish (or a 24-hour preview), unpublish, the build's state (the page
// refreshes itself while a build runs), the public URL, access mode with the password, SPA mode,
// the root folder, the slug, the last error, and why publishing is off when it is. Every action
// is the API's sites service with the person's request context.

const ROUTE = { schema: { hide: true }, config: { auth: false } } as const;

const STATE_TEXT: Record<string, string> = {
  queued: 'Waiting to build…',
  processing: 'Building…',
  ready: 'Live',
  failed: 'Build failed',
  unpublishing: 'Taking down…',
  unpublished: 'Not published',
};

function publicationCard(deps: AppDeps, p: PublicationsTable | undefined, title: string, csrf: string, base: string, canWrite: boolean, kind: 'main' | 'preview'): Html {
  if (!p || p.status === 'unpublished') return html`<div class="card"><h2>${title}</h2><p class="muted">${kind === 'main' ? 'This mailbox has no website yet.' : 'No preview.'}</p></div>`;
  const v = presentPublication(deps, p, { owner: canWrite });
  const pending = v.publish_pending || p.publish_state === 'unpublishing';
  return html`<div class="card"${pending ? html` data-refresh-while-pending` : ''}><div class="head"><h2>${title}</h2><span class="tag${p.publish_state === 'ready' ? ' ok' : p.publish_state === 'failed' ? ' bad' : ''}" role="status">${STATE_TEXT[p.publish_state] ?? p.publish_state}</span></div>
<dl class="meta">
<dt>URL</dt><dd>${addressChip(v.public_url)} ${p.publish_state === 'ready' ? html`<a href="${v.public_url}" target="_blank" rel="noopener">Open</a>` : ''}</dd>
<dt>Access</dt><dd>${p.access_mode === 'password' ? 'password' : p.access_mode === 'require_email' ? 'visitors confirm their email' : 'public'}</dd>
${
  'password' in v && v.password
    ? html`<dt>Password</dt><dd><details><summary>Reveal</summary><code class="secret" data-testid="site-password">${v.password}</code></details></dd>`
    : ''
}
<dt>Mode</dt><dd>${p.site_mode === 'spa' ? 'single-page app (unknown paths serve the entry page)' : 'static'}</dd>
<dt>Root folder</dt><dd><code>${p.root_directory || '/'}</code></dd>
${p.expires_at ? html`<dt>Expires</dt><dd>${formatTime(p.expires_at)}</dd>` : ''}
<dt>Last build</dt><dd>${formatTime(p.publish_completed_at ?? p.publish_started_at ?? p.publish_enqueued_at)}</dd>
${p.publish_error ? html`<dt>Error</dt><dd class="error">${p.publish_error}</dd>` : ''}
</dl>
${
  canWrite
    ? html`<div class="actions">${
        p.publish_state === 'failed' ? html`<form class="inline" method="post" action="${base}/site/retry">${csrfInput(csrf)}<button type="submit">Retry build</button></form>` : ''
      }<form class="inline" method="post" action="${base}/site/unpublish">${csrfInput(csrf)}<input type="hidden" name="kind" value="${kind}"><button class="danger" type="submit">Unpublish${kind === 'preview' ? ' preview' : ''}</button></form></div>`
    : ''
}
</div>`;
}

async function renderSite(req: FastifyRequest, reply: FastifyReply, deps: AppDeps, session: WebSession, opened: OpenedMailbox, alert: string | null, status = 200) {
  const csrf = csrfToken(req, reply, deps);
  const m = opened.loaded.mailbox;
  const base = mailboxBase(m);
  const account = opened.loaded.access.account;
  const canWrite = mayChange(opened.loaded) && !m.archived_at;
  const [main, preview, top] = await Promise.all([findPublication(deps.db, m.id, 'main'), findPublication(deps.db, m.id, 'preview'), folderListing(deps, m.id, '', 'name', false)]);
  const enabled = account.website_publishing_enabled === 1;
  const paid = isPaidPlan(account.plan);
  const cur = main && main.status !== 'unpublished' ? main : undefined;
  const folders = top.folders.filter((f) => f.name !== '_email');
  const slug = (m as typeof m & { site_slug?: string | null }).site_slug ?? main?.public_slug ?? null;
  const form = canWrite && enabled
    ? html`<div class="card"><h2>${cur ? 'Update the website' : 'Publish'}</h2>
<form method="post" action="${base}/site/publish">${csrfInput(csrf)}
<label for="f-root">Root folder <span class="hint">the folder whose files become the site</span></label>
<select id="f-root" name="root"><option value="">/ (the whole mailbox)</option>${folders.map((f) => html`<option value="${f.name}"${cur?.root_directory === f.name ? html` selected` : ''}>${f.name}/</option>`)}</select>
<fieldset><legend>Access</legend>
<label class="choice"><input type="radio" name="access_mode" value="public"${!cur || cur.access_mode === 'public' ? html` checked` : ''}> Public: anyone with the link</label>
<label class="choice"><input type="radio" name="access_mode" value="password"${cur?.access_mode === 'password' ? html` checked` : ''}> Password${paid ? '' : html` <span class="hint">(paid plans; previews on any plan)</span>`}</label>
<label class="choice"><input type="radio" name="access_mode" value="require_email"${cur?.access_mode === 'require_email' ? html` checked` : ''}> Visitors confirm their email${paid ? '' : html` <span class="hint">(paid plans)</span>`}</label>
<label class="choice"><input type="checkbox" name="regenerate_password" value="1"> Make a new password</label>
</fieldset>
<label class="choice"><input type="checkbox" name="spa" value="1"${cur?.site_mode === 'spa' ? html` checked` : ''}> Single-page app: unknown paths serve the entry page</label>
<div class="actions"><button type="submit" name="kind" value="main">${cur ? 'Publish again' : 'Publish'}</button><button class="secondary" type="submit" name="kind" value="preview">Publish a 24-hour preview</button></div>
</form></div>
<div class="card"><h2>Address</h2><form method="post" action="${base}/site/slug" class="toolbar">${csrfInput(csrf)}
<label for="f-slug">Site name</label><input class="grow" id="f-slug" name="slug" type="text" value="${slug ?? ''}" required maxlength="63" pattern="[a-z0-9-]+" data-slug-check="${base}/site/slug" aria-describedby="slug-status">
<button class="secondary" type="submit">Rename</button></form><p class="small" id="slug-status" role="status" aria-live="polite"></p><p class="hint">Lower-case letters, digits and dashes. The old address redirects to the current one for 30 days.</p></div>`
    : '';
  // Visits of the live site (also after an unpublish would hide it: only while there is one).
  const range = rangeKey((req.query as { range?: unknown }).range);
  const visits = cur && cur.publish_state !== 'queued' ? visitsCard(await siteVisits(deps, cur, range), range, base) : null;
  const body = html`${mailboxHeader({ mailbox: m, tab: 'site', canWrite: mayChange(opened.loaded), canAdmin: mayChange(opened.loaded, 'admin'), csrf })}
${alert ? html`<div class="alert bad" role="alert">${alert}</div>` : ''}
${
  !enabled
    ? html`<div class="alert info" role="note">Publishing websites is off for this account. An operator of this Cubby turns it on per account (<code>cubby admin set-publishing --account ${account.id} --enabled true</code>); until then the files stay private.</div>`
    : ''
}
${m.archived_at ? html`<div class="alert info" role="note">The mailbox is archived; unarchive it to publish.</div>` : ''}
${publicationCard(deps, main, 'Website', csrf, base, canWrite, 'main')}
${visits ?? ''}
${preview && preview.status !== 'unpublished' ? publicationCard(deps, preview, 'Preview', csrf, base, canWrite, 'preview') : ''}
${form}
${enabled ? await siteDomainsCard(deps, m.id, csrf, base, canWrite) : ''}
<p><a href="${base}/git">Git sync</a>: keep this mailbox in step with a branch of a git repository, and rebuild the site on every push.</p>`;
  return sendPage(reply, status, layout({ title: `Site · ${mailboxName(m)}`, user: session.user, csrf, body, active: 'mailboxes', assets: visits ? ['uplot.css', 'uplot.js', 'site-chart.js'] : [] }));
}

export function registerSitePages(web: FastifyInstance, deps: AppDeps): void {
  web.get('/mailboxes/:id/site', ROUTE, async (req: FastifyRequest<{ Params: { id: string } }>, reply) => {
    const session = req.webSession;
    if (!session) return toSignIn(req, reply);
    const opened = await openMailbox(deps, req, session, req.params.id);
    if (!opened) return notFound(reply, 'Mailbox', undefined, session);
    return renderSite(req, reply, deps, session, opened, null);
  });

  // Whether a site name is free, for the rename field as the person types (the rename checks again).
  web.get('/mailboxes/:id/site/slug', ROUTE, async (req: FastifyRequest<{ Params: { id: string }; Querystring: { slug?: string } }>, reply) => {
    const session = req.webSession;
    if (!session) return reply.code(401).send({ available: false, message: 'Sign in again.' });
    const opened = await openMailbox(deps, req, session, req.params.id);
    if (!opened) return reply.code(404).send({ available: false, message: 'Mailbox not found.' });
    let slug: string;
    try {
      slug = checkExplicitSlug(typeof req.query.slug === 'string' ? req.query.slug : '', 'public_slug');
    } catch (err) {
      if (err instanceof AppError) return reply.header('cache-control', 'no-store').send({ available: false, message: err.message.replace(/^public_slug: /, '') });
      throw err;
    }
    const row = await deps.db.selectFrom('site_slugs').select('mailbox_id').where('slug', '=', slug).executeTakeFirst();
    const mine = row?.mailbox_id === opened.loaded.mailbox.id;
    return reply
      .header('cache-control', 'no-store')
      .send({ available: !row || mine, message: mine ? 'This is the current name.' : row ? 'Another site uses this name.' : 'Available.' });
  });

  const action = (name: string, run: (o: OpenedMailbox, b: FormBody) => Promise<unknown>) =>
    web.post(`/mailboxes/:id/site/${name}`, ROUTE, async (req: FastifyRequest<{ Params: { id: string } }>, reply) => {
      const session = req.webSession;
      if (!session) return toSignIn(req, reply);
      const opened = await openMailbox(deps, req, session, req.params.id);
      if (!opened) return notFound(reply, 'Mailbox', undefined, session);
      const done = await attempt(() => run(opened, req.body as FormBody));
      if (!done.ok) return renderSite(req, reply, deps, session, opened, refusalText(done.error), done.error.status);
      return reply.redirect(`${mailboxBase(opened.loaded.mailbox)}/site`, 303);
    });
  const acct = (o: OpenedMailbox) => o.loaded.access.account.id;
  action('publish', (o, b) =>
    requestPublish(
      o.ctx,
      o.loaded.mailbox.id,
      acct(o),
      {
        access_mode: formField(b, 'access_mode', 20) || 'public',
        site_mode: formField(b, 'spa', 2) === '1' ? 'spa' : 'static',
        publication_root_directory: formField(b, 'root', 1024),
        regenerate_password: formField(b, 'regenerate_password', 2) === '1',
      },
      formField(b, 'kind', 10) === 'preview' ? 'preview' : 'main',
      null,
    ),
  );
  action('unpublish', (o, b) => requestUnpublish(o.ctx, o.loaded.mailbox.id, acct(o), formField(b, 'kind', 10) === 'preview' ? 'preview' : 'main', null));
  action('retry', (o) => retryPublish(o.ctx, o.loaded.mailbox.id, acct(o), null));
  action('slug', (o, b) => renameSlug(o.ctx, o.loaded.mailbox.id, acct(o), formField(b, 'slug', 100).trim(), null));
  for (const [name, run] of Object.entries(siteDomainActions)) action(name, run);
}
