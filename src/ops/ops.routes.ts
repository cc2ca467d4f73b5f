import { timingSafeEqual } from 'node:crypto';
import { isIP } from 'node:net';
import { z } from 'zod';
import type { FastifyRequest } from 'fastify';
import type { AppDeps } from '../context.ts';
import { AppError } from '../errors.ts';
import { sendError } from '../http/render-error.ts';
import type { ZApp } from '../http/server.ts';
import { checkReadiness } from './readiness.ts';

// Routes for operators and their tools, outside the API surfaces: liveness, readiness and
// Prometheus metrics. See docs/operations.md.

const ROUTE = { hide: true } as const;

const errorBody = z.object({ success: z.literal(false), error: z.object({ code: z.string(), message: z.string(), details: z.record(z.string(), z.unknown()), request_id: z.string() }).loose() }).describe('Error');
const check = z.object({ ok: z.boolean(), error: z.string().optional() });
const readiness = z.object({
  status: z.enum(['ready', 'not_ready']),
  /** The parts that failed, e.g. ["database"]; empty when ready. */
  failing: z.array(z.enum(['database', 'blob_store', 'migrations'])),
  checks: z.object({ database: check, blob_store: check, migrations: check }),
});

export function registerOpsRoutes(app: ZApp, deps: AppDeps): void {
  app.get('/healthz', { schema: { ...ROUTE, response: { 200: z.object({ status: z.literal('ok') }) } }, config: { auth: false } }, async () => ({ status: 'ok' as const }));

  app.get('/readyz', { schema: { ...ROUTE, response: { 200: readiness, 503: readiness } }, config: { auth: false } }, async (_req, reply) => {
    const r = await checkReadiness(deps);
    return reply.code(r.status === 'ready' ? 200 : 503).header('cache-control', 'no-store').send(r);
  });

  app.get('/metrics', { schema: { ...ROUTE, response: { 200: z.string(), 401: errorBody, 403: errorBody } }, config: { auth: false } }, async (req, reply) => {
    const refusal = metricsRefusal(req, deps.config.metricsToken);
    if (refusal) return sendError(req, reply, refusal, deps.publicUrl());
    const text = await deps.metrics.registry.metrics();
    return reply.header('content-type', deps.metrics.registry.contentType).header('cache-control', 'no-store').send(text);
  });
}

/**
 * With CUBBY_METRICS_TOKEN, a scraper presents it as a bearer token. Without one, only a client
 * connected directly over loopback may read metrics: a request that came through a proxy (it
 * carries X-Forwarded-For or Forwarded) is refused even from 127.0.0.1, since a reverse proxy on
 * the same host would otherwise hand the metrics to anyone.
 */
function metricsRefusal(req: FastifyRequest, token: string | undefined): AppError | null {
  if (token) {
    const given = req.headers.authorization?.match(/^Bearer\s+(\S+)\s*$/i)?.[1] ?? '';
    const a = Buffer.from(given);
    const b = Buffer.from(token);
    return a.length === b.length && timingSafeEqual(a, b) ? null : new AppError('UNAUTHENTICATED', 'GET /metrics needs Authorization: Bearer <CUBBY_METRICS_TOKEN>.');
  }
  const proxied = req.headers['x-forwarded-for'] !== undefined || req.headers.forwarded !== undefined;
  if (!proxied && isLoopback(req.socket.remoteAddress)) return null;
  return new AppError('PERMISSION_DENIED', 'Metrics are served to loopback clients only; set CUBBY_METRICS_TOKEN to scrape from elsewhere.');
}

function isLoopback(address: string | undefined): boolean {
  const ip = (address ?? '').replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/i, '');
  if (isIP(ip) === 4) return ip.startsWith('127.');
  return ip === '::1';
}
