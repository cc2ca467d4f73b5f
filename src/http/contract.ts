import { z } from 'zod';
import { ERROR_CATALOGUE, type ErrorCode } from '../errors.ts';

// The response half of the API contract. Every route on /v1 and /api/v1 declares its
// responses with `responsesR` / `responsesA`: the success statuses it really returns with
// their zod schemas, and the error codes it can raise. The helpers group the codes by the
// catalogue's status, add the codes every route can meet (authentication, validation, rate
// limit), and wrap each in the surface's error envelope. Named schemas (`.meta({ id })`)
// become `components.schemas` in the OpenAPI documents. See docs/api-contract.md.

/** Registers a schema as a named, reusable component of the OpenAPI documents. */
export function named<T extends z.ZodType>(id: string, schema: T, description?: string, example?: unknown): T {
  return schema.meta({ id, ...(description ? { description } : {}), ...(example !== undefined ? { examples: [example] } : {}) });
}

export const Timestamp = z.string().describe('ISO 8601 UTC timestamp with milliseconds');
export const Json = z.record(z.string(), z.unknown());

export const Pagination = named(
  'Pagination',
  z.object({
    limit: z.number().int(),
    has_more: z.boolean(),
    next_cursor: z.string().nullable().describe('Pass as `cursor` for the next page; null on the last page'),
    // Offset paging (files and accounts lists; docs/compat.md): present when the list supports it.
    offset: z.number().int().optional().describe('Offset paging: the offset of this page'),
    count: z.number().int().optional().describe('Offset paging: items on this page'),
    total: z.number().int().optional().describe('Offset paging: items in the whole list'),
    next_offset: z.number().int().nullable().optional().describe('Offset paging: pass as `offset` for the next page; null on the last page'),
  }),
  'Keyset pagination of a list; cursors are opaque and bound to the filters they were made with.',
  { limit: 50, has_more: true, next_cursor: 'eyJiIjoi…' },
);

const errorFields = {
  code: z.string().describe('Stable error code; clients branch on it (see the response description for the codes)'),
  message: z.string(),
  request_id: z.string(),
  details: Json.describe('Structured context: `field` for validation errors, `retry_after` seconds on 429/503'),
};

/** Surface R's error envelope. Extra top-level fields (e.g. `read_only`) may appear. */
export const ErrorR = named(
  'Error',
  z.object({ success: z.literal(false), error: z.looseObject(errorFields) }),
  'Error envelope of surface R (/v1).',
  { success: false, error: { code: 'MAILBOX_NOT_FOUND', message: 'Mailbox not found.', details: {}, request_id: 'req_01J…' } },
);

/** Surface A's error envelope. */
export const ErrorA = named(
  'ApiError',
  z.object({ error: z.looseObject({ ...errorFields, docs_url: z.string() }) }),
  'Error envelope of surface A (/api/v1).',
  { error: { message: 'Bucket not found.', code: 'BUCKET_NOT_FOUND', request_id: 'req_01J…', docs_url: 'https://cubby.example/docs/errors#BUCKET_NOT_FOUND', details: {} } },
);

/** `{ success: true, data }` on surface R. */
export const okR = <T extends z.ZodType>(data: T) => z.object({ success: z.literal(true), data });
/** `{ data }` on surface A. */
export const okA = <T extends z.ZodType>(data: T) => z.object({ data });

const AUTH_CODES: ErrorCode[] = ['UNAUTHENTICATED', 'API_KEY_EXPIRED', 'API_KEY_REVOKED', 'RATE_LIMITED'];
const COMMON_CODES: ErrorCode[] = ['INVALID_ARGUMENT', 'INTERNAL'];
/** Every account-scoped read: the account selector and the reason check. */
export const READ_CODES: ErrorCode[] = ['ACCOUNT_ACCESS_DENIED', 'ACCOUNT_NOT_FOUND', 'PERMISSION_DENIED', 'REASON_CONTAINS_SECRET'];
/** Every change: reads' codes plus the account state and permission refusals. */
export const WRITE_CODES: ErrorCode[] = [...READ_CODES, 'ACCOUNT_READ_ONLY', 'ACCOUNT_SUSPENDED'];
const BODY_CODES: ErrorCode[] = ['MALFORMED_JSON', 'UNSUPPORTED_MEDIA_TYPE', 'PAYLOAD_TOO_LARGE'];

const STATUS_TEXT: Record<number, string> = {
  200: 'OK',
  201: 'Created',
  202: 'Accepted',
  204: 'No content',
  206: 'Partial content',
  302: 'Found (redirect)',
  304: 'Not modified',
  400: 'Malformed request',
  401: 'Not authenticated',
  403: 'Refused',
  404: 'Not found',
  405: 'Method not allowed',
  409: 'Conflict with the current state; nothing changed',
  413: 'Too large',
  415: 'Unsupported media type',
  416: 'Range not satisfiable',
  422: 'Invalid input; nothing changed',
  423: 'Read-only',
  429: 'Limit reached; see Retry-After',
  500: 'Internal error',
  503: 'Temporarily unavailable; see Retry-After',
};

/** A success response: a zod schema (JSON), or a described non-JSON reply. */
export type Success = z.ZodType | { description: string; content?: Record<string, { schema: z.ZodType }>; headers?: Record<string, unknown> };

export interface ResponseOptions {
  /** The route needs no API key (no 401 codes). */
  public?: boolean;
  /** The route reads a JSON body (adds 400, 413, 415). Defaults to true for POST/PUT/PATCH/DELETE callers via `write`. */
  body?: boolean;
  /** A change: adds WRITE_CODES (default: READ_CODES). */
  write?: boolean;
  /** Description of each success status, when more than the status text helps. */
  describe?: Record<number, string>;
}

type Surface = 'R' | 'A';

function build(surface: Surface, success: Record<number, Success>, codes: readonly ErrorCode[], opts: ResponseOptions) {
  const out: Record<number, unknown> = {};
  for (const [status, s] of Object.entries(success)) {
    const description = opts.describe?.[Number(status)] ?? STATUS_TEXT[Number(status)] ?? 'Success';
    if (s instanceof z.ZodType && s.type === 'null') out[Number(status)] = s;
    else if (s instanceof z.ZodType) out[Number(status)] = { description, content: { 'application/json': { schema: s } } };
    else out[Number(status)] = s;
  }
  const all = new Set<ErrorCode>([
    ...(opts.public ? [] : AUTH_CODES),
    ...COMMON_CODES,
    ...(opts.write ? WRITE_CODES : READ_CODES),
    ...(opts.body || opts.write ? BODY_CODES : []),
    ...codes,
  ]);
  // Surface A names a missing mailbox a missing bucket (src/http/render-error.ts).
  if (surface === 'A' && all.has('MAILBOX_NOT_FOUND')) {
    all.delete('MAILBOX_NOT_FOUND');
    all.add('BUCKET_NOT_FOUND');
  }
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of all) {
    const status = ERROR_CATALOGUE[code].status;
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  const envelope = surface === 'R' ? ErrorR : ErrorA;
  for (const [status, list] of [...byStatus].sort((a, b) => a[0] - b[0])) {
    out[status] = {
      description: `${STATUS_TEXT[status] ?? 'Error'}. Error codes: ${list.sort().map((c) => `\`${c}\``).join(', ')}.`,
      content: { 'application/json': { schema: envelope } },
    };
  }
  // Loosely typed on purpose: handlers are checked against the contract at run time in the
  // test suite (src/http/contract-check.ts); Fastify's reply typing would not add to that.
  return out as Record<number, any>;
}

/** Responses of a surface R (/v1) route. */
export const responsesR = (success: Record<number, Success>, codes: readonly ErrorCode[] = [], opts: ResponseOptions = {}) => build('R', success, codes, opts);
/** Responses of a surface A (/api/v1) route. */
export const responsesA = (success: Record<number, Success>, codes: readonly ErrorCode[] = [], opts: ResponseOptions = {}) => build('A', success, codes, opts);

/** A non-JSON success (file bytes, redirects), documented by description and content type. */
export function binary(description: string, contentType = '*/*'): Success {
  return { description, content: { [contentType]: { schema: z.string().meta({ format: 'binary' }) } } };
}
/** A reply without a body (`type: 'null'` keeps the content out of the document). */
export function redirect(description: string): Success {
  return z.null().meta({ description, headers: { location: { type: 'string', description: 'Where to go' } } });
}
export const noContent: Success = z.null().meta({ description: 'No content' });

/** The deleted object confirmation both surfaces use. */
export const Deleted = named('Deleted', z.object({ deleted: z.literal(true), id: z.string() }), 'A delete that happened.', { deleted: true, id: 'bkt_01J…' });
