import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { AppDeps } from '../../context.ts';
import type { MembershipRole } from '../../db/schema.ts';
import { AppError } from '../../errors.ts';
import { changeMember, inviteMember, isRole, listInvitations, listMembers, revokeInvitation, transferOwnership, ROLES } from '../../accounts/members.service.ts';
import { AGENCY_MAX_PEOPLE, PLANS } from '../../accounts/plans.ts';
import { readAgentHeaders } from '../../auth/credential.ts';
import { formatTime, html, sendPage } from '../html.ts';
import { csrfInput, formField, input, type FormBody } from '../forms.ts';
import { listMailboxes } from '../web.data.ts';
import { accountLayout, accountPage, errorPage, flash, isAdminRole, ROUTE, type AccountPage } from './common.ts';

// /account/members: who is in the account and with which role; owners and administrators
// invite, change roles, remove people, and owners transfer ownership.

const DONE: Record<string, string> = {
  invited: 'Invitation sent.',
  role: 'Role changed.',
  access: 'Mailbox access saved.',
  removed: 'Member removed. Their AI connections and API keys for this account were revoked.',
  transferred: 'Ownership transferred. You are now an administrator.',
  withdrawn: 'Invitation withdrawn.',
};

function roleSelect(name: string, id: string, selected: MembershipRole, canOwner: boolean) {
  return html`<select id="${id}" name="${name}">${ROLES.filter((r) => canOwner || r !== 'owner' || r === selected).map(
    (r) => html`<option value="${r}"${r === selected ? html` selected` : ''}>${r}</option>`,
  )}</select>`;
}

async function membersPage(deps: AppDeps, p: AccountPage, notice?: string) {
  const cur = p.current!;
  const admin = isAdminRole(cur);
  const owner = cur.role === 'owner';
  const members = await listMembers(deps.db, cur.accountId);
  const invitations = admin ? await listInvitations(deps.db, cur.accountId, deps.now()) : [];
  const { mailboxes } = await listMailboxes(deps.db, [cur.accountId], { userId: p.session.user.id });
  const boxName = new Map(mailboxes.map((b) => [b.id, b.title || b.id]));
  const max = PLANS[cur.plan].max_account_members;
  const hidden = html`${csrfInput(p.csrf)}<input type="hidden" name="account_id" value="${cur.accountId}">`;
  const rows = members.map((m, i) => {
    const self = m.userId === p.session.user.id;
    const access = m.role === 'collaborator' && m.mailboxIds.length ? m.mailboxIds.map((id) => boxName.get(id) ?? 'a mailbox you cannot open').join(', ') : 'all mailboxes';
    const manage =
      admin && !self && (owner || m.role !== 'owner')
        ? html`<form method="post" action="/account/members/role" class="inline">${hidden}<input type="hidden" name="user_id" value="${m.userId}">
<label for="role-${i}" class="hint">Role for ${m.email}</label>${roleSelect('role', `role-${i}`, m.role, owner)} <button type="submit">Change role</button></form>
<form method="post" action="/account/members/remove" class="inline">${hidden}<input type="hidden" name="user_id" value="${m.userId}"><button class="danger" type="submit">Remove ${m.name}</button></form>
${m.role === 'collaborator' && mailboxes.length ? html`<details><summary>Mailbox access</summary><form method="post" action="/account/members/access">${hidden}<input type="hidden" name="user_id" value="${m.userId}">
<fieldset><legend>Mailboxes ${m.name} may reach <span class="hint">(none ticked: all)</span></legend>${mailboxes.map(
            (b, j) => html`<label class="choice" for="acc-${i}-${j}"><input type="checkbox" id="acc-${i}-${j}" name="mailbox_ids" value="${b.id}"${m.mailboxIds.includes(b.id) ? html` checked` : ''}> ${b.title || b.id}</label>`,
          )}</fieldset><button type="submit">Save access</button></form></details>` : ''}
${owner && !cur.viaAgency && m.role !== 'owner' ? html`<form method="post" action="/account/members/transfer" class="inline">${hidden}<input type="hidden" name="user_id" value="${m.userId}"><button class="danger" type="submit">Make owner instead of me</button></form>` : ''}`
        : self
          ? html`<span class="muted">you</span>`
          : '';
    return html`<tr><td><strong>${m.name}</strong><div class="muted">${m.email}</div></td><td>${m.role}${m.two_factor_enabled ? html` <span class="tag ok">2FA</span>` : ''}</td><td>${access}</td><td>${manage}</td></tr>`;
  });
  const pending = invitations.map(
    (inv) => html`<tr><td>${inv.email}</td><td>${inv.role}</td><td>${formatTime(inv.expires_at)}</td><td><form method="post" action="/account/members/invitations/revoke" class="inline">${hidden}<input type="hidden" name="invitation_id" value="${inv.id}"><button class="danger" type="submit">Withdraw</button></form></td></tr>`,
  );
  const inviteForm = admin
    ? html`<div class="card"><h2>Invite someone</h2>
<form method="post" action="/account/members/invite" novalidate>${hidden}
${input('email', 'Email', {}, { type: 'email', required: true, autocomplete: 'off', maxlength: 254 })}
<label for="f-role">Role</label>${roleSelect('role', 'f-role', 'collaborator', owner)}
${
  mailboxes.length
    ? html`<fieldset><legend>Mailboxes a collaborator may reach <span class="hint">(none ticked: all)</span></legend>${mailboxes.map(
        (b, i) => html`<label class="choice" for="mb-${i}"><input type="checkbox" id="mb-${i}" name="mailbox_ids" value="${b.id}"> ${b.title || b.id}</label>`,
      )}</fieldset>`
    : ''
}
<div class="actions"><button type="submit">Send invitation</button></div></form>
<p class="hint">The link works once, for 7 days, for that address only. Administrators and owners manage members and keys; collaborators work with mailboxes.</p></div>`
    : html`<p class="muted">Only owners and administrators can invite or change members.</p>`;
  const body = html`<h1>Members of ${cur.name}</h1>
${flash('good', notice ? DONE[notice] : undefined)}
${cur.viaAgency ? html`<p class="hint">A client account of your agency: you manage its members as the agency’s owner. People you invite join this client account only, and count towards the agency’s ${AGENCY_MAX_PEOPLE} people.</p>` : ''}
<div class="card"><h2>People <span class="hint">(${members.length}${max === null ? '' : ` of ${max}`} on the ${cur.plan} plan${invitations.length ? `, ${invitations.length} invited` : ''})</span></h2>
<table><thead><tr><th>Person</th><th>Role</th><th>Access</th><th><span class="hint">Manage</span></th></tr></thead><tbody>${rows.length ? rows : html`<tr><td colspan="4" class="muted">No members yet${cur.viaAgency ? ': you manage this client account through your agency' : ''}.</td></tr>`}</tbody></table></div>
${pending.length ? html`<div class="card"><h2>Pending invitations</h2><table><thead><tr><th>Email</th><th>Role</th><th>Expires</th><th><span class="hint">Manage</span></th></tr></thead><tbody>${pending}</tbody></table></div>` : ''}
${inviteForm}`;
  return accountLayout(p, 'Members', '/account/members', body);
}

/** Field values of a form that may repeat (`mailbox_ids`). */
function manyFields(body: FormBody, name: string): string[] {
  const v = body?.[name];
  return (Array.isArray(v) ? v : v === undefined ? [] : [v]).filter((x): x is string => typeof x === 'string').slice(0, 500);
}

export function registerMemberPages(web: FastifyInstance, deps: AppDeps): void {
  web.get('/account/members', ROUTE, async (req, reply) => {
    const q = req.query as Record<string, unknown>;
    const p = await accountPage(deps, req, reply, q.account);
    if (!p) return reply;
    if (!p.current) return sendPage(reply, 200, accountLayout(p, 'Members', '/account/members', html`<p class="muted">You are not a member of any account.</p>`));
    return sendPage(reply, 200, await membersPage(deps, p, typeof q.done === 'string' ? q.done : undefined));
  });

  /** Runs a member action for the signed-in person; errors become pages, success a redirect. */
  const action = (path: string, run: (req: FastifyRequest, body: FormBody, accountId: string, actor: { userId: string; apiKeyId: null; agent: ReturnType<typeof readAgentHeaders>; requestId: string }) => Promise<string>) =>
    web.post(path, ROUTE, async (req, reply: FastifyReply) => {
      const session = req.webSession;
      const body = req.body as FormBody;
      const accountId = formField(body, 'account_id', 100);
      if (!session) return reply.redirect('/users/sign_in', 303);
      const back = { href: `/account/members?account=${encodeURIComponent(accountId)}`, text: 'Back to members' };
      try {
        const done = await run(req, body, accountId, { userId: session.user.id, apiKeyId: null, agent: readAgentHeaders(req.headers), requestId: req.id });
        return reply.redirect(`/account/members?account=${encodeURIComponent(accountId)}&done=${done}`, 303);
      } catch (err) {
        return errorPage(reply, err, back);
      }
    });

  const role = (body: FormBody): MembershipRole => {
    const r = formField(body, 'role', 40);
    if (!isRole(r)) throw new AppError('INVALID_ARGUMENT', 'Choose owner, administrator or collaborator.', { field: 'role' });
    return r;
  };

  action('/account/members/invite', async (_req, body, accountId, actor) => {
    await inviteMember(deps, actor, { accountId, email: formField(body, 'email', 320).trim(), role: role(body), mailboxIds: manyFields(body, 'mailbox_ids') });
    return 'invited';
  });
  action('/account/members/role', async (_req, body, accountId, actor) => {
    await changeMember(deps, actor, { accountId, userId: formField(body, 'user_id', 100), role: role(body) });
    return 'role';
  });
  action('/account/members/remove', async (_req, body, accountId, actor) => {
    await changeMember(deps, actor, { accountId, userId: formField(body, 'user_id', 100), role: null });
    return 'removed';
  });
  action('/account/members/access', async (_req, body, accountId, actor) => {
    const userId = formField(body, 'user_id', 100);
    const role = (await listMembers(deps.db, accountId)).find((m) => m.userId === userId)?.role;
    if (role !== 'collaborator') throw new AppError('INVALID_ARGUMENT', 'Only collaborators are limited to chosen mailboxes.', { field: 'user_id' });
    await changeMember(deps, actor, { accountId, userId, role: 'collaborator', mailboxIds: manyFields(body, 'mailbox_ids') });
    return 'access';
  });
  action('/account/members/transfer', async (_req, body, accountId, actor) => {
    await transferOwnership(deps, actor, accountId, formField(body, 'user_id', 100));
    return 'transferred';
  });
  action('/account/members/invitations/revoke', async (_req, body, accountId, actor) => {
    await revokeInvitation(deps, actor, accountId, formField(body, 'invitation_id', 100));
    return 'withdrawn';
  });
}
