import { z } from 'zod';
import { named, Pagination, Timestamp } from '../http/contract.ts';

// Response schemas of files, versions, direct uploads and downloads (both surfaces).

const Person = z.object({ id: z.string(), name: z.string().nullable(), email: z.string() }).nullable();
const KeyRef = z.object({ id: z.string(), label: z.string().nullable(), token_type: z.string() }).nullable();
const Agent = z.looseObject({ name: z.string() }).nullable();

const readFields = {
  read: z.boolean(),
  read_at: Timestamp.nullable(),
  read_by: Person,
  read_by_api_key: KeyRef,
};

export const FileVersion = named(
  'FileVersion',
  z.object({
    id: z.string(),
    file_id: z.string(),
    name: z.string(),
    path: z.string(),
    mime_type: z.string(),
    sha256: z.string().nullable(),
    reason: z.string().nullable(),
    created_by_system: z.string().nullable(),
    deleted: z.boolean(),
    ready: z.boolean(),
    has_text: z.boolean(),
    version_number: z.number().int(),
    byte_size: z.number().int(),
    mailbox_version_id: z.string().nullable(),
    created_at: Timestamp,
    created_by: Person,
    updated_by: Person,
    created_by_agent: Agent,
    updated_by_agent: Agent,
    created_by_api_key: KeyRef,
    updated_by_api_key: KeyRef,
    ...readFields,
  }),
  'One version of a file; every write, rename, move, delete and restore is a version.',
  {
    id: 'fv_01JD2Q9K3M4N5P6Q7R8S9T0V1W',
    file_id: 'fil_01JD2Q9K3M4N5P6Q7R8S9T0V1W',
    name: 'notes.md',
    path: 'docs/notes.md',
    mime_type: 'text/markdown',
    sha256: 'b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9',
    reason: null,
    created_by_system: null,
    deleted: false,
    ready: true,
    has_text: true,
    version_number: 2,
    byte_size: 11,
    mailbox_version_id: 'mv_01JD2Q9K3M4N5P6Q7R8S9T0V1W',
    created_at: '2026-11-24T10:00:00.000Z',
    created_by: null,
    updated_by: null,
    created_by_agent: null,
    updated_by_agent: null,
    created_by_api_key: { id: 'key_01JD…', label: 'laptop', token_type: 'api' },
    updated_by_api_key: { id: 'key_01JD…', label: 'laptop', token_type: 'api' },
    read: false,
    read_at: null,
    read_by: null,
    read_by_api_key: null,
  },
);

export const MailboxFile = named(
  'MailboxFile',
  z.object({
    id: z.string(),
    mailbox_id: z.string(),
    basename: z.string(),
    path: z.string(),
    role: z.string(),
    created_by_system: z.string().nullable(),
    deleted: z.boolean(),
    version_reasons: z.array(
      z.object({ version_id: z.string(), reason: z.string().nullable(), created_by_id: z.string().nullable(), version_number: z.number().int(), created_at: Timestamp }),
    ),
    lock: z.object({ locked: z.boolean() }),
    current_file_version: FileVersion.nullable(),
    created_by: Person,
    created_at: Timestamp,
    updated_at: Timestamp,
    deleted_at: Timestamp.nullable(),
    created_by_agent: Agent,
    updated_by_agent: Agent,
    created_by_api_key: KeyRef,
    updated_by_api_key: KeyRef,
    ...readFields,
  }),
  'A file of a mailbox (bucket) with its current version.',
);

export const FileList = z.object({ files: z.array(MailboxFile), pagination: Pagination });
export const FileOne = z.object({ file: MailboxFile });
export const VersionList = z.object({ versions: z.array(FileVersion), pagination: Pagination });

export const FileWrite = named(
  'FileWrite',
  z.object({
    file: MailboxFile,
    version: FileVersion,
    created: z.boolean().describe('A new file (not a new version of an existing one)'),
    skipped: z.boolean(),
    duplicate: z.boolean().describe('The content was identical to the current version'),
    code: z.enum(['DUPLICATE_FILE_VERSION', 'FILE_EXISTS']).optional().describe('Why nothing was written, when skipped'),
  }),
  'The result of a write: the file, the version it made (or kept), and what happened.',
);

export const AppendResult = z.object({
  file: MailboxFile,
  version: FileVersion,
  path: z.string(),
  appended: z.literal(true),
  appended_bytes: z.number().int(),
  newline_inserted: z.boolean(),
});

export const FileDeleted = z.object({ deleted: z.literal(true), id: z.string(), version: FileVersion, mailbox_version_id: z.string().nullable() });

export const DownloadLink = named(
  'DownloadLink',
  z.object({
    url: z.string(),
    filename: z.string(),
    content_type: z.string(),
    size_bytes: z.number().int(),
    authentication: z.literal('none').describe('Fetch the URL without the API key'),
    expires_in: z.number().int().describe('Seconds the URL stays valid'),
  }),
  'A signed, expiring URL for the bytes.',
);

export const UploadTarget = named(
  'UploadTarget',
  z.object({ url: z.string(), headers: z.record(z.string(), z.string()).describe('Send exactly these headers with the PUT') }),
  'Where to PUT the bytes, without the API key.',
);

export const DirectUpload = named(
  'DirectUpload',
  z.object({
    signed_id: z.string().describe('Pass as signed_blob_id when saving the file'),
    filename: z.string(),
    byte_size: z.number().int(),
    checksum: z.string(),
    content_type: z.string(),
    expires_at: Timestamp,
    direct_upload: UploadTarget,
    skipped: z.literal(false),
    duplicate: z.literal(false),
  }),
  'A declared upload: PUT the bytes to direct_upload.url, then save the file with signed_id.',
);

export const DirectUploadSkipped = named(
  'DirectUploadSkipped',
  z.object({
    skipped: z.literal(true),
    duplicate: z.boolean(),
    file: MailboxFile,
    version: FileVersion,
    reason: z.string(),
    details: z.object({ code: z.string(), path: z.string() }),
  }),
  'No upload needed: the path already holds this content (or existing_file_policy=skip).',
);
