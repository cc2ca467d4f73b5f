import { startTestApp } from './test/harness.ts';
const app = await startTestApp('sqlite');
for (const p of ['/v1', '/api/v1']) {
  const r = await app.request('GET', `${p}/openapi.json`);
  const doc = r.body;
  const ids = new Map<string, string>();
  for (const [path, item] of Object.entries<any>(doc.paths)) for (const [m, op] of Object.entries<any>(item)) {
    if (!op.operationId) console.log('NO OPID', m, path);
    else if (ids.has(op.operationId)) console.log('DUP', op.operationId, path, ids.get(op.operationId)); else ids.set(op.operationId, path);
    for (const [st, resp] of Object.entries<any>(op.responses)) if (resp.description === 'Default Response') console.log('DEFAULT', m, path, st);
  }
  console.log(p, Object.keys(doc.paths).length, 'paths', ids.size, 'ops', Object.keys(doc.components.schemas).join(','));
  const fs = await import('node:fs'); fs.writeFileSync(`/tmp/i16-${p.replace(/\//g, '_')}.json`, JSON.stringify(doc, null, 1));
}
await app.stop();
