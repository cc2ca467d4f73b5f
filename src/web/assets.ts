import { createHash } from 'node:crypto';
import fs from 'node:fs';
import type { FastifyInstance } from 'fastify';

// The dashboard's stylesheet and script, served from our own origin so that the pages' CSP can
// be `'self'` for both (no inline code, no CDN). Read once at start; the URL carries a hash of
// the content, so browsers may cache a file for a year and a new release is fetched at once.

const TYPES = { 'app.css': 'text/css; charset=utf-8', 'app.js': 'text/javascript; charset=utf-8' } as const;
type AssetName = keyof typeof TYPES;

const ASSETS = new Map<string, { body: Buffer; type: string; version: string }>(
  (Object.keys(TYPES) as AssetName[]).map((name) => {
    const body = fs.readFileSync(new URL(`./assets/${name}`, import.meta.url));
    return [name, { body, type: TYPES[name], version: createHash('sha256').update(body).digest('hex').slice(0, 12) }];
  }),
);

export function assetUrl(name: AssetName): string {
  return `/assets/${name}?v=${ASSETS.get(name)!.version}`;
}

export function registerAssets(web: FastifyInstance): void {
  web.get<{ Params: { name: string } }>('/assets/:name', { schema: { hide: true }, config: { auth: false } }, async (req, reply) => {
    const asset = ASSETS.get(req.params.name);
    if (!asset) return reply.callNotFound();
    return reply
      .header('content-type', asset.type)
      .header('cache-control', 'public, max-age=31536000, immutable')
      .header('x-content-type-options', 'nosniff')
      .send(asset.body);
  });
}
