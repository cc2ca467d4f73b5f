import type { RequestCtx } from '../context.ts';
import { reachableAccounts, selectAccount, visibleMailboxIds, type AccountAccess } from '../auth/access.ts';
import { presentAccountIdentity, presentStatusAccount } from './accounts.present.ts';
import { CLIENT_VERSION, SERVER_VERSION } from '../version.ts';
import { toAccess } from '../auth/access.ts';
import { connectionDetails, type ConnectionDetails } from '../agent-auth/connection-status.ts';

const RENEWAL_WINDOW_MS = 7 * 86_400_000;

/** The connection record: what this credential is and whether it should be renewed. */
export function presentConnection(ctx: RequestCtx, access: AccountAccess, mailboxIds: { visible: string[]; denied: string[] }, agent: ConnectionDetails | null = null) {
  const cred = ctx.credential;
  const now = ctx.now().getTime();
  const expiresSoon = cred.expiresAt !== null && Date.parse(cred.expiresAt) - now < RENEWAL_WINDOW_MS;
  const selected = cred.mailboxAccess === 'selected';
  return {
    api_key_id: cred.keyId,
    label: cred.label,
    // An OAuth access token is not an API key: null.
    token_type: cred.tokenType === 'api' && cred.authMethod !== 'oauth' ? 'api' : null,
    scope: cred.scope,
    expires_at: cred.expiresAt,
    last_used_at: cred.lastUsedAt,
    mailbox_access: cred.mailboxAccess,
    mailbox_ids: selected ? mailboxIds.visible : [],
    denied_mailbox_ids: selected ? mailboxIds.denied : [],
    mailbox_permissions: selected ? cred.mailboxPermissions : {},
    permissions: access.permissions,
    agent: ctx.actor.agent && Object.values(ctx.actor.agent).some((v) => v !== null) ? ctx.actor.agent : null,
    transport: cred.transport,
    renewal: agent?.renewal ?? {
      recommended: expiresSoon,
      next_action: expiresSoon ? 'create_new_key' : 'none',
      browser_url: `${ctx.publicUrl()}/settings/api_keys`,
    },
  };
}

/**
 * Which granted mailboxes still exist (for selected-access keys) and the onboarding state:
 * empty_account (no mailboxes at all), no_visible_buckets (some, none visible), active.
 */
async function mailboxVisibility(ctx: RequestCtx, access: AccountAccess) {
  const live = await ctx.db
    .selectFrom('mailboxes')
    .select('id')
    .where('account_id', '=', access.account.id)
    .where('deleted_at', 'is', null)
    .execute();
  const liveIds = new Set(live.map((r) => r.id));
  const granted = Object.keys(ctx.credential.mailboxPermissions);
  const liveGranted = granted.filter((id) => liveIds.has(id));
  const deniedGranted = granted.filter((id) => !liveIds.has(id));
  // The key's own selection and the person's limit as a collaborator (access.ts), like every list.
  const visible = visibleMailboxIds(ctx.credential, access);
  const visibleCount = visible === null ? liveIds.size : visible.filter((id) => liveIds.has(id)).length;
  const onboarding = liveIds.size === 0 ? 'empty_account' : visibleCount === 0 ? 'no_visible_buckets' : 'active';
  return { liveGranted, deniedGranted, onboarding: onboarding as 'empty_account' | 'no_visible_buckets' | 'active' };
}

/** Everything both status reads share. */
export async function loadStatus(ctx: RequestCtx, selector: string | undefined) {
  const access = await selectAccount(ctx.db, ctx.credential, selector);
  const reachable = await reachableAccounts(ctx.db, ctx.credential);
  const accounts = [...reachable.values()]
    .sort((a, b) => (a.account.id < b.account.id ? -1 : 1))
    .map((r) => presentAccountIdentity(r.account, toAccess(ctx.credential, r.account, r.role), ctx.credential, reachable));
  const { liveGranted, deniedGranted, onboarding } = await mailboxVisibility(ctx, access);
  return {
    access,
    reachable,
    account: presentStatusAccount(access.account, access, ctx.credential, reachable, ctx.publicUrl()),
    default_account_id: ctx.credential.defaultAccountId,
    accounts,
    server_version: SERVER_VERSION,
    client_version: CLIENT_VERSION,
    connection: presentConnection(ctx, access, { visible: liveGranted, denied: deniedGranted }, await connectionDetails(ctx)),
    onboarding_state: onboarding,
    user: { id: ctx.credential.user.id, email: ctx.credential.user.email, name: ctx.credential.user.name },
    dashboard_url: `${ctx.publicUrl()}/`,
  };
}
