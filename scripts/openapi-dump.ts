// Writes the two OpenAPI documents the service serves (/v1 and /api/v1) to packages/sdk/openapi/,
// so the SDK's types (`npm run generate -w @cubby/sdk`) are generated from what the app really
// serves. Boots the app on a temporary SQLite data dir and port 0; nothing else listens.
//
//   npx tsx scripts/openapi-dump.ts [outDir]
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../src/config.ts';
import { createApp } from '../src/app.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const outDir = path.resolve(process.argv[2] ?? path.join(root, 'packages/sdk/openapi'));
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cubby-openapi-'));
const app = createApp(
  loadConfig({
    CUBBY_DATA_DIR: dataDir,
    CUBBY_HTTP_PORT: '0',
    CUBBY_ROLES: 'api',
    CUBBY_LOG_LEVEL: 'silent',
    CUBBY_SECRET_KEY: randomBytes(32).toString('hex'),
    CUBBY_PUBLIC_URL: 'http://localhost:8080',
  }),
);
try {
  const started = await app.start();
  fs.mkdirSync(outDir, { recursive: true });
  for (const [prefix, file] of [
    ['/v1', 'surface-r.json'],
    ['/api/v1', 'surface-a.json'],
  ]) {
    const res = await fetch(`${started.urls.http}${prefix}/openapi.json`);
    if (!res.ok) throw new Error(`${prefix}/openapi.json answered ${res.status}`);
    const doc = await res.json();
    fs.writeFileSync(path.join(outDir, file), `${JSON.stringify(doc, null, 2)}\n`);
    console.log(`${prefix}/openapi.json → ${path.relative(root, path.join(outDir, file))} (${Object.keys(doc.paths ?? {}).length} paths)`);
  }
} finally {
  await app.stop();
  fs.rmSync(dataDir, { recursive: true, force: true });
}
