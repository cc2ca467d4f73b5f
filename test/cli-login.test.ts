import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from './harness.ts';
import { browserSuiteTitle, HAVE_CHROMIUM, screenshot, useChromium } from './browser.ts';
import { cli, cliEnv, finished, startCli, tempDir, waitForOutput } from './cli-user-helpers.ts';

// `cubby login` as a person does it: the CLI prints a URL and a code and polls; the approval
// happens in Debian's chromium (sign in, compare the code, confirm). The key lands in the config
// file (0600) under the profile; `status` uses it; `logout` revokes it on the server.

describe.skipIf(!HAVE_CHROMIUM)(browserSuiteTitle('cubby login (device flow approved in a browser)'), { timeout: 180_000 }, () => {
  let app: TestApp;
  let dir: string;
  beforeAll(async () => {
    app = await startTestApp('sqlite');
    dir = tempDir();
  });
  afterAll(async () => {
    await app?.stop();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });
  const context = useChromium();

  it('login saves a key under a profile (0600), status works, logout revokes it', async () => {
    const user = await app.user();
    const env = cliEnv({ CUBBY_CONFIG_DIR: path.join(dir, 'config') });
    const child = startCli(['login', '--url', app.base, '--profile', 'work', '--no-browser', '--json'], env);
    const done = finished(child);
    const first = await waitForOutput(child, (t) => t.includes('\n'));
    const prompt = JSON.parse(first.split('\n')[0]!);
    expect(prompt.user_code).toMatch(/\S/);
    expect(prompt.verification_uri_complete).toContain('/oauth/device');

    const page = await context().newPage();
    try {
      await page.goto(prompt.verification_uri_complete);
      await page.getByLabel('Email').fill(user.email);
      await page.getByLabel('Password').fill('a long test password');
      await Promise.all([page.waitForURL((u) => u.pathname === '/oauth/device'), page.getByRole('button', { name: 'Sign in' }).click()]);
      await expect(page.getByTestId('connection-id').textContent()).resolves.toBe(prompt.user_code);
      await screenshot(page, 'cli-login-approval');
      await Promise.all([page.waitForLoadState('load'), page.getByRole('button', { name: 'Confirm connection' }).click()]);
      await page.getByRole('heading', { name: 'Device connected' }).waitFor();
    } finally {
      await page.close();
    }

    const login = await done;
    expect(login.code, login.stderr).toBe(0);
    const result = JSON.parse(login.stdout.trim().split('\n').at(-1)!);
    expect(result).toMatchObject({ profile: 'work', url: app.base, account_id: user.accountId });
    const file = path.join(dir, 'config', 'config.json');
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    const saved = JSON.parse(fs.readFileSync(file, 'utf8'));
    expect(saved.default_profile).toBe('work');
    expect(saved.profiles.work).toMatchObject({ url: app.base, user_email: user.email });
    const key = saved.profiles.work.api_key as string;
    expect((await app.request('GET', '/v1/status', { key })).status).toBe(200);

    const status = await cli(['status'], env);
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toContain(user.email);
    expect((await cli(['profiles', '--json'], env)).json).toEqual([expect.objectContaining({ name: 'work', default: '*' })]);

    const logout = await cli(['logout', '--json'], env);
    expect(logout.code, logout.stderr).toBe(0);
    expect(logout.json).toMatchObject({ profile: 'work', revoked: true });
    expect((await app.request('GET', '/v1/status', { key })).status).toBe(401);
    expect(JSON.parse(fs.readFileSync(file, 'utf8')).profiles).toEqual({});
    const after = await cli(['status'], env);
    expect(after.code).toBe(4);
    expect(after.stderr).toContain('cubby login');
  });

  it('login --with-api-key saves a given key; a bad one is refused (4) and nothing is saved', async () => {
    const user = await app.user();
    const env = cliEnv({ CUBBY_CONFIG_DIR: path.join(dir, 'config2'), XDG_CONFIG_HOME: path.join(dir, 'not-this-one') });
    const bad = await cli(['login', '--url', app.base, '--with-api-key', 'cbk_wrong'], env);
    expect(bad.code).toBe(4);
    expect(fs.existsSync(path.join(dir, 'config2', 'config.json'))).toBe(false);
    const good = await cli(['login', '--url', app.base, '--with-api-key', user.key], env);
    expect(good.code, good.stderr).toBe(0);
    expect(JSON.parse(fs.readFileSync(path.join(dir, 'config2', 'config.json'), 'utf8')).profiles.default.api_key).toBe(user.key);
    // XDG_CONFIG_HOME is used when CUBBY_CONFIG_DIR is not set
    const xdg = cliEnv({ XDG_CONFIG_HOME: path.join(dir, 'xdg') });
    expect((await cli(['login', '--url', app.base, '--with-api-key', user.key], xdg)).code).toBe(0);
    expect(fs.existsSync(path.join(dir, 'xdg', 'cubby', 'config.json'))).toBe(true);
  });
});
