import type { RequestCtx } from '../context.ts';
import type { Permissions, AccountAccess } from '../auth/access.ts';
import type { MailboxRow } from './mailboxes.repo.ts';
import { deleteConfirmation } from './mailboxes.service.ts';
import { limitsFor } from '../accounts/limits.service.ts';
import { sendingBlockedReason } from '../outbound/sending-state.ts';
import { presentBucketGitSync, presentGitSyncSetup } from '../gitsync/gitsync.present.ts';

function action(allowed: boolean, blocked_reason: string | null, required_action: string | null = null, confirmation: string | null = null) {
  return { allowed, blocked_reason: allowed ? null : blocked_reason, required_action: allowed ? null : required_action, confirmation };
}

function accountBlock(access: AccountAccess): string | null {
  if (access.account.suspended_at) return 'account_suspended';
  if (access.account.status === 'read_only') return 'account_read_only';
  return null;
}

/** archive / unarchive / delete, computed from state and the caller's permission. */
export function mailboxActions(m: MailboxRow, perms: Permissions, access: AccountAccess) {
  const blocked = accountBlock(access);
  const archived = m.archived_at !== null;
  return {
    // A bucket with a website is unpublished first (src/sites): its site_state is null again after.
    archive: m.site_state && !archived
      ? action(false, 'website_published', 'unpublish_first')
      : action(!blocked && !archived && perms.write, blocked ?? (archived ? 'already_archived' : 'permission_denied')),
    unarchive: action(!blocked && archived && perms.admin, blocked ?? (!archived ? 'not_archived' : 'admin_required')),
    delete: action(
      !blocked && archived && perms.admin,
      blocked ?? (!archived ? 'not_archived' : 'admin_required'),
      !archived ? 'archive_first' : null,
      deleteConfirmation(m.id),
    ),
  };
}

function lockOf(m: MailboxRow, now: Date) {
  const locked = m.locked_until !== null && Date.parse(m.locked_until) > now.getTime();
  return {
    locked,
    locked_until: locked ? m.locked_until : null,
    kind: locked ? m.lock_kind : null,
    message: locked ? m.lock_message : null,
    progress: locked && m.lock_progress ? JSON.parse(m.lock_progress) : null,
    locked_by: locked && m.locked_by_user_id ? { id: m.locked_by_user_id } : null,
    locked_by_api_key: locked && m.locked_by_api_key_id ? { id: m.locked_by_api_key_id } : null,
  };
}

/** MailboxEmail: the address only for credentials with write access. */
export function mailboxEmail(m: MailboxRow, perms: Permissions, access: AccountAccess) {
  const archived = m.archived_at !== null;
  // A custom domain receives only while ready (src/domains): paused when its DNS records went missing.
  const domainBlock = m.domain_status && m.domain_status !== 'ready' ? (m.domain_status === 'paused' ? 'domain_paused' : 'domain_not_receiving') : null;
  const receiving = !archived && m.receiving_enabled === 1 && !domainBlock;
  const sendingBlocked = sendingBlockedReason(m, access.account);
  const sending = sendingBlocked === null;
  return {
    ...(perms.write ? { address: m.address } : {}),
    message_count: Number(m.message_count),
    unread_count: Number(m.unread_count),
    last_received_at: m.last_received_at,
    receiving_enabled: receiving,
    ...(receiving ? {} : { blocked_reason: archived ? 'mailbox_archived' : m.receiving_enabled !== 1 ? 'receiving_disabled' : domainBlock }),
    sending_enabled: sending,
    ...(sending ? {} : { sending_blocked_reason: sendingBlocked }),
  };
}

/** File-tree counters and timestamps, the same on both surfaces. */
function treeFields(m: MailboxRow) {
  return {
    storage_bytes: Number(m.storage_bytes),
    files_count: Number(m.files_count),
    version_id: m.version_id,
    version_number: Number(m.version_number),
    created_at: m.created_at,
    updated_at: m.updated_at,
  };
}

/** Mailbox on surface R. */
export function presentMailbox(ctx: RequestCtx, m: MailboxRow, perms: Permissions, access: AccountAccess) {
  return {
    id: m.id,
    account_id: m.account_id,
    // The title is shown only to callers who may see the address.
    title: perms.write ? m.title : null,
    description: m.description,
    metadata: JSON.parse(m.metadata),
    metadata_version: m.metadata_version,
    email: mailboxEmail(m, perms, access),
    archived: m.archived_at !== null,
    archived_at: m.archived_at,
    lock: lockOf(m, ctx.now()),
    ...treeFields(m),
    dashboard_url: `${ctx.publicUrl()}/mailboxes/${m.id}`,
    ...mailboxActions(m, perms, access),
  };
}

/** BucketInboundEmail: activity fields always; address and state only when asked with write access. */
export function presentInboundEmail(m: MailboxRow, access: AccountAccess, full: boolean) {
  const activity = {
    received_count: Number(m.received_this_month ?? 0),
    monthly_limit: limitsFor(access.account).max_received_emails_per_month,
    last_received_path: m.last_received_path,
  };
  if (!full) return activity;
  return {
    address: m.address,
    configured: m.address !== null,
    receiving_enabled: m.archived_at === null && m.receiving_enabled === 1 && (!m.domain_status || m.domain_status === 'ready'),
    last_received_at: m.last_received_at,
    ...activity,
  };
}

/** Bucket on surface A. */
export function presentBucket(ctx: RequestCtx, m: MailboxRow, perms: Permissions, access: AccountAccess, opts: { includeInboundEmail: boolean }) {
  const actions = mailboxActions(m, perms, access);
  const archived = m.archived_at !== null;
  return {
    id: m.id,
    account_id: m.account_id,
    title: m.title,
    description: m.description,
    metadata: JSON.parse(m.metadata),
    metadata_version: m.metadata_version,
    tag_paths: JSON.parse(m.tag_paths),
    archived,
    archived_at: m.archived_at,
    published: m.site_state === 'published',
    public_url: m.site_state === 'published' && m.site_slug ? (m.site_domain ? ctx.siteDomainUrl(m.site_domain) : ctx.siteUrl(m.site_slug)) : null,
    dashboard_url: `${ctx.publicUrl()}/mailboxes/${m.id}`,
    inbound_email: presentInboundEmail(m, access, opts.includeInboundEmail),
    github_sync: presentBucketGitSync(m),
    github_sync_setup: presentGitSyncSetup(ctx, m.id, archived, access.account),
    ...treeFields(m),
    ...actions,
  };
}
