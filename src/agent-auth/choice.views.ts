import type { Kysely } from 'kysely';
import type { DB, MailboxAccess, Scope } from '../db/schema.ts';
import { html, type Html } from '../web/html.ts';
import { formField, type FieldErrors, type FormBody } from '../web/forms.ts';
import { listMailboxes, type MailboxList } from '../web/web.data.ts';
import { authorizableAccounts } from './connections.service.ts';

// The part of every "connect an agent" form where the person picks exactly what the agent
// gets: the account, the scope, and all or selected mailboxes with read or write each.
// Used by the device approval page, the OAuth consent page and one-time grants.

export const CONNECTION_SCOPES: { value: Scope; label: string }[] = [
  { value: 'mailbox_read', label: 'Read — list and read files and emails' },
  { value: 'mailbox_write', label: 'Write — also upload, change files and send email' },
  { value: 'mailbox_admin', label: 'Admin — also create, archive and delete mailboxes' },
];

export interface ChoiceValues {
  accountId: string;
  scope: Scope;
  access: MailboxAccess;
  permissions: Record<string, 'read' | 'write'>;
}

export interface ChoiceContext {
  accounts: { id: string; name: string; kind: string; role: string }[];
  mailboxes: MailboxList;
}

export async function loadChoiceContext(db: Kysely<DB>, userId: string): Promise<ChoiceContext> {
  const accounts = await authorizableAccounts(db, userId);
  return { accounts, mailboxes: await listMailboxes(db, accounts.map((a) => a.id), { userId }) };
}

export function defaultChoice(ctx: ChoiceContext, scope: Scope = 'mailbox_write'): ChoiceValues {
  return { accountId: ctx.accounts[0]?.id ?? '', scope, access: 'all', permissions: {} };
}

const MAX_SELECTED = 1000;

/** Reads the person's choice from a posted form; problems are reported per field. */
export function readChoice(body: FormBody, ctx: ChoiceContext): { values: ChoiceValues; errors: FieldErrors } {
  const permissions: Record<string, 'read' | 'write'> = {};
  for (const [name, value] of Object.entries(body ?? {}).slice(0, MAX_SELECTED + 30)) {
    if (!name.startsWith('mbx:') || name.length > 200) continue;
    const v = Array.isArray(value) ? value[0] : value;
    if (v === 'read' || v === 'write') permissions[name.slice(4)] = v;
  }
  const values: ChoiceValues = {
    accountId: formField(body, 'account_id', 200),
    scope: formField(body, 'scope', 50) as Scope,
    access: formField(body, 'mailbox_access', 20) === 'selected' ? 'selected' : 'all',
    permissions,
  };
  if (!values.accountId && ctx.accounts.length === 1) values.accountId = ctx.accounts[0]!.id;
  const errors: FieldErrors = {};
  if (!ctx.accounts.some((a) => a.id === values.accountId)) errors.account_id = 'Choose an account where you are an owner or administrator.';
  if (!CONNECTION_SCOPES.some((s) => s.value === values.scope)) errors.scope = 'Choose a scope.';
  if (values.access === 'selected') {
    const known = new Set(ctx.mailboxes.mailboxes.filter((m) => m.accountId === values.accountId).map((m) => m.id));
    values.permissions = Object.fromEntries(Object.entries(permissions).filter(([id]) => known.has(id)));
    if (Object.keys(values.permissions).length === 0) errors.mailboxes = 'Choose at least one mailbox of this account, or allow all mailboxes.';
  }
  return { values, errors };
}

function mailboxRows(ctx: ChoiceContext, v: ChoiceValues): Html {
  const several = ctx.accounts.length > 1;
  return html`${ctx.accounts.map((a) => {
    const boxes = ctx.mailboxes.mailboxes.filter((b) => b.accountId === a.id);
    if (boxes.length === 0) return html`<p class="hint">${several ? `${a.name}: ` : ''}no mailboxes yet.</p>`;
    return html`${several ? html`<p class="hint">In <strong>${a.name}</strong> (used when this account is chosen):</p>` : ''}<table><tbody>${boxes.map((b) => {
      const current = v.accountId === a.id ? (v.permissions[b.id] ?? '') : '';
      const opt = (value: string, text: string) => html`<option value="${value}"${current === value ? html` selected` : ''}>${text}</option>`;
      return html`<tr><td><label class="choice" for="mbx-${b.id}">${b.title?.trim() || `Untitled mailbox ${b.id}`}${b.archived ? html` <span class="tag">archived</span>` : ''}</label></td>
<td><select id="mbx-${b.id}" name="mbx:${b.id}">${opt('', 'No access')}${opt('read', 'Read')}${opt('write', 'Write')}</select></td></tr>`;
    })}</tbody></table>`;
  })}`;
}

/** The account, scope and mailbox fields. */
export function choiceFields(ctx: ChoiceContext, v: ChoiceValues, errors: FieldErrors): Html {
  const err = (k: string) => (errors[k] ? html`<div class="error">${errors[k]}</div>` : '');
  const hasMailboxes = ctx.mailboxes.mailboxes.length > 0;
  return html`<label for="f-account_id">Account</label>
<select id="f-account_id" name="account_id">${ctx.accounts.map(
    (a) => html`<option value="${a.id}"${a.id === v.accountId ? html` selected` : ''}>${a.name} (${a.role}${a.kind === 'agency' ? ', agency' : ''})</option>`,
  )}</select>${err('account_id')}
<label for="f-scope">Scope</label>
<select id="f-scope" name="scope">${CONNECTION_SCOPES.map((s) => html`<option value="${s.value}"${s.value === v.scope ? html` selected` : ''}>${s.label}</option>`)}</select>${err('scope')}
<fieldset><legend>Mailbox access</legend>
<label class="choice"><input type="radio" id="access-all" name="mailbox_access" value="all"${v.access === 'all' || !hasMailboxes ? html` checked` : ''}> All mailboxes, including ones created later</label>
${
  hasMailboxes
    ? html`<label class="choice"><input type="radio" id="access-selected" name="mailbox_access" value="selected"${v.access === 'selected' ? html` checked` : ''}> Only selected mailboxes</label>
<div class="mailboxes">${mailboxRows(ctx, v)}</div>`
    : ''
}${err('mailboxes')}
</fieldset>`;
}
