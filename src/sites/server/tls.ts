import https from 'node:https';
import tls from 'node:tls';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AppDeps } from '../../context.ts';
import { certificateFor } from '../domains/acme.ts';
import { onSitesChanged } from '../changes.ts';

// The sites server's TLS listener (CUBBY_SITES_TLS_PORT, only with CUBBY_ACME_DIRECTORY): the
// certificate is chosen by SNI from the verified domains' certificates, kept in memory for a
// minute (a renewal elsewhere shows within it; one here at once). Unknown names get no handshake.

const TTL_MS = 60_000;
const MAX_CONTEXTS = 10_000;

export function createTlsSitesServer(deps: AppDeps, handler: (req: IncomingMessage, res: ServerResponse) => void): https.Server {
  const contexts = new Map<string, { ctx: tls.SecureContext | null; at: number }>();
  const unsubscribe = onSitesChanged(deps.db, () => contexts.clear());
  const SNICallback = (servername: string, cb: (err: Error | null, ctx?: tls.SecureContext) => void) => {
    const name = servername.toLowerCase().replace(/\.$/, '');
    const hit = contexts.get(name);
    const done = (ctx: tls.SecureContext | null) => (ctx ? cb(null, ctx) : cb(new Error(`no certificate for ${name}`)));
    if (hit && Date.now() - hit.at < TTL_MS) return done(hit.ctx);
    certificateFor(deps, name).then(
      (pair) => {
        const ctx = pair ? tls.createSecureContext(pair) : null;
        if (contexts.size >= MAX_CONTEXTS) contexts.clear();
        contexts.set(name, { ctx, at: Date.now() });
        done(ctx);
      },
      (err) => cb(err as Error),
    );
  };
  const server = https.createServer({ SNICallback, requestTimeout: 30_000, headersTimeout: 20_000, maxHeaderSize: 16 * 1024 }, handler);
  server.keepAliveTimeout = 5000;
  server.once('close', unsubscribe);
  return server;
}
