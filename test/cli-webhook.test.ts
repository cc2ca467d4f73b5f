import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestApp, TestUser } from './harness.ts';
import { makeCert, Receiver, startHookApp, type TestCert } from './webhook-receiver.ts';
import { cli, cliEnv, tempDir } from './cli-user-helpers.ts';

// `cubby webhook …` against the real HTTPS webhook receiver: the app delivers (the CLI only asks
// it to), and the receiver checks every signature with the standardwebhooks package.

let cert: TestCert;
let receiver: Receiver;
let app: TestApp;
let user: TestUser;
let env: Record<string, string>;
let work: string;

beforeAll(async () => {
  cert = await makeCert();
  receiver = new Receiver(cert);
  await receiver.start();
  ({ app } = await startHookApp('sqlite', cert));
  user = await app.user({ plan: 'paid' });
  work = tempDir();
  env = cliEnv({ CUBBY_URL: app.base, CUBBY_API_KEY: user.key, CUBBY_CONFIG_DIR: path.join(work, 'config') });
});
afterAll(async () => {
  await app?.stop();
  await receiver?.stop();
  if (cert) fs.rmSync(cert.dir, { recursive: true, force: true });
  if (work) fs.rmSync(work, { recursive: true, force: true });
});

describe('cubby webhook', { timeout: 300_000 }, () => {
  it('set prints the secret once; test has the service send a signed webhook.test that the receiver verifies, and it shows in deliveries; a failing receiver exits 1', async () => {
    const box = await cli(['mailboxes', 'create', 'Hooked', '--json'], env);
    expect(box.code, box.stderr).toBe(0);

    const none = await cli(['webhook', 'test', 'Hooked'], env);
    expect(none.code).toBe(3);
    expect(none.stderr).toContain('EMAIL_WEBHOOK_NOT_FOUND');
    expect(none.stderr).toMatch(/request id \S+/);

    const set = await cli(['webhook', 'set', 'Hooked', receiver.url('/cli')], env);
    expect(set.code, set.stderr).toBe(0);
    const secret = /Signing secret \(shown once\): (whsec_\S+)/.exec(set.stdout)?.[1];
    expect(secret).toBeDefined();
    receiver.secret = secret!;
    expect((await cli(['webhook', 'show', 'Hooked'], env)).stdout).not.toContain('whsec_');

    const before = receiver.received.length;
    const test = await cli(['webhook', 'test', 'Hooked', '--json'], env);
    expect(test.code, test.stderr).toBe(0);
    expect(test.json).toMatchObject({ event: { type: 'webhook.test' }, delivery: { status: 'succeeded', last_status_code: 204, attempt_count: 1 } });
    expect(receiver.received.length).toBe(before + 1);
    const got = receiver.received[before]!;
    expect(got.verified).toBe(true);
    expect(got.path).toBe('/cli');
    expect(got.json).toMatchObject({ id: test.json.event.id, type: 'webhook.test', data: { mailbox_id: box.json.id, test: true } });

    const log = await cli(['webhook', 'deliveries', 'Hooked', '--json'], env);
    expect(log.json[0]).toMatchObject({ id: test.json.delivery.id, event_id: test.json.event.id, event_type: 'webhook.test', status: 'succeeded' });
    const table = await cli(['webhook', 'deliveries', 'Hooked'], env);
    expect(table.stdout).toMatch(/ID\s+EVENT\s+STATUS/);
    expect(table.stdout).toContain(test.json.event.id);

    // The receiver fails: the CLI says so and exits 1; the delivery is left to its retries.
    receiver.respond = () => ({ status: 500 });
    try {
      const failing = await cli(['webhook', 'test', 'Hooked'], env);
      expect(failing.code).toBe(1);
      expect(failing.stdout).toMatch(/Not delivered \(retrying\): .*500/);
    } finally {
      receiver.respond = () => ({ status: 204 });
    }
    const queued = await cli(['webhook', 'test', 'Hooked', '--no-wait', '--json'], env);
    expect(queued.code, queued.stderr).toBe(0);
    expect(queued.json.delivery).toMatchObject({ status: 'pending', attempt_count: 0 });
    expect((await cli(['webhook', 'test', 'Hooked', '--timeout', 'soon'], env)).code).toBe(2);
    expect((await cli(['webhook', 'rm', 'Hooked', '--json'], env)).json).toMatchObject({ deleted: true });
  });
});
