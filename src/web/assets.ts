import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import type { FastifyInstance } from 'fastify';

// The dashboard's stylesheet and script, served from our own origin so that the pages' CSP can
// be `'self'` for both (no inline code, no CDN). Read once at start; the URL carries a hash of
// the content, so browsers may cache a file for a year and a new release is fetched at once.

const JS = 'text/javascript; charset=utf-8';
const CSS = 'text/css; charset=utf-8';
// name → type and file; vendored ones come from their npm package (pinned in package-lock.json).
const require = createRequire(import.meta.url);
const FILES = {
  'app.css': { type: CSS, file: new URL('./assets/app.css', import.meta.url) },
  'app.js': { type: JS, file: new URL('./assets/app.js', import.meta.url) },
  // The site page's chart: uPlot (MIT, ~50 kB) and our script that draws it from the page's table.
  'uplot.js': { type: JS, file: require.resolve('uplot/dist/uPlot.iife.min.js') },
  'uplot.css': { type: CSS, file: require.resolve('uplot/dist/uPlot.min.css') },
  'site-chart.js': { type: JS, file: new URL('./assets/site-chart.js', import.meta.url) },
} as const;
export type AssetName = keyof typeof FILES;

const ASSETS = new Map<string, { body: Buffer; type: string; version: string }>(
  (Object.keys(FILES) as AssetName[]).map((name) => {
    const body = fs.readFileSync(FILES[name].file);
    return [name, { body, type: FILES[name].type, version: createHash('sha256').update(body).digest('hex').slice(0, 12) }];
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
