// The git_syncs table (migration 0020): one repository connection per bucket.

export type GitSyncState = 'queued' | 'syncing' | 'synced' | 'failed';
export type GitSyncTrigger = 'connect' | 'manual' | 'webhook' | 'schedule';

export interface GitSyncsTable {
  mailbox_id: string;
  account_id: string;
  repository_url: string;
  branch: string;
  /** Folder of the repository whose contents become the bucket's root ('' = the whole tree). */
  subdirectory: string;
  /** Access token, encrypted (secrets.ts); null for public repositories. */
  token_ciphertext: string | null;
  webhook_secret_ciphertext: string;
  auto_publish: number;
  sync_state: GitSyncState;
  /** Commit the bucket holds (the last successful sync). */
  last_commit: string | null;
  last_synced_at: string | null;
  last_checked_at: string | null;
  last_trigger: GitSyncTrigger | null;
  last_version_id: string | null;
  error_code: string | null;
  error_message: string | null;
  /** JSON: {[path]: {oid, sha256}} of the files the last sync wrote. */
  manifest: string;
  /** JSON: [{path, reason}] of repository files the last sync left out (at most 50). */
  skipped: string;
  created_by_user_id: string | null;
  created_at: string;
  updated_at: string;
}

declare module '../db/schema.ts' {
  interface DB {
    git_syncs: GitSyncsTable;
  }
}
