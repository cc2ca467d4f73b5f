import { z } from 'zod';
import { named, Pagination, Timestamp } from '../http/contract.ts';

// Response schemas of the account routes (both surfaces); see docs/api-contract.md.

const nullableNumber = z.number().nullable();

export const Permissions = named('Permissions', z.object({ read: z.boolean(), write: z.boolean(), admin: z.boolean() }), 'What a credential may do.');

export const AccountIdentity = named(
  'AccountIdentity',
  z.object({
    id: z.string(),
    name: z.string(),
    account_kind: z.string().describe('personal, agency or client'),
    kind: z.string(),
    client_name: z.string().nullable(),
    agency_account: z.object({ id: z.string(), name: z.string() }).nullable(),
    website_publishing_enabled: z.boolean(),
    region: z.string(),
    status: z.string().describe('active or read_only'),
    permissions: z.object({ scope: z.string(), mailbox_access: z.string(), can_create_mailboxes: z.boolean() }),
  }),
  'An account as every surface shows it.',
  {
    id: 'acc_01JD2Q9K3M4N5P6Q7R8S9T0V1W',
    name: 'Ada Lovelace',
    account_kind: 'personal',
    kind: 'personal',
    client_name: null,
    agency_account: null,
    website_publishing_enabled: true,
    region: 'eu',
    status: 'active',
    permissions: { scope: 'mailbox_admin', mailbox_access: 'all', can_create_mailboxes: true },
  },
);

const StatusAccount = named(
  'StatusAccount',
  AccountIdentity.extend({
    can_create_client_account: z.boolean(),
    can_manage_billing: z.boolean(),
    billing_message: z.string().nullable(),
    previous_status: z.string().nullable(),
    status_reason: z.string().nullable(),
    status_updated_at: Timestamp.nullable(),
    restriction: z
      .object({ code: z.string(), message: z.string(), acceptable_use_policy_url: z.string(), support_email: z.string() })
      .nullable(),
  }),
  'The selected account with what the credential may do with it.',
);

export const Connection = named(
  'Connection',
  z.object({
    api_key_id: z.string().nullable(),
    label: z.string().nullable(),
    token_type: z.string().nullable(),
    scope: z.string(),
    expires_at: Timestamp.nullable(),
    last_used_at: Timestamp.nullable(),
    mailbox_access: z.string(),
    mailbox_ids: z.array(z.string()),
    denied_mailbox_ids: z.array(z.string()),
    mailbox_permissions: z.record(z.string(), z.string()),
    permissions: Permissions,
    agent: z.record(z.string(), z.unknown()).nullable(),
    transport: z.string().nullable(),
    renewal: z.object({ recommended: z.boolean(), next_action: z.string(), browser_url: z.string() }),
  }),
  'The credential making the request and whether to renew it.',
);

const User = z.object({ id: z.string(), email: z.string(), name: z.string().nullable() });

const statusCommon = {
  account: StatusAccount,
  default_account_id: z.string(),
  accounts: z.array(AccountIdentity),
  server_version: z.string(),
  client_version: z.string(),
  connection: Connection,
  user: User,
  dashboard_url: z.string(),
};

export const StatusR = named(
  'Status',
  z.object({ connected: z.literal(true), ...statusCommon, features: z.object({ email_domains: z.boolean() }) }),
  'Connection, account and server status (surface R).',
);

export const StatusA = named(
  'BucketStatus',
  z.object({
    ...statusCommon,
    features: z.object({ website_publishing: z.boolean(), github_sync: z.boolean(), email_domains: z.boolean() }),
    publishing: z.object({ free_plan_available: z.boolean(), static_site: z.boolean() }),
    onboarding: z.object({
      state: z.enum(['empty_account', 'no_visible_buckets', 'active']),
      suggested_projects: z.array(z.object({ id: z.string(), title: z.string(), description: z.string() })),
    }),
  }),
  'Account, features and onboarding status (surface A).',
);

export const AccountList = z.object({ accounts: z.array(AccountIdentity), default_account_id: z.string(), pagination: Pagination });
export const AccountOne = z.object({ account: AccountIdentity });

export const PlanLimits = named('PlanLimits', z.record(z.string(), nullableNumber), 'Every plan limit by key; null means no cap.');

export const AccountLimits = z.object({
  account_id: z.string(),
  limits: PlanLimits,
  usage: z.object({
    mailbox_creations: z.object({ monthly_limit: nullableNumber, used: z.number(), remaining: nullableNumber, resets_at: Timestamp }),
  }),
});
