import type { ApiKeysTable, Scope } from '../db/schema.ts';
import { MAX_KEY_LABEL } from '../auth/keys.service.ts';
import { formatTime, html, layout, type Html, type LayoutUser } from './html.ts';
import { csrfInput, input, type FieldErrors } from './forms.ts';
import type { MailboxList, MailboxOption, MembershipView } from './web.data.ts';

export const SCOPES: { value: Scope; label: string }[] = [
  { value: 'mailbox_read', label: 'Read — list and download files, read emails' },
  { value: 'mailbox_write', label: 'Write — also upload, change and send' },
  { value: 'mailbox_admin', label: 'Admin — also create, archive and delete mailboxes' },
];

export interface KeyFormValues {
  label: string;
  scope: Scope;
  accountId: string;
  access: 'all' | 'selected';
  expiresOn: string;
  permissions: Record<string, 'read' | 'write'>;
}

export interface KeysPageData {
  user: LayoutUser;
  csrf: string;
  now: Date;
  memberships: MembershipView[];
  keys: ApiKeysTable[];
  selectedCounts: Map<string, number>;
  mailboxes: MailboxList;
  form: KeyFormValues;
  errors: FieldErrors;
  alert?: string;
  /** The token of a key created by this request: shown once, here only. */
  created?: { token: string; label: string | null };
}

function mailboxName(m: MailboxOption): string {
  return m.title?.trim() || `Untitled mailbox ${m.id}`;
}

function keyStatus(key: ApiKeysTable, now: Date, csrf: string): Html {
  if (key.revoked_at) return html`<span class="tag bad">revoked</span><div class="muted">${formatTime(key.revoked_at)}</div>`;
  if (key.expires_at && Date.parse(key.expires_at) <= now.getTime()) return html`<span class="tag bad">expired</span>`;
  return html`<span class="tag ok">active</span>
<form class="inline" method="post" action="/settings/api_keys/${key.id}/revoke">${csrfInput(csrf)}
<button class="danger" type="submit" aria-label="Revoke ${key.label ?? key.token_hint}">Revoke</button></form>`;
}

function keysTable(d: KeysPageData): Html {
  if (d.keys.length === 0) return html`<p class="muted">You have no API keys yet.</p>`;
  const accountNames = new Map(d.memberships.map((m) => [m.accountId, m.name]));
  const several = d.memberships.length > 1;
  const rows = d.keys.map((k) => {
    const access =
      k.mailbox_access === 'all' ? 'All mailboxes' : `${d.selectedCounts.get(k.id) ?? 0} selected mailbox${d.selectedCounts.get(k.id) === 1 ? '' : 'es'}`;
    return html`<tr data-key-id="${k.id}">
<td>${k.label ?? html`<span class="muted">(no label)</span>`}</td>
<td><code>${k.token_hint}</code></td>
<td>${k.scope}</td>
<td>${access}</td>
${several ? html`<td>${accountNames.get(k.default_account_id) ?? k.default_account_id}</td>` : ''}
<td>${formatTime(k.created_at)}</td>
<td>${k.last_used_at ? formatTime(k.last_used_at) : html`<span class="muted">never</span>`}</td>
<td>${k.expires_at ? formatTime(k.expires_at) : html`<span class="muted">never</span>`}</td>
<td>${keyStatus(k, d.now, d.csrf)}</td>
</tr>`;
  });
  return html`<table><thead><tr><th>Label</th><th>Key</th><th>Scope</th><th>Mailboxes</th>${several ? html`<th>Account</th>` : ''}<th>Created</th><th>Last used</th><th>Expires</th><th>Status</th></tr></thead>
<tbody>${rows}</tbody></table>`;
}

function mailboxChooser(d: KeysPageData): Html {
  const several = d.memberships.length > 1;
  const groups = d.memberships.map((m) => {
    const boxes = d.mailboxes.mailboxes.filter((b) => b.accountId === m.accountId);
    if (boxes.length === 0) return several ? html`<p class="hint">${m.name}: no mailboxes yet.</p>` : html`<p class="hint">No mailboxes yet.</p>`;
    const rows = boxes.map((b) => {
      const current = d.form.permissions[b.id] ?? '';
      const opt = (value: string, text: string) => html`<option value="${value}"${current === value ? html` selected` : ''}>${text}</option>`;
      return html`<tr><td><label class="choice" for="mbx-${b.id}">${mailboxName(b)}${b.archived ? html` <span class="tag">archived</span>` : ''}</label></td>
<td><select id="mbx-${b.id}" name="mbx:${b.id}">${opt('', 'No access')}${opt('read', 'Read')}${opt('write', 'Write')}</select></td></tr>`;
    });
    return html`${several ? html`<p class="hint">In <strong>${m.name}</strong> (used when this account is chosen above):</p>` : ''}<table><tbody>${rows}</tbody></table>`;
  });
  return html`<div class="mailboxes">${groups}</div>`;
}

function createForm(d: KeysPageData): Html {
  const f = d.form;
  const hasMailboxes = d.mailboxes.available && d.mailboxes.mailboxes.length > 0;
  const accountField =
    d.memberships.length > 1
      ? html`<label for="f-account_id">Account</label><select id="f-account_id" name="account_id">${d.memberships.map(
          (m) => html`<option value="${m.accountId}"${m.accountId === f.accountId ? html` selected` : ''}>${m.name} (${m.role})</option>`,
        )}</select>${d.errors.account_id ? html`<div class="error">${d.errors.account_id}</div>` : ''}`
      : html`<input type="hidden" name="account_id" value="${d.memberships[0]?.accountId ?? ''}">`;
  return html`<form method="post" action="/settings/api_keys" novalidate>
${csrfInput(d.csrf)}
<div class="grid">
<div>${input('label', 'Label', d.errors, { value: f.label, hint: '(what uses this key)', maxlength: MAX_KEY_LABEL })}</div>
<div>${input('expires_on', 'Expires', d.errors, { type: 'date', value: f.expiresOn, hint: '(optional; valid through this day, UTC)' })}</div>
</div>
<label for="f-scope">Scope</label>
<select id="f-scope" name="scope">${SCOPES.map((s) => html`<option value="${s.value}"${s.value === f.scope ? html` selected` : ''}>${s.label}</option>`)}</select>
${d.errors.scope ? html`<div class="error">${d.errors.scope}</div>` : ''}
${accountField}
<fieldset><legend>Mailbox access</legend>
<label class="choice"><input type="radio" id="access-all" name="mailbox_access" value="all"${f.access === 'all' || !hasMailboxes ? html` checked` : ''}> All mailboxes, including ones created later</label>
${
  hasMailboxes
    ? html`<label class="choice"><input type="radio" id="access-selected" name="mailbox_access" value="selected"${f.access === 'selected' ? html` checked` : ''}> Only selected mailboxes</label>
${mailboxChooser(d)}`
    : html`<p class="hint">No mailboxes yet. Once you have some, a key can be limited to selected mailboxes.</p>`
}
${d.errors.mailboxes ? html`<div class="error">${d.errors.mailboxes}</div>` : ''}
</fieldset>
<div class="actions"><button type="submit">Create API key</button></div>
</form>`;
}

export function keysPage(d: KeysPageData): Html {
  const created = d.created
    ? html`<div class="alert good" role="status">
<strong>Your new API key${d.created.label ? html` “${d.created.label}”` : ''}.</strong> Copy it now: it is shown only once and cannot be recovered.
<code class="secret" id="new-key" data-testid="new-key">${d.created.token}</code>
Send it as <code>Authorization: Bearer &lt;key&gt;</code>
</div>`
    : '';
  const body = html`<h1>API keys</h1>
${created}
${d.alert ? html`<div class="alert bad" role="alert">${d.alert}</div>` : ''}
<div class="card"><h2>Your keys</h2>${keysTable(d)}</div>
<div class="card"><h2>Create a key</h2>${d.memberships.length ? createForm(d) : html`<p class="muted">You need an account membership to create keys.</p>`}</div>`;
  return layout({ title: 'API keys', user: d.user, csrf: d.csrf, body, active: 'keys' });
}
