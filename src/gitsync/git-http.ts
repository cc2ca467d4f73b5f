import https from 'node:https';
import net from 'node:net';
import tls from 'node:tls';
import type { GitHttpRequest, GitHttpResponse, HttpClient } from 'isomorphic-git';
import { resolveTarget, type SafeFetchError } from '../net/safe-fetch.ts';
import type { HostResolver } from '../net/resolve.ts';
import { GitSyncError } from './errors.ts';

// isomorphic-git's HTTP transport, with the same rules as outbound webhooks (src/net): HTTPS only,
// every address of the host checked before connecting and the connection pinned to the checked
// address (so DNS rebinding cannot swap in a private one), no redirects, one deadline for the
// whole sync, and a cap on the bytes downloaded (the pack is the repository's size on the wire).

export interface GitHttpOptions {
  /** The repository URL: every request must stay on its origin. */
  origin: string;
  token: string | null;
  resolver: HostResolver;
  allowPrivate: boolean;
  extraCa: string[];
  maxBytes: number;
  deadline: number;
}

export function gitHttpClient(opts: GitHttpOptions): HttpClient & { received: number } {
  const client = {
    received: 0,
    async request(req: GitHttpRequest): Promise<GitHttpResponse> {
      const url = new URL(req.url);
      if (url.origin !== opts.origin || url.protocol !== 'https:') throw new GitSyncError('INVALID_GIT_REPOSITORY_URL', `The git client was sent to ${url.origin}; only ${opts.origin} is allowed.`);
      let target: { address: string; family: 4 | 6 };
      try {
        [target] = (await resolveTarget(url, { resolver: opts.resolver, allowPrivate: opts.allowPrivate })) as [{ address: string; family: 4 | 6 }];
      } catch (err) {
        const e = err as SafeFetchError;
        if (e.kind === 'blocked_address') throw new GitSyncError('INVALID_GIT_REPOSITORY_URL', `repository_url: ${e.message}`);
        throw new GitSyncError('GIT_REPOSITORY_UNREACHABLE', e.message);
      }
      const body: Buffer[] = [];
      if (req.body) for await (const chunk of req.body) body.push(Buffer.from(chunk));
      const headers: Record<string, string> = { ...req.headers, 'user-agent': 'Cubby-git-sync' };
      // Basic auth with the token as password: GitHub, Gitea/Forgejo and GitLab all accept it.
      if (opts.token) headers.authorization = `Basic ${Buffer.from(`x-access-token:${opts.token}`).toString('base64')}`;
      if (body.length) headers['content-length'] = String(body.reduce((n, b) => n + b.length, 0));
      const remaining = opts.deadline - Date.now();
      if (remaining <= 0) throw new GitSyncError('GIT_REPOSITORY_UNREACHABLE', 'The git host did not finish in time.');
      const res = await new Promise<import('node:http').IncomingMessage>((resolve, reject) => {
        const r = https.request({
          method: req.method ?? 'GET',
          host: url.hostname.replace(/^\[|\]$/g, ''),
          servername: net.isIP(url.hostname.replace(/^\[|\]$/g, '')) ? undefined : url.hostname,
          port: Number(url.port || 443),
          path: `${url.pathname}${url.search}`,
          headers: { host: url.host, ...headers },
          lookup: ((_h: string, o: { all?: boolean }, cb: (...a: unknown[]) => void) => (o?.all ? cb(null, [target]) : cb(null, target.address, target.family))) as never,
          // Extra CAs are added to Node's roots, never instead of them; verification stays on.
          ca: opts.extraCa.length ? [...tls.rootCertificates, ...opts.extraCa] : undefined,
          agent: false,
          timeout: remaining,
        });
        r.on('timeout', () => r.destroy(new GitSyncError('GIT_REPOSITORY_UNREACHABLE', 'The git host did not answer in time.')));
        r.on('error', (err) => reject(err instanceof GitSyncError ? err : new GitSyncError('GIT_REPOSITORY_UNREACHABLE', `Could not reach the git host (${(err as NodeJS.ErrnoException).code ?? err.message}).`)));
        r.on('response', resolve);
        r.end(body.length ? Buffer.concat(body) : undefined);
      });
      const timer = setTimeout(() => res.destroy(new GitSyncError('GIT_REPOSITORY_UNREACHABLE', 'The git host did not finish in time.')), Math.max(0, opts.deadline - Date.now()));
      const counted = async function* (): AsyncGenerator<Uint8Array> {
        try {
          for await (const chunk of res) {
            client.received += (chunk as Buffer).length;
            if (client.received > opts.maxBytes) {
              res.destroy();
              throw new GitSyncError('GIT_REPOSITORY_TOO_LARGE', `The repository download passed ${opts.maxBytes} bytes.`, { max_bytes: opts.maxBytes });
            }
            yield chunk as Buffer;
          }
        } finally {
          clearTimeout(timer);
        }
      };
      const outHeaders: Record<string, string> = {};
      for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) outHeaders[k] = Array.isArray(v) ? v.join(', ') : v;
      return { url: req.url, method: req.method, statusCode: res.statusCode ?? 0, statusMessage: res.statusMessage ?? '', headers: outHeaders, body: counted() };
    },
  };
  return client;
}
