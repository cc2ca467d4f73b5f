// `npm run bench:site-analytics`: what counting costs the sites server per finished response, in
// nanoseconds (wall clock, and CPU time of the process): SiteAnalytics.countResponse() on real node:http request/response
// objects (an asset: requests, bytes and status only; a page view: also path, referrer host and
// the visitor hash, in the batch that runs after the event-loop turn, timed with the loop; one
// visitor here, so its hash is cached after the first view). The recorder runs as in the server; its database is never reached (no flush
// runs during the loop). The machine is shared: read the figures next to its load average.
// One JSON line on stdout.
import http from 'node:http';
import os from 'node:os';
import { SiteAnalytics } from '../src/sites/analytics/recorder.ts';
import { writeHead } from '../src/sites/server/serve-file.ts';
import type { AppDeps } from '../src/context.ts';
import { gitCommit, log, round } from './lib.ts';

const N = Number(process.env.N ?? 500_000);

/** One real finished GET per path, as the sites server answers them (its writeHead helper). */
async function finishedResponses(paths: string[]): Promise<[http.IncomingMessage, http.ServerResponse][]> {
  const pairs: [http.IncomingMessage, http.ServerResponse][] = [];
  const server = http.createServer((req, res) => {
    res.once('finish', () => pairs.push([req, res]));
    const page = req.url!.endsWith('.html');
    writeHead(res, 200, { 'x-content-type-options': 'nosniff', 'referrer-policy': 'strict-origin-when-cross-origin', 'cache-control': 'public, max-age=0, must-revalidate', 'content-type': page ? 'text/html; charset=utf-8' : 'application/octet-stream', etag: '"0123456789abcdef0123456789abcdef01234567"', 'content-length': '2' });
    res.end('ok');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  for (const path of paths) {
    await new Promise<void>((resolve) =>
      http.get({ port, path, headers: { host: 'bench.localhost', 'user-agent': 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36', referer: 'https://news.example.com/item?id=1' } }, (res) => res.resume().on('end', resolve)),
    );
  }
  await new Promise<void>((resolve) => server.close(() => resolve()));
  while (pairs.length < paths.length) await new Promise((r) => setImmediate(r));
  return pairs;
}

const deps = { now: () => new Date(), config: { trustProxyHops: 0, siteAnalytics: { flushMs: 3_600_000 } }, log: { error: (o: unknown) => log(String(o)) } } as unknown as AppDeps;
const analytics = new SiteAnalytics(deps, null);
// The day's salt as start() would load it (no database in this bench).
(analytics as unknown as { salts: Map<string, string> }).salts = new Map([[new Date().toISOString().slice(0, 10), 'bench-salt']]);
const site = { publicationId: 'pub_01JD2Q9K3M4N5P6Q7R8S9T0V1W' } as Parameters<SiteAnalytics['countResponse']>[2];

const [asset, page] = await finishedResponses(['/assets/10k.bin', '/index.html']);
const result: Record<string, number> = {};
// ONLY=asset or ONLY=page runs one kind (e.g. under callgrind, where two values of N give the
// instructions per response by difference).
for (const [name, [req, res]] of ([['asset_ns', asset!], ['page_view_ns', page!]] as const).filter(([n]) => !process.env.ONLY || n.startsWith(process.env.ONLY))) {
  for (let i = 0; i < N / 10; i++) analytics.countResponse(req, res, site);
  await new Promise((r) => setImmediate(r));
  const t0 = process.hrtime.bigint();
  const c0 = process.cpuUsage();
  for (let i = 0; i < N; i++) analytics.countResponse(req, res, site);
  // Page views are classified and hashed in a batch after the event-loop turn: timed too.
  await new Promise((r) => setImmediate(r));
  result[name] = round(Number(process.hrtime.bigint() - t0) / N, 0);
  // CPU time of the process (all threads): on a loaded machine the wall clock also counts waiting for a core.
  const c = process.cpuUsage(c0);
  result[name.replace('_ns', '_cpu_ns')] = round(((c.user + c.system) * 1000) / N, 0);
  log(`${name}: ${result[name]} ns per response (wall), ${result[name.replace('_ns', '_cpu_ns')]} ns CPU`);
}
process.stdout.write(`${JSON.stringify({ bench: 'site-analytics', at: new Date().toISOString(), node: process.version, cpus: os.cpus().length, load_average_1m: round(os.loadavg()[0]!, 1), commit: gitCommit(), n: N, ...result })}\n`);
