import { startTestApp } from './test/harness.ts';
const app = await startTestApp('sqlite', { CUBBY_LOG_LEVEL: 'error' });
try {
  const r = await app.request('GET', '/v1/openapi.json');
  console.log(r.status, r.text.slice(0, 1500));
} catch (e) { console.log('ERR', e); }
await app.stop().catch((e) => console.log('STOP', String(e).slice(0, 3000)));
