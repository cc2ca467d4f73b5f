import type { AccountsTable } from '../db/schema.ts';
import type { AccountAccess } from '../auth/access.ts';
import type { Credential } from '../auth/credential.ts';

/** Account identity as every surface shows it. */
export function presentAccountIdentity(
  account: AccountsTable,
  access: AccountAccess,
  cred: Credential,
  reachable: Map<string, { account: AccountsTable }>,
) {
  const parent = account.parent_account_id ? reachable.get(account.parent_account_id)?.account : undefined;
  const mutable = account.status === 'active' && !account.suspended_at;
  return {
    id: account.id,
    name: account.name,
    account_kind: account.kind,
    kind: account.kind,
    client_name: account.client_name,
    // The parent agency only when this credential is granted it.
    agency_account: parent ? { id: parent.id, name: parent.name } : null,
    website_publishing_enabled: account.website_publishing_enabled === 1,
    region: account.region,
    status: account.status,
    permissions: {
      scope: cred.scope,
      mailbox_access: cred.mailboxAccess,
      can_create_mailboxes: mutable && access.permissions.write && cred.mailboxAccess === 'all' && !access.mailboxLimit,
    },
  };
}

const SUPPORT_EMAIL = 'support@cubby.invalid';

/** The richer `account` object of the status read. */
export function presentStatusAccount(
  account: AccountsTable,
  access: AccountAccess,
  cred: Credential,
  reachable: Map<string, { account: AccountsTable }>,
  publicUrl: string,
) {
  return {
    ...presentAccountIdentity(account, access, cred, reachable),
    can_create_client_account: account.kind === 'agency' && access.role === 'owner' && cred.includeClientAccounts,
    can_manage_billing: account.kind !== 'client' && access.role === 'owner',
    billing_message: account.kind === 'client' ? 'Billing is managed by the agency account.' : null,
    previous_status: account.previous_status,
    status_reason: account.status_reason,
    status_updated_at: account.status_updated_at,
    restriction: account.suspended_at
      ? {
          code: 'ACCOUNT_SUSPENDED',
          message: 'This account is suspended. Reads still work; changes are refused. Contact support; do not create replacement accounts.',
          acceptable_use_policy_url: `${publicUrl}/docs/acceptable-use`,
          support_email: SUPPORT_EMAIL,
        }
      : null,
  };
}
