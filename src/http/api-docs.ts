import fs from 'node:fs';
import { createRequire } from 'node:module';
import type { FastifyInstance } from 'fastify';

// The API reference at /docs/api: Redoc's standalone bundle, served from the installed npm
// package (no CDN), rendering /v1/openapi.json (surface R) or, with ?surface=a,
// /api/v1/openapi.json (surface A). The page is static; the documents are fetched same-origin.

const require = createRequire(import.meta.url);
const BUNDLE = require.resolve('redoc/bundles/redoc.standalone.js');

const SURFACES = {
  r: { title: 'Surface R (/v1): mailboxes', spec: '/v1/openapi.json' },
  a: { title: 'Surface A (/api/v1): buckets', spec: '/api/v1/openapi.json' },
} as const;

function page(surface: keyof typeof SURFACES): string {
  const nav = (Object.keys(SURFACES) as Array<keyof typeof SURFACES>)
    .map((k) => (k === surface ? `<strong aria-current="page">${SURFACES[k].title}</strong>` : `<a href="/docs/api?surface=${k}">${SURFACES[k].title}</a>`))
    .join(' · ');
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Cubby API reference — ${SURFACES[surface].title}</title>
<style>
  body { margin: 0; font-family: system-ui, sans-serif; }
  header { padding: 0.6rem 1rem; border-bottom: 1px solid #ddd; background: #fafafa; }
  header a { color: #1a5fb4; }
</style>
</head>
<body>
<header><nav aria-label="API surfaces">Cubby API reference: ${nav} · <a href="${SURFACES[surface].spec}">OpenAPI JSON</a></nav></header>
<main><redoc spec-url="${SURFACES[surface].spec}" hide-download-button="false" path-in-middle-panel="true"></redoc></main>
<script src="/docs/api/redoc.standalone.js"></script>
</body>
</html>`;
}

export function registerApiDocs(app: FastifyInstance) {
  app.get('/docs/api', { schema: { hide: true }, config: { auth: false } }, async (req, reply) => {
    const q = (req.query as { surface?: string }).surface?.toLowerCase();
    const surface = q === 'a' ? 'a' : 'r';
    return reply
      .type('text/html; charset=utf-8')
      .header('cache-control', 'no-cache')
      .header('x-content-type-options', 'nosniff')
      .header('referrer-policy', 'no-referrer')
      // Redoc renders with inline styles and a blob: web worker for search.
      .header('content-security-policy', "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; worker-src 'self' blob:; font-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'")
      .send(page(surface));
  });
  app.get('/docs/api/redoc.standalone.js', { schema: { hide: true }, config: { auth: false } }, async (_req, reply) => {
    return reply.type('text/javascript; charset=utf-8').header('cache-control', 'public, max-age=86400').send(fs.createReadStream(BUNDLE));
  });
}
