import { z } from 'zod';

// Response schemas for routes that declare them (OpenAPI and the serializer). They name the fields
// clients rely on and let the rest through (loose objects), so that adding a field never breaks a
// response; the exact record shapes are the presenters'.

/** Surface A error envelope: `{error: {message, code, request_id, docs_url, details}}`. */
export const ErrorA = z
  .looseObject({
    error: z.looseObject({
      code: z.string(),
      message: z.string(),
      request_id: z.string(),
      details: z.record(z.string(), z.unknown()).optional(),
    }),
  })
  .describe('Surface A error');

/** The error statuses every authenticated surface A route may answer. */
export const errorsA = { 400: ErrorA, 401: ErrorA, 403: ErrorA, 404: ErrorA, 409: ErrorA, 422: ErrorA, 423: ErrorA, 429: ErrorA, 503: ErrorA } as const;

export const MailboxFile = z.looseObject({ id: z.string(), mailbox_id: z.string(), path: z.string(), basename: z.string() }).describe('MailboxFile');
export const FileVersion = z.looseObject({ id: z.string(), file_id: z.string(), version_number: z.number() }).describe('FileVersion');

export const Pagination = z
  .looseObject({ limit: z.number(), has_more: z.boolean(), next_cursor: z.string().nullable() })
  .describe('Cursor pagination (some lists add offset, count, total, next_offset)');

/** A file write on surface A: `{data: {file, version, …}}`. */
export const FileWriteA = z.looseObject({ data: z.looseObject({ file: MailboxFile, version: FileVersion }) });

export const UploadSession = z
  .looseObject({ id: z.string(), mailbox_id: z.string(), status: z.enum(['pending', 'finalized', 'expired', 'failed']), uploads_expire_at: z.string() })
  .describe('Upload session');

/** A surface A upload-session reply: the session under every name clients read. */
export const UploadSessionA = z.looseObject({
  data: z.looseObject({
    id: z.string(),
    bucket_upload_session: UploadSession.extend({ bucket_id: z.string() }),
    upload_session: UploadSession,
    mailbox_upload_session: UploadSession,
    uploads: z.array(z.looseObject({ input_index: z.number(), path: z.string(), upload: z.looseObject({ url: z.string(), headers: z.record(z.string(), z.string()) }) })),
    finalize_pending: z.boolean(),
    remaining_files_count: z.number(),
  }),
});

export const Publication = z
  .looseObject({
    id: z.string(),
    bucket_id: z.string(),
    kind: z.enum(['bucket_bundle', 'preview']),
    public_url: z.string(),
    publish_state: z.string(),
    access_mode: z.string(),
    access_password: z.string().nullable().optional(),
    share_text: z.string().optional(),
  })
  .describe('Publication');

export const PublicationA = z.looseObject({ data: z.looseObject({ publication: Publication }) });
