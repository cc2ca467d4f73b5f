import { z } from 'zod';
import { named, Timestamp } from '../http/contract.ts';

const SyncState = z.enum(['queued', 'syncing', 'synced', 'failed']).describe('queued: a sync is waiting; syncing: running; synced: the bucket holds last_commit; failed: see error');
const SyncError = z.object({ code: z.string().describe('A GIT_* code of the error catalogue (or a file limit code)'), message: z.string() }).nullable().describe('Why the last sync failed; null after a good one');

export const GitSyncSetup = named(
  'GitSyncSetup',
  z.object({
    eligible: z.boolean(),
    settings_url: z.string(),
    blocked_reason: z.enum(['feature_disabled', 'encrypted_account', 'account_capability_unavailable', 'bucket_archived']).nullable(),
  }),
  'Whether the bucket can be connected to a git repository now, and why not.',
  { eligible: true, settings_url: 'https://cubby.example/mailboxes/bkt_01JD2Q9K3M4N5P6Q7R8S9T0V1W/git', blocked_reason: null },
);

export const BucketGitSync = named(
  'BucketGitSync',
  z.object({
    repository_url: z.string(),
    branch: z.string(),
    sync_state: SyncState,
    last_synced_at: Timestamp.nullable(),
    last_checked_at: Timestamp.nullable(),
    last_commit: z.string().nullable(),
    auto_publish: z.boolean(),
    error: SyncError,
  }),
  "The bucket's git connection in brief (GET …/github_sync has the full state).",
);

export const GitSync = named(
  'GitSync',
  z.object({
    repository_url: z.string(),
    branch: z.string(),
    subdirectory: z.string().describe('Repository folder synced as the bucket root; "" = the whole tree'),
    sync_state: SyncState,
    last_synced_at: Timestamp.nullable().describe('When the bucket last took the repository state'),
    last_checked_at: Timestamp.nullable().describe('When the repository was last asked'),
    last_commit: z.string().nullable(),
    last_trigger: z.enum(['connect', 'manual', 'webhook', 'schedule']).nullable(),
    last_version_id: z.string().nullable().describe('The mailbox version the last sync that changed something made'),
    auto_publish: z.boolean().describe("Rebuild the bucket's website after every sync that changes files"),
    error: SyncError,
    token_configured: z.boolean(),
    webhook_url: z.string().describe('Push webhook URL to set at the git host (content type application/json, with the webhook secret)'),
    synced_files_count: z.number().int(),
    skipped_files: z.array(z.object({ path: z.string(), reason: z.string() })).describe('Repository files not written (symlink, submodule, invalid_path, email_area, forbidden_type); at most 50'),
    created_at: Timestamp,
    updated_at: Timestamp,
  }),
  "A bucket's git sync connection. The token and the webhook secret are never shown.",
  {
    repository_url: 'https://github.com/example/site.git',
    branch: 'main',
    subdirectory: '',
    sync_state: 'synced',
    last_synced_at: '2026-11-26T10:00:00.000Z',
    last_checked_at: '2026-11-26T10:15:00.000Z',
    last_commit: '4b825dc642cb6eb9a060e54bf8d69288fbee4904',
    last_trigger: 'webhook',
    last_version_id: 'bktrv_01JD2Q9K3M4N5P6Q7R8S9T0V1W',
    auto_publish: true,
    error: null,
    token_configured: true,
    webhook_url: 'https://cubby.example/hooks/git/bkt_01JD2Q9K3M4N5P6Q7R8S9T0V1W',
    synced_files_count: 12,
    skipped_files: [],
    created_at: '2026-11-20T09:00:00.000Z',
    updated_at: '2026-11-26T10:15:00.000Z',
  },
);

export const GitSyncState = z.object({ github_sync: GitSync.nullable(), github_sync_setup: GitSyncSetup });
export const GitSyncConnected = z.object({
  github_sync: GitSync,
  github_sync_setup: GitSyncSetup,
  webhook_secret: z.string().optional().describe('Shown once: when the connection is made and on rotate_webhook_secret'),
});
export const PushReceived = z.object({ queued: z.boolean(), reason: z.enum(['ping', 'ignored_event', 'other_branch']).nullable() });
