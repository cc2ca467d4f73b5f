import type { Kysely } from 'kysely';
import type { DB } from '../db/schema.ts';

// What `cubby admin list-accounts` and `list-users` print: enough to find the id another admin
// command needs. No secrets (password hashes, key hashes) ever leave the database here.

export async function listAccounts(db: Kysely<DB>) {
  const accounts = await db.selectFrom('accounts').selectAll().orderBy('created_at').orderBy('id').execute();
  const members = await db
    .selectFrom('memberships')
    .innerJoin('users', 'users.id', 'memberships.user_id')
    .select(['memberships.account_id', 'users.id as user_id', 'users.email', 'memberships.role'])
    .orderBy('memberships.created_at')
    .execute();
  return accounts.map((a) => ({
    id: a.id,
    name: a.name,
    kind: a.kind,
    plan: a.plan,
    status: a.status,
    suspended: a.suspended_at !== null,
    website_publishing_enabled: Boolean(a.website_publishing_enabled),
    parent_account_id: a.parent_account_id,
    created_at: a.created_at,
    members: members.filter((m) => m.account_id === a.id).map((m) => ({ user_id: m.user_id, email: m.email, role: m.role })),
  }));
}

export async function listUsers(db: Kysely<DB>) {
  const users = await db.selectFrom('users').select(['id', 'email', 'name', 'created_at']).orderBy('created_at').orderBy('id').execute();
  const memberships = await db
    .selectFrom('memberships')
    .innerJoin('accounts', 'accounts.id', 'memberships.account_id')
    .select(['memberships.user_id', 'accounts.id as account_id', 'accounts.name as account_name', 'memberships.role'])
    .orderBy('memberships.created_at')
    .execute();
  return users.map((u) => ({
    ...u,
    accounts: memberships.filter((m) => m.user_id === u.id).map((m) => ({ id: m.account_id, name: m.account_name, role: m.role })),
  }));
}
