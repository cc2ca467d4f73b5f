// The one error catalogue. Every error the service returns has a code here;
// the code decides the HTTP status. Clients branch on the code, never the message.
export const ERROR_CATALOGUE = {
  // generic request problems
  INVALID_ARGUMENT: { status: 422, message: 'A request field is invalid.' },
  MALFORMED_JSON: { status: 400, message: 'The request body is not valid JSON.' },
  UNSUPPORTED_MEDIA_TYPE: { status: 415, message: 'Send the request body as application/json.' },
  PAYLOAD_TOO_LARGE: { status: 413, message: 'The request body is too large.' },
  NOT_FOUND: { status: 404, message: 'No such route.' },
  METHOD_NOT_ALLOWED: { status: 405, message: 'Method not allowed on this route.' },
  RATE_LIMITED: { status: 429, message: 'Too many requests; retry after the given number of seconds.' },
  SERVICE_UNAVAILABLE: { status: 503, message: 'The service is temporarily unavailable; retry later.' },
  INTERNAL: { status: 500, message: 'Internal error. Quote the request id to support.' },
  // authentication and access
  UNAUTHENTICATED: { status: 401, message: 'Missing or invalid API key.' },
  API_KEY_EXPIRED: { status: 401, message: 'This API key has expired.' },
  API_KEY_REVOKED: { status: 401, message: 'This API key has been revoked.' },
  ACCOUNT_ACCESS_DENIED: { status: 403, message: 'This credential cannot use that account.' },
  PERMISSION_DENIED: { status: 403, message: 'This credential lacks the permission for this operation.' },
  AGENCY_OWNER_REQUIRED: { status: 403, message: 'Only an agency owner credential with client-account access can do this.' },
  ACCOUNT_CAPACITY_REACHED: { status: 403, message: 'The agency has reached its account or member capacity.' },
  ACCOUNT_READ_ONLY: { status: 423, message: 'The account is read-only; reads work, changes are refused.' },
  ACCOUNT_SUSPENDED: { status: 403, message: 'The account is suspended; changes are refused.' },
  REASON_CONTAINS_SECRET: { status: 422, message: 'The reason looks like it contains a credential; remove it.' },
  // accounts
  ACCOUNT_NOT_FOUND: { status: 404, message: 'Account not found.' },
} as const;

export type ErrorCode = keyof typeof ERROR_CATALOGUE;

export class AppError extends Error {
  readonly status: number;
  constructor(
    readonly code: ErrorCode,
    message?: string,
    readonly details: Record<string, unknown> = {},
    /** Extra top-level fields on the error object, e.g. `read_only: true`. */
    readonly extra: Record<string, unknown> = {},
  ) {
    super(message ?? ERROR_CATALOGUE[code].message);
    this.status = ERROR_CATALOGUE[code].status;
  }
}

export function invalidArgument(field: string, message: string, details: Record<string, unknown> = {}): AppError {
  return new AppError('INVALID_ARGUMENT', `${field}: ${message}`, { field, ...details });
}
