import { z } from 'zod';
import { named, Timestamp } from '../http/contract.ts';
import { FileVersion, MailboxFile, UploadTarget } from '../files/files.responses.ts';

// Response schemas of batch upload sessions (both surfaces).

export const UploadSession = named(
  'UploadSession',
  z.object({
    id: z.string(),
    mailbox_id: z.string(),
    status: z.string().describe('pending, finalizing, finalized, cancelled or expired'),
    base_mailbox_version_id: z.string().nullable(),
    target_mailbox_version_id: z.string().nullable(),
    uploads_expire_at: Timestamp.nullable(),
    session_closed_at: Timestamp.nullable(),
    files_count: z.number().int(),
    pending_files_count: z.number().int(),
    uploaded_files_count: z.number().int(),
    finalized_files_count: z.number().int(),
    skipped_files_count: z.number().int(),
    skipped_code_counts: z.record(z.string(), z.number().int()),
    failed_files_count: z.number().int(),
    delete_missing: z.boolean(),
    expected_file_count: z.number().int().nullable(),
    client_session_key: z.string().nullable(),
    idle_timeout_seconds: z.number().int().optional().describe('An idle session (no call for this long) releases its lock and expires'),
    created_at: Timestamp,
  }),
  'A batch upload session: it holds the mailbox write lock until finalized or cancelled.',
  {
    id: 'bus_01JD2Q9K3M4N5P6Q7R8S9T0V1W',
    mailbox_id: 'bkt_01JD2Q9K3M4N5P6Q7R8S9T0V1W',
    status: 'pending',
    base_mailbox_version_id: 'mv_01JD…',
    target_mailbox_version_id: null,
    uploads_expire_at: '2026-11-24T11:00:00.000Z',
    session_closed_at: null,
    files_count: 300,
    pending_files_count: 12,
    uploaded_files_count: 288,
    finalized_files_count: 0,
    skipped_files_count: 0,
    skipped_code_counts: {},
    failed_files_count: 0,
    delete_missing: false,
    expected_file_count: 300,
    client_session_key: 'site-build-42',
    created_at: '2026-11-24T10:00:00.000Z',
  },
);

const sessionResult = {
  uploads: z.array(z.object({ input_index: z.number().int(), path: z.string(), name: z.string(), signed_blob_id: z.string(), upload: UploadTarget })),
  uploaded: z.array(z.object({ input_index: z.number().int(), path: z.string(), file: MailboxFile, version: FileVersion, created: z.boolean() })),
  uploaded_count: z.number().int(),
  uploaded_truncated: z.boolean(),
  created_count: z.number().int(),
  updated_count: z.number().int(),
  skipped: z.array(
    z.object({ path: z.string(), name: z.string().nullable(), reason: z.string(), code: z.string(), input_index: z.number().int(), details: z.record(z.string(), z.unknown()) }),
  ),
  skipped_count: z.number().int(),
  skipped_truncated: z.boolean(),
  finalize_pending: z.boolean().describe('true with 202: call finalize again after Retry-After'),
  remaining_files_count: z.number().int(),
  message: z.string(),
};

export const UploadSessionResultR = named(
  'UploadSessionResult',
  z.object({ mailbox_upload_session: UploadSession, ...sessionResult }),
  "A session call's result: the session and this call's upload targets, saves and skips.",
);

export const UploadSessionResultA = named(
  'BucketUploadSessionResult',
  z.object({
    id: z.string(),
    bucket_upload_session: UploadSession.extend({ bucket_id: z.string() }).describe('The session under the name bucket-era clients read (docs/compat.md)'),
    upload_session: UploadSession,
    mailbox_upload_session: UploadSession,
    ...sessionResult,
  }),
  "A session call's result (surface A): the session (also as upload_session) and this call's targets, saves and skips.",
);
