import { z } from 'zod';
import { Json, named, Pagination, Timestamp } from '../http/contract.ts';
import { BucketGitSync, GitSyncSetup } from '../gitsync/gitsync.responses.ts';

// Response schemas of mailboxes (surface R) and buckets (surface A); see docs/api-contract.md.

export const MailboxAction = named(
  'MailboxAction',
  z.object({
    allowed: z.boolean(),
    blocked_reason: z.string().nullable(),
    required_action: z.string().nullable(),
    confirmation: z.string().nullable().describe('For delete: the exact `confirmation` value to send'),
  }),
  'Whether an action (archive, unarchive, delete) is allowed now, and if not why.',
);

export const MailboxEmail = named(
  'MailboxEmail',
  z.object({
    address: z.string().optional().describe('Only for credentials with write access'),
    message_count: z.number().int(),
    unread_count: z.number().int(),
    last_received_at: Timestamp.nullable(),
    receiving_enabled: z.boolean(),
    blocked_reason: z.string().nullable().optional().describe('Why the mailbox is not receiving'),
    sending_enabled: z.boolean(),
    sending_blocked_reason: z.string().nullable().optional(),
  }),
  "The mailbox's email address and counters.",
);

const MailboxLock = z.object({
  locked: z.boolean(),
  locked_until: Timestamp.nullable(),
  kind: z.string().nullable(),
  message: z.string().nullable(),
  progress: z.unknown().nullable(),
  locked_by: z.object({ id: z.string() }).nullable(),
  locked_by_api_key: z.object({ id: z.string() }).nullable(),
});

const tree = {
  storage_bytes: z.number().int(),
  files_count: z.number().int(),
  version_id: z.string().nullable().describe('The latest mailbox version (mv_…)'),
  version_number: z.number().int(),
  created_at: Timestamp,
  updated_at: Timestamp,
};

const actions = { archive: MailboxAction, unarchive: MailboxAction, delete: MailboxAction };

export const Mailbox = named(
  'Mailbox',
  z.object({
    id: z.string(),
    account_id: z.string(),
    title: z.string().nullable().describe('Only shown to callers with write access'),
    description: z.string().nullable(),
    metadata: Json,
    metadata_version: z.string(),
    email: MailboxEmail,
    archived: z.boolean(),
    archived_at: Timestamp.nullable(),
    lock: MailboxLock,
    ...tree,
    dashboard_url: z.string(),
    ...actions,
  }),
  'A private file bucket with its own email address (surface R).',
  {
    id: 'bkt_01JD2Q9K3M4N5P6Q7R8S9T0V1W',
    account_id: 'acc_01JD2Q9K3M4N5P6Q7R8S9T0V1W',
    title: 'Receipts',
    description: 'Forwarded receipts',
    metadata: { project: 'taxes-2026' },
    metadata_version: 'mdv_1',
    email: { address: 'receipts-7k2m@cubby.example', message_count: 3, unread_count: 1, last_received_at: '2026-11-24T10:00:00.000Z', receiving_enabled: true, sending_enabled: true },
    archived: false,
    archived_at: null,
    lock: { locked: false, locked_until: null, kind: null, message: null, progress: null, locked_by: null, locked_by_api_key: null },
    storage_bytes: 48213,
    files_count: 9,
    version_id: 'mv_01JD2Q9K3M4N5P6Q7R8S9T0V1W',
    version_number: 12,
    created_at: '2026-11-01T09:00:00.000Z',
    updated_at: '2026-11-24T10:00:00.000Z',
    dashboard_url: 'https://cubby.example/mailboxes/bkt_01JD2Q9K3M4N5P6Q7R8S9T0V1W',
    archive: { allowed: true, blocked_reason: null, required_action: null, confirmation: null },
    unarchive: { allowed: false, blocked_reason: 'not_archived', required_action: null, confirmation: null },
    delete: { allowed: false, blocked_reason: 'not_archived', required_action: 'archive_first', confirmation: 'DELETE bkt_01JD2Q9K3M4N5P6Q7R8S9T0V1W' },
  },
);

export const MailboxCounts = named('MailboxCounts', z.object({ active: z.number().int(), archived: z.number().int(), total: z.number().int() }), 'Mailboxes of the account by state.');

export const MailboxList = z.object({ mailboxes: z.array(Mailbox), counts: MailboxCounts, pagination: Pagination });
export const MailboxOne = z.object({ mailbox: Mailbox });

/** Surface A's inbound_email: activity always; the address and state only on authorized reads. */
export const BucketInboundEmail = named(
  'BucketInboundEmail',
  z.looseObject({
    address: z.string().nullable().optional(),
    configured: z.boolean().optional(),
    receiving_enabled: z.boolean().optional(),
    last_received_at: Timestamp.nullable().optional(),
    received_count: z.number().int(),
    monthly_limit: z.number().nullable(),
    last_received_path: z.string().nullable(),
  }),
  "The bucket's inbound email activity; with include_inbound_email (write access) also its address, aliases, domains and assignment.",
);

export const Bucket = named(
  'Bucket',
  z.object({
    id: z.string(),
    account_id: z.string(),
    title: z.string().nullable(),
    description: z.string().nullable(),
    metadata: Json,
    metadata_version: z.string(),
    tag_paths: z.array(z.string()),
    archived: z.boolean(),
    archived_at: Timestamp.nullable(),
    published: z.boolean(),
    public_url: z.string().nullable(),
    dashboard_url: z.string(),
    inbound_email: BucketInboundEmail,
    github_sync: BucketGitSync.nullable().describe('null when the bucket is not connected to a git repository'),
    github_sync_setup: GitSyncSetup,
    ...tree,
    ...actions,
  }),
  'A private file bucket (surface A): the same stored object as a mailbox.',
  {
    id: 'bkt_01JD2Q9K3M4N5P6Q7R8S9T0V1W',
    account_id: 'acc_01JD2Q9K3M4N5P6Q7R8S9T0V1W',
    title: 'Site',
    description: null,
    metadata: {},
    metadata_version: 'mdv_1',
    tag_paths: [],
    archived: false,
    archived_at: null,
    published: true,
    public_url: 'https://site-7k2m.cubby.example',
    dashboard_url: 'https://cubby.example/mailboxes/bkt_01JD2Q9K3M4N5P6Q7R8S9T0V1W',
    inbound_email: { received_count: 0, monthly_limit: 1000, last_received_path: null },
    github_sync: null,
    github_sync_setup: { eligible: true, settings_url: 'https://cubby.example/mailboxes/bkt_01JD2Q9K3M4N5P6Q7R8S9T0V1W/git', blocked_reason: null },
    storage_bytes: 1024,
    files_count: 2,
    version_id: 'mv_01JD2Q9K3M4N5P6Q7R8S9T0V1W',
    version_number: 3,
    created_at: '2026-11-01T09:00:00.000Z',
    updated_at: '2026-11-24T10:00:00.000Z',
    archive: { allowed: false, blocked_reason: 'website_published', required_action: 'unpublish_first', confirmation: null },
    unarchive: { allowed: false, blocked_reason: 'not_archived', required_action: null, confirmation: null },
    delete: { allowed: false, blocked_reason: 'not_archived', required_action: 'archive_first', confirmation: 'DELETE bkt_01JD2Q9K3M4N5P6Q7R8S9T0V1W' },
  },
);

export const BucketList = z.object({ buckets: z.array(Bucket), counts: MailboxCounts, pagination: Pagination });
export const BucketOne = z.object({ bucket: Bucket });
