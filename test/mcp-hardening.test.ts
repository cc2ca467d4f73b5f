import http from 'node:http';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DATABASES, startTestApp, type TestApp } from './harness.ts';
import { mcpUrl } from './agent-helpers.ts';
import { SERVER_VERSION } from '../src/version.ts';

// DNS-rebinding protection on /mcp (Host and Origin must name this server) and the tools'
// behaviour hints, through real HTTP and the official MCP client.

const INIT = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'probe', version: '1' } } });

/** A raw POST to /mcp with exactly these Host and Origin headers (fetch cannot set Host). */
function post(app: TestApp, headers: Record<string, string>, method = 'POST'): Promise<{ status: number; body: string }> {
  const u = new URL(mcpUrl(app));
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: u.hostname, port: u.port, path: u.pathname, method, setHost: false, headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers } },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode!, body }));
      },
    );
    req.on('error', reject);
    req.end(method === 'POST' ? INIT : undefined);
  });
}

for (const kind of DATABASES) {
  describe(`MCP host and origin checks [${kind}]`, () => {
    let app: TestApp;
    let key: string;
    let port: string;
    beforeAll(async () => {
      app = await startTestApp(kind, { CUBBY_MCP_ALLOWED_HOSTS: 'mcp.example.test, proxy.example.test:8443' });
      key = (await app.user()).key;
      port = new URL(app.base).port;
    });
    afterAll(async () => app?.stop());

    it('refuses a re-pointed Host with 403 before authentication, with or without a token', async () => {
      const evil = await post(app, { host: `evil.example.com:${port}`, origin: `http://evil.example.com:${port}` });
      expect(evil.status).toBe(403);
      expect(JSON.parse(evil.body).code).toBe('MCP_HOST_NOT_ALLOWED');
      const evilAuthed = await post(app, { host: 'evil.example.com', origin: 'http://evil.example.com', authorization: `Bearer ${key}` });
      expect(evilAuthed.status).toBe(403);
      // The preflight is refused too, and a missing or malformed Host is never served.
      expect((await post(app, { host: 'evil.example.com', origin: 'http://evil.example.com' }, 'OPTIONS')).status).toBe(403);
      expect((await post(app, { host: 'not a host' })).status).toBe(403);
      // A loopback name on another port is another server.
      expect((await post(app, { host: `localhost:${Number(port) + 1}`, authorization: `Bearer ${key}` })).status).toBe(403);
    });

    it('serves loopback names on its own port and the configured hosts', async () => {
      for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, 'mcp.example.test', `mcp.example.test:${port}`, 'proxy.example.test:8443']) {
        const r = await post(app, { host, authorization: `Bearer ${key}` });
        expect(r.status, host).toBe(200);
        expect(r.body).toContain('"serverInfo"');
      }
      // A configured host:port entry pins the port.
      expect((await post(app, { host: 'proxy.example.test:9000', authorization: `Bearer ${key}` })).status).toBe(403);
      // Without a token an allowed host gets the usual 401 challenge, not a 403.
      expect((await post(app, { host: `127.0.0.1:${port}` })).status).toBe(401);
    });

    it('checks Origin when present: foreign origins refused, own, configured and loopback origins served', async () => {
      const host = `127.0.0.1:${port}`;
      const auth = `Bearer ${key}`;
      const refused = await post(app, { host, origin: 'https://evil.example.com', authorization: auth });
      expect(refused.status).toBe(403);
      expect(JSON.parse(refused.body).code).toBe('MCP_ORIGIN_NOT_ALLOWED');
      expect((await post(app, { host, origin: 'null', authorization: auth })).status).toBe(403);
      for (const origin of [app.base, 'https://mcp.example.test', 'http://localhost:6274']) {
        expect((await post(app, { host, origin, authorization: auth })).status, origin).toBe(200);
      }
    });

    it('the MCP client still connects; tools carry complete, truthful hints', async () => {
      const client = new Client({ name: 'cubby-test', version: '1.0.0' });
      await client.connect(new StreamableHTTPClientTransport(new URL(mcpUrl(app)), { requestInit: { headers: { authorization: `Bearer ${key}` } } }));
      try {
        expect(client.getServerVersion()).toMatchObject({ name: 'cubby', version: SERVER_VERSION });
        const { tools } = await client.listTools();
        const hints = Object.fromEntries(tools.map((t) => [t.name, t.annotations]));
        for (const t of tools) {
          // Every hint spelled out, so clients never fall back to the spec's defaults.
          expect(Object.keys(t.annotations ?? {}).sort(), t.name).toEqual(['destructiveHint', 'idempotentHint', 'openWorldHint', 'readOnlyHint', 'title']);
          if (t.annotations!.readOnlyHint) expect(t.annotations, t.name).toMatchObject({ destructiveHint: false, idempotentHint: true, openWorldHint: false });
        }
        for (const n of ['status', 'mailbox_list', 'mailbox_file_read', 'email_list', 'email_get', 'search', 'publication_status']) expect(hints[n]!.readOnlyHint, n).toBe(true);
        expect(hints.mailbox_delete).toMatchObject({ readOnlyHint: false, destructiveHint: true, idempotentHint: true });
        expect(hints.mailbox_webhook_delete).toMatchObject({ destructiveHint: true, idempotentHint: true });
        expect(hints.email_send).toMatchObject({ readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true });
        expect(hints.email_mark_read).toMatchObject({ destructiveHint: false, idempotentHint: true, openWorldHint: false });
        expect(hints.mailbox_file_write).toMatchObject({ readOnlyHint: false, destructiveHint: false, openWorldHint: false });
        expect(hints.bucket_publish).toMatchObject({ openWorldHint: true, destructiveHint: false });
        expect(hints.bucket_unpublish).toMatchObject({ destructiveHint: true, openWorldHint: true });
      } finally {
        await client.close();
      }
    });
  });
}

for (const kind of DATABASES) {
  describe(`MCP host checks behind a TLS-terminating proxy [${kind}]`, () => {
    let app: TestApp;
    let key: string;
    beforeAll(async () => {
      app = await startTestApp(kind, { CUBBY_PUBLIC_URL: 'https://cubby.example.test' });
      key = (await app.user()).key;
    });
    afterAll(async () => app?.stop());

    it("serves the public URL's host as the proxy forwards it over plain HTTP, and nothing else", async () => {
      const auth = `Bearer ${key}`;
      // A Host without a port names the client's default port (443 here), not this hop's.
      expect((await post(app, { host: 'cubby.example.test', origin: 'https://cubby.example.test', authorization: auth })).status).toBe(200);
      expect((await post(app, { host: 'cubby.example.test:443', authorization: auth })).status).toBe(200);
      expect((await post(app, { host: 'cubby.example.test:8443', authorization: auth })).status).toBe(403);
      expect((await post(app, { host: 'cubby.example.test', origin: 'http://cubby.example.test:8080', authorization: auth })).status).toBe(403);
      expect((await post(app, { host: 'evil.example.com', origin: 'https://evil.example.com', authorization: auth })).status).toBe(403);
      // Loopback on the bound port still works for local clients.
      expect((await post(app, { host: new URL(app.base).host, authorization: auth })).status).toBe(200);
    });
  });
}
