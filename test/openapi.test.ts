import { expect, it } from 'vitest';
import pino from 'pino';
import { Validator } from '@seriousme/openapi-schema-validator';
import { describeEachDatabase } from './harness.ts';
import { buildHttpServer } from '../src/http/server.ts';
import fs from 'node:fs';
import openapiTS, { astToString } from 'openapi-typescript';

// The machine-readable descriptions: valid OpenAPI 3.1, version 1.0.0, one per surface, and
// listing every route that surface serves (compared against the router itself).

const METHODS = new Set(['get', 'put', 'post', 'delete', 'patch', 'options', 'head', 'trace']);

/**
 * "METHOD /path/{param}" for every route Fastify's router holds, read from printRoutes'
 * tree (each line is a path segment under its parent, with the methods it serves).
 */
function routerRoutes(tree: string): Set<string> {
  const out = new Set<string>();
  const stack: string[] = [];
  for (const line of tree.split('\n')) {
    const m = /^((?:[│ ] {3})*)(?:├── |└── )(.+?)(?: \(([A-Z, ]+)\))?$/.exec(line);
    if (!m) continue;
    const depth = m[1]!.length / 4;
    const full = (depth > 0 ? stack[depth - 1]! : '') + m[2]!;
    stack[depth] = full;
    stack.length = depth + 1;
    for (const method of (m[3] ?? '').split(',').map((s) => s.trim()).filter(Boolean)) {
      if (method === 'HEAD') continue; // Fastify adds HEAD beside every GET
      out.add(`${method} ${full.replace(/:([A-Za-z0-9_]+)/g, '{$1}')}`);
    }
  }
  return out;
}

function documentedRoutes(doc: any): Set<string> {
  const out = new Set<string>();
  for (const [path, item] of Object.entries<any>(doc.paths ?? {})) {
    for (const method of Object.keys(item)) if (METHODS.has(method)) out.add(`${method.toUpperCase()} ${path}`);
  }
  return out;
}

describeEachDatabase('OpenAPI documents', (app) => {
  let routes: Set<string>;
  const allRoutes = async () => {
    if (routes) return routes;
    const server = await buildHttpServer(app().started.deps, pino({ level: 'silent' }));
    await server.ready();
    routes = routerRoutes(server.printRoutes({ commonPrefix: false }));
    await server.close();
    expect(routes.has('GET /v1/status')).toBe(true); // the parser understood the tree
    return routes;
  };

  for (const [prefix, title] of [
    ['/v1', 'surface R'],
    ['/api/v1', 'surface A'],
  ] as const) {
    it(`${prefix}/openapi.json is valid OpenAPI 3.1, version 1.0.0, and lists every ${title} route`, async () => {
      const res = await app().request('GET', `${prefix}/openapi.json`);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^application\/json/);
      const doc = res.body;
      expect(doc.openapi).toMatch(/^3\.1\./);
      expect(doc.info.version).toBe('1.0.0');

      const validator = new Validator();
      const result = await validator.validate(structuredClone(doc));
      expect(result.errors ?? [], JSON.stringify(result.errors, null, 1)?.slice(0, 2000)).toEqual([]);
      expect(result.valid).toBe(true);
      expect(validator.version).toMatch(/^3\.1/);

      const documented = documentedRoutes(doc);
      const served = [...(await allRoutes())].filter((r) => r.split(' ')[1]!.startsWith(`${prefix}/`) && !r.endsWith('/openapi.json'));
      // the other surface never leaks in (/v1 is not a prefix of /api/v1 and vice versa)
      for (const r of documented) expect(r.split(' ')[1]!.startsWith(`${prefix}/`), r).toBe(true);
      expect([...documented].sort()).toEqual(served.sort());

      // every operation has a summary, and keyed operations use the bearer scheme
      expect(doc.components?.securitySchemes?.bearer).toMatchObject({ type: 'http', scheme: 'bearer' });
      expect(doc.components?.securitySchemes?.oauth?.flows?.authorizationCode?.tokenUrl).toMatch(/\/oauth\/token$/);
      expect(doc.components?.securitySchemes?.oauth?.flows?.['x-deviceAuthorization']?.deviceAuthorizationUrl).toMatch(/\/oauth\/device_authorization$/);
      const operationIds = new Set<string>();
      const tagNames = new Set((doc.tags ?? []).map((t: any) => t.name));
      for (const [path, item] of Object.entries<any>(doc.paths)) {
        for (const [method, op] of Object.entries<any>(item)) {
          if (!METHODS.has(method)) continue;
          const where = `${method} ${path}`;
          expect(op.summary, where).toBeTruthy();
          // a stable, unique operationId and a described tag
          expect(op.operationId, where).toMatch(/^[a-z][A-Za-z]+$/);
          expect(operationIds.has(op.operationId), `${where}: duplicate operationId ${op.operationId}`).toBe(false);
          operationIds.add(op.operationId);
          expect(op.tags?.length, where).toBeGreaterThan(0);
          for (const t of op.tags) expect(tagNames.has(t), `${where}: tag ${t} is not described`).toBe(true);
          // at least one success, no placeholder responses, and every error is the surface's envelope with its codes listed
          const statuses = Object.keys(op.responses);
          expect(statuses.some((st) => /^2\d\d$/.test(st)), where).toBe(true);
          for (const st of statuses) {
            const r = op.responses[st];
            expect(r.description, `${where} ${st}`).not.toBe('Default Response');
            if (Number(st) >= 400) {
              expect(r.content['application/json'].schema.$ref, `${where} ${st}`).toBe(prefix === '/v1' ? '#/components/schemas/Error' : '#/components/schemas/ApiError');
              expect(r.description, `${where} ${st}`).toMatch(/Error codes: `[A-Z_]+`/);
            }
          }
          if (op.security?.length !== 0) expect(op.responses['401'], `${where} documents 401`).toBeTruthy();
        }
      }
      // the main objects are named, reusable components with examples
      const named = prefix === '/v1'
        ? ['Mailbox', 'MailboxEmail', 'EmailSummary', 'EmailDetail', 'MailboxFile', 'FileVersion', 'UploadSession', 'EmailDomain', 'EmailSettings', 'AccountIdentity', 'Status', 'Pagination', 'Error', 'Webhook', 'EmailReceivedEvent']
        : ['Bucket', 'Publication', 'MailboxFile', 'FileVersion', 'UploadSession', 'EmailDomain', 'AccountIdentity', 'BucketStatus', 'Pagination', 'ApiError'];
      for (const id of named) expect(doc.components.schemas[id], id).toBeTruthy();
      for (const id of ['Pagination', 'FileVersion', 'UploadSession', 'EmailDomain', prefix === '/v1' ? 'Mailbox' : 'Bucket']) expect(doc.components.schemas[id].examples?.length, id).toBe(1);
      // no component is left unreferenced or belongs to the other surface
      expect(Object.keys(doc.components.schemas).some((id) => id.endsWith('Input'))).toBe(false);
      if (prefix === '/v1') {
        const hook = doc.webhooks?.['email.received']?.post;
        expect(hook?.requestBody?.content?.['application/json']?.schema?.$ref).toBe('#/components/schemas/EmailReceivedEvent');
        expect(hook.parameters.map((p: any) => p.name)).toEqual(['webhook-id', 'webhook-timestamp', 'webhook-signature']);
      } else {
        expect(doc.webhooks).toBeUndefined();
      }
      expect(doc.servers?.[0]?.url).toMatch(/^https?:\/\//);
    });
  }

  // The SDK's types come from these documents (`npm run sdk:generate`): its committed copies and the
  // types generated from them must be what the service serves now, or the SDK describes another API.
  it('the SDK holds the documents the service serves, and types generated from them', async () => {
    for (const [prefix, name] of [
      ['/v1', 'surface-r'],
      ['/api/v1', 'surface-a'],
    ] as const) {
      // The copies are dumped from an app whose public URL is http://localhost:8080 (scripts/openapi-dump.ts).
      const served = (await app().request('GET', `${prefix}/openapi.json`)).body;
      const live = JSON.parse(JSON.stringify(served).replaceAll(new URL(served.servers[0].url).origin, 'http://localhost:8080'));
      const committed = JSON.parse(fs.readFileSync(new URL(`../packages/sdk/openapi/${name}.json`, import.meta.url), 'utf8'));
      expect(committed, `packages/sdk/openapi/${name}.json differs from ${prefix}/openapi.json: run \`npm run sdk:generate\``).toEqual(live);
      const types = fs.readFileSync(new URL(`../packages/sdk/src/generated/${name}.ts`, import.meta.url), 'utf8');
      expect(types.endsWith(astToString(await openapiTS(committed))), `packages/sdk/src/generated/${name}.ts is stale: run \`npm run sdk:generate\``).toBe(true);
    }
  });

  it('the documents need no key and do not list themselves', async () => {
    for (const prefix of ['/v1', '/api/v1']) {
      const res = await app().request('GET', `${prefix}/openapi.json`);
      expect(res.status).toBe(200);
      expect(Object.keys(res.body.paths)).not.toContain(`${prefix}/openapi.json`);
    }
  });

  it('known operations are described with their parameters', async () => {
    const r = (await app().request('GET', '/v1/openapi.json')).body;
    expect(r.paths['/v1/status']?.get).toBeTruthy();
    expect(r.paths['/v1/accounts']?.get).toBeTruthy();
    expect(r.paths['/v1/accounts']?.post?.requestBody).toBeTruthy();
    expect(r.paths['/v1/accounts/{account_id}']?.get?.parameters?.some((p: any) => p.name === 'account_id' && p.in === 'path')).toBe(true);
    expect(r.paths['/v1/account/limits']?.get?.parameters?.some((p: any) => p.name === 'account_id' && p.in === 'query')).toBe(true);
    expect(r.paths['/v1/accounts'].get.parameters.some((p: any) => p.name === 'limit')).toBe(true);
    const a = (await app().request('GET', '/api/v1/openapi.json')).body;
    expect(a.paths['/api/v1/status']?.get).toBeTruthy();
    expect(a.paths['/api/v1/accounts']?.post).toBeTruthy();
    // the no-key operation says so
    expect(a.paths['/api/v1/agent_auth/capabilities']?.get?.security).toEqual([]);
  });
});
