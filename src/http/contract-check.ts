import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { surfaceOf } from './render-error.ts';

// Test-only (AppOptions.checkResponses): every reply of a /v1 or /api/v1 route is checked
// against the OpenAPI document generated from the route schemas. An undocumented status, a
// body that does not match the documented schema, or a route missing from the document is a
// contract violation, reported with the route, the status and the failing schema path. The
// test harness fails the test that received it. Loaded lazily, so Ajv stays a dev dependency.

const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => void;

export type ViolationSink = (message: string) => void;

export function createContractCheck(getDocument: () => any, report: ViolationSink) {
  let doc: any;
  let ajv: Ajv2020;
  const validators = new Map<string, ValidateFunction>();

  const init = () => {
    doc = getDocument();
    ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: true });
    addFormats(ajv);
    ajv.addFormat('binary', true);
    ajv.addSchema({ $id: 'cubby:openapi', components: doc.components, paths: doc.paths });
  };

  const pointer = (parts: string[]) => parts.map((p) => p.replace(/~/g, '~0').replace(/\//g, '~1')).join('/');

  return function check(req: FastifyRequest, reply: FastifyReply, payload: unknown): string | null {
    const route = req.routeOptions.url;
    // Unrouted requests (404 handler), web pages, OAuth, blobs and the documents themselves are not part of the API contract.
    if (!route || surfaceOf(route) === 'web' || req.routeOptions.schema?.hide || req.method === 'HEAD' || req.method === 'OPTIONS') return null;
    if (!doc) init();
    const path = route.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
    const method = req.method.toLowerCase();
    const status = String(reply.statusCode);
    const where = `${req.method} ${path} → ${status}`;
    const fail = (why: string) => {
      const message = `API contract: ${where}: ${why}`;
      report(message);
      return message;
    };
    const op = doc.paths?.[path]?.[method];
    if (!op) return fail('the route is not in the OpenAPI document (declare its schema; see docs/api-contract.md)');
    // @fastify/swagger's placeholder for a route that declares no `response` at all.
    const responses = Object.values<any>(op.responses ?? {});
    if (responses.length === 1 && responses[0]?.description === 'Default Response' && !responses[0]?.content) {
      return fail("the route declares no response schemas: add operationId and response: responsesR(...)/responsesA(...) to its schema (docs/api-contract.md)");
    }
    const documented = op.responses?.[status];
    const errorCode = errorCodeOf(payload);
    if (!documented) {
      const codes = Object.keys(op.responses ?? {}).join(', ');
      return fail(`status ${status}${errorCode ? ` (${errorCode})` : ''} is not documented (documented: ${codes}); add it to the route's responses`);
    }
    if (errorCode && typeof documented.description === 'string' && !documented.description.includes(`\`${errorCode}\``)) {
      return fail(`error code ${errorCode} is not listed for status ${status}; add it to the route's error codes`);
    }
    const contentType = String(reply.getHeader('content-type') ?? '');
    const jsonSchema = documented.content?.['application/json']?.schema;
    if (!jsonSchema) {
      if (/json/.test(contentType) && typeof payload === 'string' && payload.length > 0 && !documented.content) {
        return fail('answered a JSON body where the document says there is none');
      }
      return null;
    }
    if (!/json/.test(contentType)) return null; // a documented alternative (bytes, HTML) is not checked here
    if (typeof payload !== 'string') return null;
    let body: unknown;
    try {
      body = payload === '' ? undefined : JSON.parse(payload);
    } catch {
      return fail('the body is not JSON');
    }
    const key = `${path} ${method} ${status}`;
    let validate = validators.get(key);
    if (!validate) {
      const ref = `cubby:openapi#/${pointer(['paths', path, method, 'responses', status, 'content', 'application/json', 'schema'])}`;
      validate = ajv.compile({ $ref: ref });
      validators.set(key, validate);
    }
    if (validate(body)) return null;
    const errors = (validate.errors ?? [])
      .slice(0, 5)
      .map((e) => `${e.instancePath || '(body)'} ${e.message}${e.params && 'additionalProperty' in e.params ? ` '${e.params.additionalProperty}'` : ''} [schema ${e.schemaPath}]`)
      .join('; ');
    return fail(`the body does not match the documented schema: ${errors}`);
  };
}

function errorCodeOf(payload: unknown): string | null {
  if (typeof payload !== 'string' || !payload.startsWith('{')) return null;
  try {
    const body = JSON.parse(payload);
    const code = body?.error?.code;
    return typeof code === 'string' && (body.success === false || body.error.request_id) ? code : null;
  } catch {
    return null;
  }
}
