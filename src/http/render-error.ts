import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { hasZodFastifySchemaValidationErrors } from 'fastify-type-provider-zod';
import { AppError } from '../errors.ts';
import { CLIENT_VERSION } from '../version.ts';

export type Surface = 'R' | 'A' | 'web';

export function surfaceOf(url: string): Surface {
  if (url === '/api/v1' || url.startsWith('/api/')) return 'A';
  if (url === '/v1' || url.startsWith('/v1/') || url.startsWith('/v1?')) return 'R';
  return 'web';
}

/** Turns anything thrown into an AppError with the catalogue's status. */
export function toAppError(err: unknown): AppError {
  if (err instanceof AppError) return err;
  const e = err as FastifyError & { validationContext?: string };
  if (hasZodFastifySchemaValidationErrors(e)) {
    const where = e.validationContext ?? 'body';
    const issues = e.validation.map((v) => {
      const params = v.params as { keys?: string[] };
      const base = v.instancePath.replace(/^\//, '').replace(/\//g, '.');
      // Unknown keys are reported on the enclosing object; name the key itself.
      const unknown = params?.keys?.length ? params.keys[0] : undefined;
      const field = unknown ? [base, unknown].filter(Boolean).join('.') : base || where;
      return { field, message: unknown ? 'is not a known field' : (v.message ?? 'is invalid'), location: where };
    });
    const first = issues[0]!;
    return new AppError('INVALID_ARGUMENT', `${first.field}: ${first.message}`, { field: first.field, location: where, issues });
  }
  switch (e?.code) {
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new AppError('UNSUPPORTED_MEDIA_TYPE');
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new AppError('PAYLOAD_TOO_LARGE');
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return new AppError('MALFORMED_JSON');
    // A path with broken percent-encoding names no route (reaches here through Fastify's frameworkErrors).
    case 'FST_ERR_BAD_URL':
      return new AppError('NOT_FOUND', 'The request path is not a valid URL path.');
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new AppError('INVALID_ARGUMENT', 'Content-Length does not match the body.', { field: 'content-length' });
  }
  if (e?.statusCode === 429) return new AppError('RATE_LIMITED');
  if (e?.statusCode === 404) return new AppError('NOT_FOUND');
  return new AppError('INTERNAL');
}

export function errorBody(surface: Surface, err: AppError, requestId: string, docsBase: string): unknown {
  const details = { ...err.details };
  if (surface === 'A') {
    return {
      error: { message: err.message, code: err.code, request_id: requestId, docs_url: `${docsBase}/docs/errors#${err.code}`, details, ...err.extra },
    };
  }
  return { success: false, error: { code: err.code, message: err.message, details, request_id: requestId, ...err.extra } };
}

export function sendError(req: FastifyRequest, reply: FastifyReply, thrown: unknown, docsBase: string, brands: readonly string[] = []): FastifyReply {
  let err = toAppError(thrown);
  // One stored object, two names: surface A calls a missing mailbox a missing bucket.
  if (err.code === 'MAILBOX_NOT_FOUND' && surfaceOf(req.url) === 'A') err = new AppError('BUCKET_NOT_FOUND', undefined, err.details);
  if (err.code === 'INTERNAL') req.log.error({ err: thrown, request_id: req.id }, 'unhandled error');
  req.errorCode = err.code;
  // Also set here (not only in onRequest) so that errors raised before the hooks ran,
  // such as Fastify's frameworkErrors, still carry them.
  const surface = surfaceOf(req.url);
  reply.header('x-request-id', req.id);
  if (surface === 'A') clientVersionHeaders(reply, brands);
  const retryAfter = err.details.retry_after;
  if ((err.status === 429 || err.status === 503) && typeof retryAfter === 'number') reply.header('retry-after', String(retryAfter));
  return reply.code(err.status).type('application/json; charset=utf-8').send(errorBody(surface, err, req.id, docsBase));
}

/** Surface A's client-version header, under X-Service-, X-Cubby- and X-<Brand>- for each CUBBY_COMPAT_BRANDS word. */
export function clientVersionHeaders(reply: FastifyReply, brands: readonly string[]): void {
  reply.header('x-service-client-version', CLIENT_VERSION);
  reply.header('x-cubby-client-version', CLIENT_VERSION);
  for (const brand of brands) reply.header(`x-${brand}-client-version`, CLIENT_VERSION);
}
