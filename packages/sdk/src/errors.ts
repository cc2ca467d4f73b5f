// Every failure the SDK reports is a CubbyError: the service's error code, the HTTP status,
// the details object and the request id to quote. Network failures have status 0.

export class CubbyError extends Error {
  override readonly name: string = 'CubbyError';
  /** The service's error code, e.g. `MAILBOX_NOT_FOUND`, `RATE_LIMITED`; `NETWORK_ERROR` when no answer came. */
  readonly code: string;
  /** HTTP status (0 when the request never got an answer). */
  readonly status: number;
  readonly details: Record<string, unknown>;
  /** The `x-request-id` of the answer: quote it when reporting a problem. */
  readonly requestId: string | null;
  /** Seconds the service asked to wait (Retry-After or `details.retry_after`), when it said. */
  readonly retryAfter: number | null;

  constructor(init: { code: string; status: number; message: string; details?: Record<string, unknown>; requestId?: string | null; retryAfter?: number | null; cause?: unknown }) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.code = init.code;
    this.status = init.status;
    this.details = init.details ?? {};
    this.requestId = init.requestId ?? null;
    this.retryAfter = init.retryAfter ?? null;
  }

  /** True for answers worth retrying later (network failures, 429, 500, 502, 503, 504). */
  get temporary(): boolean {
    return this.status === 0 || RETRIED_STATUSES.has(this.status);
  }
}

/**
 * Answers a request that is safe to repeat is retried on: rate limits (429), unavailability (503),
 * and faults that a repeat often does not meet again: a 500 (a database busy for a moment, say) and
 * a gateway's 502 and 504 in front of the service.
 */
export const RETRIED_STATUSES: ReadonlySet<number> = new Set([429, 500, 502, 503, 504]);

/** A webhook whose signature, timestamp or body does not check out. */
export class WebhookVerificationError extends Error {
  override readonly name = 'WebhookVerificationError';
}

/** Seconds from a Retry-After header (delta seconds or an HTTP date), or null. */
export function parseRetryAfter(value: string | null, now = Date.now()): number | null {
  if (!value) return null;
  if (/^\d+(\.\d+)?$/.test(value.trim())) return Number(value.trim());
  const at = Date.parse(value);
  return Number.isNaN(at) ? null : Math.max(0, (at - now) / 1000);
}

/** Builds the error for a non-2xx answer of either surface. */
export function errorFromResponse(status: number, headers: Headers, body: unknown, text: string): CubbyError {
  const requestId = headers.get('x-request-id');
  const envelope = (body && typeof body === 'object' ? (body as { error?: unknown }).error : undefined) as
    | { code?: string; message?: string; details?: Record<string, unknown>; request_id?: string }
    | undefined;
  const details = envelope?.details && typeof envelope.details === 'object' ? envelope.details : {};
  const fromDetails = typeof details.retry_after === 'number' ? details.retry_after : null;
  const retryAfter = parseRetryAfter(headers.get('retry-after')) ?? fromDetails;
  return new CubbyError({
    code: envelope?.code ?? (status === 404 ? 'NOT_FOUND' : `HTTP_${status}`),
    status,
    message: envelope?.message ?? (text.slice(0, 200) || `HTTP ${status}`),
    details,
    requestId: envelope?.request_id ?? requestId,
    retryAfter,
  });
}
