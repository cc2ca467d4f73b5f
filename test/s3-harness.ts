import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import S3rver from 's3rver';
import { afterAll, beforeAll, describe } from 'vitest';
import { describeEachDatabase, type DatabaseKind, type TestApp } from './harness.ts';

// S3 as played by s3rver (in the test process, on 127.0.0.1, an ephemeral port, a temp dir and
// one bucket), for suites that boot the app with CUBBY_BLOB_STORE=s3. See docs/blob-store.md for
// where s3rver differs from S3 (it checks neither Content-MD5 nor V4 signatures).

export const S3_BUCKET = 'cubby-test';

/**
 * Starts s3rver in a beforeAll of the calling scope and stops it (and removes its files) in an
 * afterAll. Returns the app's CUBBY_* variables; the object is filled in when s3rver has started,
 * which is before any nested suite's own beforeAll boots the app.
 */
export function useS3rver(): Record<string, string> {
  const env: Record<string, string> = {};
  let server: S3rver | undefined;
  let dir: string | undefined;
  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cubby-s3rver-'));
    server = new S3rver({ address: '127.0.0.1', port: 0, directory: dir, silent: true, vhostBuckets: false, configureBuckets: [{ name: S3_BUCKET }] });
    const { port } = await server.run();
    // s3rver removes a folder when its last object is deleted, and a PUT into that folder at the
    // same moment fails (ENOENT, a 500). S3 has no folders; a file that is not an object (listings
    // skip it) keeps each of ours from ever being empty.
    for (const prefix of ['staging', 'blobs']) {
      fs.mkdirSync(path.join(dir, S3_BUCKET, prefix), { recursive: true });
      fs.writeFileSync(path.join(dir, S3_BUCKET, prefix, '.keep'), '');
    }
    Object.assign(env, {
      CUBBY_BLOB_STORE: 's3',
      CUBBY_S3_BUCKET: S3_BUCKET,
      CUBBY_S3_REGION: 'us-east-1',
      CUBBY_S3_ENDPOINT: `http://127.0.0.1:${port}`,
      CUBBY_S3_ACCESS_KEY_ID: 'S3RVER', // s3rver's built-in account
      CUBBY_S3_SECRET_ACCESS_KEY: 'S3RVER',
      CUBBY_S3_FORCE_PATH_STYLE: 'true',
    });
  });
  afterAll(async () => {
    await server?.close();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });
  return env;
}

/**
 * Runs a suite with the S3 blob store against s3rver: on SQLite always, and on Postgres too when
 * `withPostgres` is true and CUBBY_TEST_POSTGRES_URL is set. The suite body is the same one the
 * fs store runs; it can ask `isS3(app())` where the stores legitimately differ.
 */
export function describeWithS3(name: string, body: (app: () => TestApp) => void, opts: { withPostgres?: boolean } = {}) {
  const databases: DatabaseKind[] = opts.withPostgres ? ['sqlite', 'postgres'] : ['sqlite'];
  describe(`${name} {s3}`, () => {
    const env = useS3rver();
    describeEachDatabase(name, body, env, { only: databases });
  });
}

export function isS3(app: TestApp): boolean {
  return app.started.deps.blobs.kind === 's3';
}
