import type { FastifyInstance, FastifyReply } from 'fastify';
import type { Kysely } from 'kysely';
import type { AppDeps } from '../../context.ts';
import type { DB } from '../../db/schema.ts';
import { invalidArgument } from '../../errors.ts';
import { createClientAccount, MAX_ACCOUNT_NAME, MAX_CLIENT_NAME } from '../../accounts/accounts.service.ts';
import { assertMemberAdmin } from '../../accounts/members.service.ts';
import { recordActivity } from '../../activity/activity.service.ts';
import { refreshBranding } from '../../accounts/logo.service.ts';
import { readAgentHeaders, type Credential } from '../../auth/credential.ts';
import { selectAccount } from '../../auth/access.ts';
import { iso } from '../../time.ts';
import { sitesChanged } from '../../sites/changes.ts';
import { formField, type FormBody } from '../forms.ts';
import { errorPage, ROUTE } from './common.ts';
import type { MembershipView } from '../web.data.ts';

// Account name (the branding that published sites' file listings show as {{account_name}}) and,
// for agency owners, client accounts: create one, and open it from the account pages.

/** Client accounts of agencies the person owns, shown as accounts they own (through the agency). */
export async function ownedClientAccounts(db: Kysely<DB>, memberships: MembershipView[]): Promise<MembershipView[]> {
  const agencies = memberships.filter((m) => m.kind === 'agency' && m.role === 'owner').map((m) => m.accountId);
  if (!agencies.length) return [];
  const rows = await db.selectFrom('accounts').selectAll().where('parent_account_id', 'in', agencies).orderBy('created_at').execute();
  const mine = new Set(memberships.map((m) => m.accountId));
  return rows
    .filter((r) => !mine.has(r.id))
    .map((r) => ({ accountId: r.id, name: r.name, kind: r.kind, plan: r.plan, status: r.status, suspended: r.suspended_at !== null, role: 'owner' as const, viaAgency: true }));
}

export function registerClientPages(web: FastifyInstance, deps: AppDeps): void {
  web.post('/account/rename', ROUTE, async (req, reply: FastifyReply) => {
    const session = req.webSession;
    if (!session) return reply.redirect('/users/sign_in', 303);
    const body = req.body as FormBody;
    const accountId = formField(body, 'account_id', 100);
    const back = { href: `/account?account=${encodeURIComponent(accountId)}`, text: 'Back to the account' };
    try {
      const name = formField(body, 'name', 300).trim();
      if (!name) throw invalidArgument('name', 'must not be blank');
      if (name.length > MAX_ACCOUNT_NAME) throw invalidArgument('name', `must be at most ${MAX_ACCOUNT_NAME} characters`);
      // Owners and administrators, or the owner of its agency (a stranger's account answers 404).
      await assertMemberAdmin(deps.db, accountId, session.user.id);
      const now = deps.now();
      await deps.db.transaction().execute(async (trx) => {
        await trx.updateTable('accounts').set({ name, updated_at: iso(now) }).where('id', '=', accountId).execute();
        await recordActivity(trx, { userId: session.user.id, apiKeyId: null, agent: readAgentHeaders(req.headers), requestId: req.id }, now, { accountId, action: 'account.rename', targetType: 'account', targetId: accountId });
        await refreshBranding(deps, trx, accountId, now);
      });
      sitesChanged(deps.db);
      return reply.redirect(`/account?account=${encodeURIComponent(accountId)}&done=renamed`, 303);
    } catch (err) {
      return errorPage(reply, err, back);
    }
  });

  web.post('/account/clients', ROUTE, async (req, reply: FastifyReply) => {
    const session = req.webSession;
    if (!session) return reply.redirect('/users/sign_in', 303);
    const body = req.body as FormBody;
    const agencyId = formField(body, 'account_id', 100);
    const back = { href: `/account?account=${encodeURIComponent(agencyId)}`, text: 'Back to the agency' };
    try {
      // The person acts like a whole-account owner key of the agency (checked by the service).
      const cred: Credential = {
        keyId: '',
        user: session.user,
        label: null,
        tokenType: 'session',
        scope: 'mailbox_admin',
        mailboxAccess: 'all',
        mailboxPermissions: {},
        defaultAccountId: agencyId,
        grantedAccountIds: [agencyId],
        includeClientAccounts: true,
        transport: 'web',
        plan: 'free',
        expiresAt: null,
        lastUsedAt: null,
        connection: null,
      };
      const agency = await selectAccount(deps.db, cred, agencyId);
      const clientName = formField(body, 'client_name', 300).trim();
      if (clientName.length > MAX_CLIENT_NAME) throw invalidArgument('client_name', `must be at most ${MAX_CLIENT_NAME} characters`);
      const account = await createClientAccount(
        deps.db,
        cred,
        agency,
        { name: formField(body, 'client_account_name', 300), clientName: clientName || null, reason: null },
        { userId: session.user.id, apiKeyId: null, agent: readAgentHeaders(req.headers), requestId: req.id },
        deps.now(),
      );
      return reply.redirect(`/account?account=${encodeURIComponent(account.id)}&done=client_created`, 303);
    } catch (err) {
      return errorPage(reply, err, back);
    }
  });
}
