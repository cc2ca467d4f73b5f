import { describe, expect, it } from 'vitest';
import openapiTS, { astToString } from 'openapi-typescript';
import { describeEachDatabase } from './harness.ts';
import { createContractCheck } from '../src/http/contract-check.ts';

// The contract is usable by client generators: openapi-typescript yields a typed body for every
// documented response of every operation. And the reply check the whole suite runs with
// (src/http/contract-check.ts) really fails on each kind of drift.

const METHODS = new Set(['get', 'put', 'post', 'delete', 'patch']);

/** The text of one operation's entry in the generated `operations` interface. */
function operationBlock(source: string, operationId: string): string {
  const ops = source.slice(source.indexOf('export interface operations {'));
  const start = ops.indexOf(`\n    ${operationId}: {`);
  if (start < 0) return '';
  const end = ops.indexOf('\n    };', start);
  return ops.slice(start, end);
}

describeEachDatabase(
  'openapi-typescript on the served documents',
  (app) => {
    for (const prefix of ['/v1', '/api/v1']) {
      it(`${prefix}: every documented response of every operation has a typed body`, async () => {
        const doc = (await app().request('GET', `${prefix}/openapi.json`)).body;
        const source = astToString(await openapiTS(doc));
        let checked = 0;
        for (const [path, item] of Object.entries<any>(doc.paths)) {
          for (const [method, op] of Object.entries<any>(item)) {
            if (!METHODS.has(method)) continue;
            const block = operationBlock(source, op.operationId);
            expect(block, `${method} ${path} (${op.operationId}) is in the generated operations`).not.toBe('');
            // Every documented status appears with content (no `content?: never`).
            expect(block, `${method} ${path}: a response without a typed body`).not.toContain('content?: never');
            for (const status of Object.keys(op.responses)) expect(block, `${op.operationId} ${status}`).toMatch(new RegExp(`\\n\\s+${status}: \\{`));
            checked++;
          }
        }
        expect(checked).toBeGreaterThan(prefix === '/v1' ? 50 : 30);
        // The main objects are generated as named types the responses refer to.
        expect(source).toMatch(prefix === '/v1' ? /Mailbox: \{/ : /Bucket: \{/);
        expect(source).toContain('components["schemas"]["Pagination"]');
      });
    }
  },
  {},
  { only: ['sqlite'] },
);

/** A minimal document in the shape @fastify/swagger emits, for exercising the check directly. */
const DOC = {
  components: {
    schemas: {
      Thing: { type: 'object', properties: { id: { type: 'string' }, size: { type: 'integer' } }, required: ['id', 'size'], additionalProperties: false },
      Error: { type: 'object', properties: { success: { const: false }, error: { type: 'object', properties: { code: { type: 'string' } }, required: ['code'] } }, required: ['success', 'error'] },
    },
  },
  paths: {
    '/v1/undeclared': { get: { responses: { 200: { description: 'Default Response' } } } },
    '/v1/things/{thing_id}': {
      get: {
        responses: {
          200: { description: 'OK', content: { 'application/json': { schema: { type: 'object', properties: { success: { const: true }, data: { $ref: '#/components/schemas/Thing' } }, required: ['success', 'data'] } } } },
          404: { description: 'Not found. Error codes: `THING_NOT_FOUND`.', content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } },
        },
      },
    },
  },
};

function run(status: number, body: unknown, opts: { url?: string; method?: string } = {}) {
  const reported: string[] = [];
  const check = createContractCheck(() => DOC, (m) => reported.push(m));
  const req = { routeOptions: { url: opts.url ?? '/v1/things/:thing_id', schema: {} }, method: opts.method ?? 'GET' } as any;
  const reply = { statusCode: status, getHeader: (h: string) => (h === 'content-type' ? 'application/json; charset=utf-8' : undefined) } as any;
  const result = check(req, reply, JSON.stringify(body));
  expect(reported).toEqual(result ? [result] : []);
  return result;
}

describe('the reply check', () => {
  it('accepts a reply that matches its documented status and schema', () => {
    expect(run(200, { success: true, data: { id: 't1', size: 3 } })).toBeNull();
    expect(run(404, { success: false, error: { code: 'THING_NOT_FOUND' } })).toBeNull();
  });

  it('names the route, status, field and schema path of a body that does not match', () => {
    expect(run(200, { success: true, data: { id: 't1', size: 'big' } })).toBe(
      'API contract: GET /v1/things/{thing_id} → 200: the body does not match the documented schema: /data/size must be integer [schema #/components/schemas/Thing/properties/size/type]',
    );
  });

  it('reports an undeclared field (it would otherwise go unnoticed by clients)', () => {
    expect(run(200, { success: true, data: { id: 't1', size: 3, secret: 'x' } })).toContain("/data must NOT have additional properties 'secret'");
  });

  it('reports an undocumented status, and an error code not listed for its status', () => {
    expect(run(409, { success: false, error: { code: 'THING_BUSY' } })).toBe(
      "API contract: GET /v1/things/{thing_id} → 409: status 409 (THING_BUSY) is not documented (documented: 200, 404); add it to the route's responses",
    );
    expect(run(404, { success: false, error: { code: 'MAILBOX_NOT_FOUND' } })).toContain('error code MAILBOX_NOT_FOUND is not listed for status 404');
  });

  it('reports a route that is missing from the document', () => {
    expect(run(200, {}, { url: '/v1/widgets' })).toContain('GET /v1/widgets → 200: the route is not in the OpenAPI document');
    expect(run(200, {}, { method: 'DELETE' })).toContain('DELETE /v1/things/{thing_id} → 200: the route is not in the OpenAPI document');
  });

  it('names a route that declares no response schemas (a new route added without them)', () => {
    expect(run(200, { success: true }, { url: '/v1/undeclared' })).toBe(
      'API contract: GET /v1/undeclared → 200: the route declares no response schemas: add operationId and response: responsesR(...)/responsesA(...) to its schema (docs/api-contract.md)',
    );
  });

  it('leaves pages, OAuth and unrouted requests alone', () => {
    expect(run(200, {}, { url: '/oauth/token' })).toBeNull();
    expect(run(404, {}, { url: '' })).toBeNull();
  });
});
