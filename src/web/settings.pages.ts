import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { AppDeps } from '../context.ts';
import { updateMailbox } from '../mailboxes/mailboxes.service.ts';
import { emailSettings, presentAssignment } from '../addresses/settings.ts';
import { latestAssignment } from '../addresses/addresses.repo.ts';
import { rotateAddress } from '../addresses/rotate.service.ts';
import { addAlias, deleteAlias } from '../addresses/aliases.service.ts';
import { updateAllowlist } from '../addresses/allowlist.service.ts';
import { deleteWebhook, getWebhook, listDeliveries, putWebhook, sendTestEvent } from '../webhooks/webhooks.service.ts';
import { formatTime, html, layout, sendPage } from './html.ts';
import { csrfInput, formField, type FormBody } from './forms.ts';
import { mayChange, openMailbox, type OpenedMailbox } from './person-ctx.ts';
import { csrfToken, toSignIn, type WebSession } from './session.ts';
import { addressChip, attempt, refusalText } from './ui.ts';
import { mailboxBase, mailboxHeader, mailboxName } from './mailbox.views.ts';
import { notFound } from './mailbox.pages.ts';

// Mailbox settings: title and description, the address (rotation with confirmation), aliases,
// the sender allowlist, the webhook (its signing secret shown once, rotation, the delivery log
// with every attempt, a test event) and a live viewer of the mailbox's events. Each form calls
// the API's service with the person's request context; what a role may not do is not offered.

const ROUTE = { schema: { hide: true }, config: { auth: false } } as const;

const BLOCKED: Record<string, string> = {
  account_suspended: 'the account is suspended',
  account_read_only: 'the account is read-only',
  mailbox_archived: 'the mailbox is archived',
  paid_plan_required: 'changing the address is a paid-plan feature',
  admin_required: 'it needs an owner or administrator',
};

interface Extras {
  alert?: string | null;
  good?: string | null;
  secret?: string | null;
}

/**
 * The latest address change or alias add while it waits for activation, when it failed (with the
 * reason), and for a while after it took effect. While it is pending, app.js asks
 * `…/settings/assignment` every two seconds and redraws this card when it settles.
 */
function assignmentLine(a: ReturnType<typeof presentAssignment>, now: Date) {
  if (!a) return html``;
  const what = a.kind === 'alias' ? `New alias on ${a.hostname}` : `Address change to ${a.hostname}`;
  const error = a.error as { message?: string; retryable?: boolean } | null;
  if (a.status === 'pending') return html`<p class="small" role="status"><span class="tag">pending</span> ${what}: waiting for activation; this updates by itself.</p>`;
  if (a.status === 'failed')
    return html`<p class="small error" role="status"><span class="tag bad">failed</span> ${what}: ${error?.message ?? 'not activated'}${error?.retryable ? ' Try again later.' : ''}</p>`;
  if (a.finished_at && now.getTime() - Date.parse(a.finished_at) < RECENT_MS) return html`<p class="small" role="status"><span class="tag ok">active</span> ${what}: done.</p>`;
  return html``;
}

const RECENT_MS = 10 * 60_000;

async function renderSettings(req: FastifyRequest, reply: FastifyReply, deps: AppDeps, session: WebSession, opened: OpenedMailbox, extras: Extras = {}, status = 200) {
  const csrf = csrfToken(req, reply, deps);
  const { mailbox: m, perms, access } = opened.loaded;
  const base = mailboxBase(m);
  const canWrite = mayChange(opened.loaded) && !m.archived_at;
  const canAdmin = mayChange(opened.loaded, 'admin');
  const settings = await emailSettings(opened.ctx, opened.loaded);
  const allowlist = 'sender_allowlist' in settings ? settings.sender_allowlist : null;
  const [hook, deliveries] = perms.admin
    ? await Promise.all([getWebhook(opened.ctx, access.account.id, m.id), listDeliveries(opened.ctx, { accountId: access.account.id, mailboxId: m.id, limit: 20 })])
    : [null, null];
  const domains = settings.available_domains;
  const domainSelect = (id: string) =>
    html`<select id="${id}" name="domain">${domains.map((d) => html`<option value="${d.kind === 'platform' ? '' : d.hostname}">${d.hostname}${d.kind === 'platform' ? ' (a short suffix is added)' : ''}</option>`)}</select>`;

  const general = html`<div class="card"><h2>General</h2>${
    canWrite
      ? html`<form method="post" action="${base}/settings/general">${csrfInput(csrf)}
<label for="f-title">Title</label><input id="f-title" name="title" type="text" value="${m.title ?? ''}" maxlength="200">
<label for="f-description">Description</label><textarea id="f-description" name="description" rows="3" maxlength="2000">${m.description ?? ''}</textarea>
<div class="actions"><button type="submit">Save</button></div></form>`
      : html`<dl class="meta"><dt>Title</dt><dd>${m.title ?? '—'}</dd><dt>Description</dt><dd>${m.description ?? '—'}</dd></dl>`
  }<p class="hint">Id <code>${m.id}</code></p></div>`;

  const cust = settings.customization;
  const address = html`<div class="card" id="address-card" data-assignment-state="${settings.assignment?.status ?? 'none'}" data-assignment-poll="${base}/settings/assignment"><h2>Address</h2><p>${addressChip(m.address)}</p>
${
  cust.allowed
    ? html`<details><summary>Change the address…</summary><form method="post" action="${base}/settings/rotate">${csrfInput(csrf)}
<input type="hidden" name="expected_address" value="${m.address ?? ''}">
<label for="f-username">New name</label><input id="f-username" name="username" type="text" maxlength="40" required>
<label for="f-rotate-domain">Domain</label>${domainSelect('f-rotate-domain')}
<label class="choice"><input type="checkbox" name="keep_old_as_alias" value="1" checked> Keep the current address as an alias</label>
<label class="choice"><input type="checkbox" name="confirm" value="1" required> I understand mail to the old address stops arriving unless it is kept as an alias</label>
<div class="actions"><button class="danger" type="submit">Change address</button></div>
<p class="hint">${settings.rotations.remaining === null ? 'No monthly limit.' : `${settings.rotations.remaining} of ${settings.rotations.monthly_limit} changes left this month.`}</p></form></details>`
    : html`<p class="hint">The address cannot be changed here: ${BLOCKED[cust.blocked_reason ?? ''] ?? cust.blocked_reason}.</p>`
}
${assignmentLine(settings.assignment, deps.now())}
<h3>Aliases</h3>
${
  settings.aliases.length
    ? html`<ul class="rows small">${settings.aliases.map(
        (a) => html`<li><div class="main">${addressChip(a.address)}${a.active ? '' : html` <span class="tag">inactive: over the plan's alias limit</span>`}</div>${
          canAdmin && !m.archived_at
            ? html`<form class="inline" method="post" action="${base}/settings/aliases/${a.id}/delete">${csrfInput(csrf)}<button class="danger small" type="submit" aria-label="Remove ${a.address}">Remove</button></form>`
            : ''
        }</li>`,
      )}</ul>`
    : html`<p class="muted small">No aliases.</p>`
}
${
  canAdmin && !m.archived_at
    ? html`<form method="post" action="${base}/settings/aliases" class="toolbar">${csrfInput(csrf)}<label for="f-alias" class="sr-only">Alias name</label><input class="grow" id="f-alias" name="username" type="text" placeholder="alias name" maxlength="40" required><label for="f-alias-domain" class="sr-only">Alias domain</label>${domainSelect('f-alias-domain')}<button class="secondary" type="submit">Add alias</button></form>`
    : ''
}</div>`;

  const allow = allowlist
    ? html`<div class="card"><h2>Sender allowlist</h2><p class="hint">When on, only these senders (addresses or <code>@domain</code>) can email this mailbox.</p>${
        allowlist.editable
          ? html`<form method="post" action="${base}/settings/allowlist">${csrfInput(csrf)}<input type="hidden" name="version" value="${allowlist.version}">
<label class="choice"><input type="checkbox" name="enabled" value="1"${allowlist.enabled ? html` checked` : ''}> Only accept mail from the list</label>
<label for="f-entries">Entries <span class="hint">one per line, at most ${allowlist.max_entries}</span></label><textarea id="f-entries" name="entries" rows="5">${allowlist.entries.join('\n')}</textarea>
<div class="actions"><button type="submit">Save allowlist</button></div></form>`
          : html`<p>${allowlist.enabled ? 'On' : 'Off'}: ${allowlist.entries.join(', ') || 'no entries'}</p>`
      }</div>`
    : '';

  const deliveryRows = (deliveries?.items ?? []).map(
    (d) => html`<li><div class="main"><span class="title"><code>${d.event_type}</code> <span class="tag${d.status === 'succeeded' ? ' ok' : d.status === 'failed' ? ' bad' : ''}">${d.status}</span></span>
<div class="small muted">${d.attemptLog.length ? d.attemptLog.map((a) => html`<div>Attempt ${a.attempt}: ${a.status_code ?? a.error ?? a.outcome} · ${a.duration_ms} ms · ${formatTime(a.started_at)}</div>`) : 'No attempt yet.'}</div></div>
<div class="side">${formatTime(d.created_at)}</div></li>`,
  );
  const webhook = perms.admin
    ? html`<div class="card" id="webhook"><h2>Webhook</h2>
${extras.secret ? html`<div class="alert good" role="status">Signing secret — shown once, copy it now:<code class="secret" data-testid="webhook-secret">${extras.secret}</code></div>` : ''}
${
  canAdmin
    ? html`<form method="post" action="${base}/settings/webhook" class="toolbar">${csrfInput(csrf)}<label for="f-webhook" class="sr-only">Webhook URL</label><input class="grow" id="f-webhook" name="url" type="url" value="${hook?.url ?? ''}" placeholder="https://example.com/hooks/cubby" required><button type="submit">${hook ? 'Save URL' : 'Set webhook'}</button></form>
${
  hook
    ? html`<div class="actions"><form class="inline" method="post" action="${base}/settings/webhook/rotate">${csrfInput(csrf)}<button class="secondary" type="submit">Rotate secret</button></form>
<form class="inline" method="post" action="${base}/settings/webhook/test">${csrfInput(csrf)}<button class="secondary" type="submit">Send test event</button></form>
<form class="inline" method="post" action="${base}/settings/webhook/delete">${csrfInput(csrf)}<button class="danger" type="submit">Remove webhook</button></form></div>`
    : ''
}`
    : html`<p>${hook ? html`<code>${hook.url}</code>` : 'No webhook.'}</p>`
}
<h3>Deliveries</h3>${deliveryRows.length ? html`<ul class="rows small" data-testid="deliveries">${deliveryRows}</ul>` : html`<p class="muted small">No deliveries yet.</p>`}
</div>`
    : '';

  const events = html`<div class="card"><h2>Live events</h2><p class="hint">Events of this mailbox as they happen (the same bodies webhooks receive).</p>
<pre class="source" tabindex="0" data-live-events="${base}/live" aria-live="polite">Waiting for events…</pre></div>`;

  const body = html`${mailboxHeader({ mailbox: m, tab: 'settings', canWrite: mayChange(opened.loaded), canAdmin, csrf })}
${extras.alert ? html`<div class="alert bad" role="alert">${extras.alert}</div>` : ''}${extras.good ? html`<div class="alert good" role="status">${extras.good}</div>` : ''}
${general}${address}${allow}${webhook}${events}`;
  return sendPage(reply, status, layout({ title: `Settings · ${mailboxName(m)}`, user: session.user, csrf, body, active: 'mailboxes' }));
}

export function registerSettingsPages(web: FastifyInstance, deps: AppDeps): void {
  web.get('/mailboxes/:id/settings', ROUTE, async (req: FastifyRequest<{ Params: { id: string } }>, reply) => {
    const session = req.webSession;
    if (!session) return toSignIn(req, reply);
    const opened = await openMailbox(deps, req, session, req.params.id);
    if (!opened) return notFound(reply, 'Mailbox', undefined, session);
    return renderSettings(req, reply, deps, session, opened);
  });

  // The latest assignment's state, polled by the page while one is pending.
  web.get('/mailboxes/:id/settings/assignment', ROUTE, async (req: FastifyRequest<{ Params: { id: string } }>, reply) => {
    const session = req.webSession;
    if (!session) return reply.code(401).send({ error: 'Sign in again.' });
    const opened = await openMailbox(deps, req, session, req.params.id);
    if (!opened) return reply.code(404).send({ error: 'Mailbox not found.' });
    const a = presentAssignment(await latestAssignment(deps.db, opened.loaded.mailbox.id));
    return reply.header('cache-control', 'no-store').send({ id: a?.id ?? null, kind: a?.kind ?? null, status: a?.status ?? 'none' });
  });

  // Each action renders the page again (no redirect) so that a secret can be shown exactly once.
  const action = (path: string, run: (o: OpenedMailbox, b: FormBody, params: Record<string, string>) => Promise<Extras | void>, good: string) =>
    web.post(`/mailboxes/:id/settings/${path}`, ROUTE, async (req: FastifyRequest<{ Params: Record<string, string> & { id: string } }>, reply) => {
      const session = req.webSession;
      if (!session) return toSignIn(req, reply);
      const opened = await openMailbox(deps, req, session, req.params.id);
      if (!opened) return notFound(reply, 'Mailbox', undefined, session);
      const done = await attempt(() => run(opened, req.body as FormBody, req.params));
      const fresh = (await openMailbox(deps, req, session, req.params.id)) ?? opened;
      if (!done.ok) return renderSettings(req, reply, deps, session, fresh, { alert: refusalText(done.error) }, done.error.status);
      return renderSettings(req, reply, deps, session, fresh, { good, ...(done.value ?? {}) });
    });
  const acct = (o: OpenedMailbox) => o.loaded.access.account.id;
  action(
    'general',
    async (o, b) => {
      await updateMailbox(o.ctx, o.loaded.mailbox.id, { accountId: acct(o), title: formField(b, 'title', 300).trim() || null, description: formField(b, 'description', 3000).trim() || null, field: 'mailbox' });
    },
    'Saved.',
  );
  action(
    'rotate',
    async (o, b) => {
      await rotateAddress(o.ctx, o.loaded.mailbox.id, {
        accountId: acct(o),
        confirm: formField(b, 'confirm', 2) === '1',
        expectedAddress: formField(b, 'expected_address', 400),
        username: formField(b, 'username', 100).trim() || null,
        domain: formField(b, 'domain', 300) || null,
        keepOldAsAlias: formField(b, 'keep_old_as_alias', 2) === '1',
        surface: 'R',
      });
    },
    'Address changed.',
  );
  action(
    'aliases',
    async (o, b) => {
      await addAlias(o.ctx, o.loaded.mailbox.id, { accountId: acct(o), username: formField(b, 'username', 100).trim(), domain: formField(b, 'domain', 300) || null });
    },
    'Alias added.',
  );
  action(
    'aliases/:alias_id/delete',
    async (o, _b, p) => {
      await deleteAlias(o.ctx, o.loaded.mailbox.id, p.alias_id!, { accountId: acct(o) });
    },
    'Alias removed.',
  );
  action(
    'allowlist',
    async (o, b) => {
      await updateAllowlist(o.ctx, o.loaded.mailbox.id, {
        accountId: acct(o),
        enabled: formField(b, 'enabled', 2) === '1',
        entries: formField(b, 'entries', 20_000).split(/\r?\n/).map((e) => e.trim()).filter(Boolean),
        expectedVersion: formField(b, 'version', 100),
      });
    },
    'Allowlist saved.',
  );
  action(
    'webhook',
    async (o, b) => {
      const r = await putWebhook(o.ctx, { accountId: acct(o), mailboxId: o.loaded.mailbox.id, url: formField(b, 'url', 2100), rotateSecret: false, reason: null });
      return { secret: r.secret };
    },
    'Webhook saved.',
  );
  action(
    'webhook/rotate',
    async (o) => {
      const hook = await getWebhook(o.ctx, acct(o), o.loaded.mailbox.id);
      const r = await putWebhook(o.ctx, { accountId: acct(o), mailboxId: o.loaded.mailbox.id, url: hook?.url ?? '', rotateSecret: true, reason: null });
      return { secret: r.secret };
    },
    'New signing secret made; deliveries still waiting were cancelled.',
  );
  action(
    'webhook/test',
    async (o) => {
      await sendTestEvent(o.ctx, { accountId: acct(o), mailboxId: o.loaded.mailbox.id });
    },
    'Test event queued; it shows in the deliveries below.',
  );
  action(
    'webhook/delete',
    async (o) => {
      await deleteWebhook(o.ctx, { accountId: acct(o), mailboxId: o.loaded.mailbox.id, reason: null });
    },
    'Webhook removed.',
  );
}
