import type { AppDeps } from '../context.ts';
import type { AccountsTable } from '../db/schema.ts';
import type { GitSyncsTable } from './gitsync.schema.ts';

// The two views of a connection: the bucket's compact `github_sync` (what the spec lists) and the
// full state of GET …/github_sync. Neither ever shows the token or the webhook secret.

/** The connection columns the bucket query carries (src/mailboxes/mailboxes.repo.ts). */
export interface GitSyncColumns {
  git_repository_url: string | null;
  git_branch: string | null;
  git_sync_state: string | null;
  git_auto_publish: number | null;
  git_last_synced_at: string | null;
  git_last_checked_at: string | null;
  git_last_commit: string | null;
  git_error_code: string | null;
  git_error_message: string | null;
}

function errorOf(code: string | null, message: string | null) {
  return code ? { code, message: message ?? '' } : null;
}

/** Bucket.github_sync: null when the bucket is not connected. */
export function presentBucketGitSync(c: GitSyncColumns) {
  if (!c.git_repository_url) return null;
  return {
    repository_url: c.git_repository_url,
    branch: c.git_branch!,
    sync_state: c.git_sync_state!,
    last_synced_at: c.git_last_synced_at,
    last_checked_at: c.git_last_checked_at,
    last_commit: c.git_last_commit,
    auto_publish: c.git_auto_publish === 1,
    error: errorOf(c.git_error_code, c.git_error_message),
  };
}

/** Bucket.github_sync_setup: whether this bucket can be connected now, and why not. */
export function presentGitSyncSetup(deps: Pick<AppDeps, 'config' | 'publicUrl'>, bucketId: string, archived: boolean, account: Pick<AccountsTable, 'suspended_at' | 'status'>) {
  // Accounts in Cubby are never end-to-end encrypted, so `encrypted_account` does not occur here.
  const blocked = !deps.config.gitSync.enabled
    ? 'feature_disabled'
    : archived
      ? 'bucket_archived'
      : account.suspended_at || account.status === 'read_only'
        ? 'account_capability_unavailable'
        : null;
  return { eligible: blocked === null, settings_url: `${deps.publicUrl()}/mailboxes/${bucketId}/git`, blocked_reason: blocked };
}

/** GET …/github_sync: the full state. */
export function presentGitSync(deps: Pick<AppDeps, 'publicUrl'>, row: GitSyncsTable) {
  const manifest = JSON.parse(row.manifest) as Record<string, unknown>;
  const skipped = JSON.parse(row.skipped) as { path: string; reason: string }[];
  return {
    repository_url: row.repository_url,
    branch: row.branch,
    subdirectory: row.subdirectory,
    sync_state: row.sync_state,
    last_synced_at: row.last_synced_at,
    last_checked_at: row.last_checked_at,
    last_commit: row.last_commit,
    last_trigger: row.last_trigger,
    last_version_id: row.last_version_id,
    auto_publish: row.auto_publish === 1,
    error: errorOf(row.error_code, row.error_message),
    token_configured: row.token_ciphertext !== null,
    webhook_url: `${deps.publicUrl()}/hooks/git/${row.mailbox_id}`,
    synced_files_count: Object.keys(manifest).length,
    skipped_files: skipped,
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}
