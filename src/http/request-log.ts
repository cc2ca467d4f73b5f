import type { FastifyReply, FastifyRequest } from 'fastify';
import type { AppDeps } from '../context.ts';

// One log line and one metrics sample per HTTP request, written when the response is done. The
// line names the route pattern (`/v1/mailboxes/:id`), never the URL: paths and query strings can
// carry secrets (sign-in links, tokens); headers and bodies are not logged either.

export function logRequest(deps: AppDeps, req: FastifyRequest, reply: FastifyReply): void {
  // Requests that matched no route share one label, so scanners cannot grow the metrics.
  const route = req.routeOptions.url ?? 'unmatched';
  const status = reply.statusCode;
  const ms = reply.elapsedTime;
  deps.metrics.httpRequests.inc({ method: req.method, route, status: String(status) });
  deps.metrics.httpDuration.observe({ method: req.method, route, status: String(status) }, ms / 1000);
  const credential = req.ctx?.credential;
  const line = {
    http: {
      method: req.method,
      route,
      status,
      ms: Math.round(ms * 10) / 10,
      request_id: req.id,
      account_id: credential?.defaultAccountId ?? null,
      api_key_id: credential?.keyId || null,
      ...(req.errorCode ? { error_code: req.errorCode } : {}),
    },
  };
  if (status >= 500) req.log.error(line, 'request');
  else req.log.info(line, 'request');
}
