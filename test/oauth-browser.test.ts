import http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as oauth from 'oauth4webapi';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BrowserContext } from 'playwright-core';
import { browserSuiteTitle, HAVE_CHROMIUM, openChromium, screenshot } from './browser.ts';
import { DATABASES, type TestApp } from './harness.ts';
import { deviceClient, discover, insecure, mcpUrl, oauthError, registerClient, startClockApp, testClock } from './agent-helpers.ts';

// The device login as a person does it: the CLI side is oauth4webapi, the approval happens in
// Debian's chromium (playwright-core): sign in, compare the connection id, pick the account,
// scope and mailboxes, confirm.

describe.skipIf(!HAVE_CHROMIUM)(browserSuiteTitle('device login approved in a browser'), () => {
  for (const kind of DATABASES) {
    describe(kind, () => {
      const clock = testClock();
      let app: TestApp;
      let context: BrowserContext;
      let browser: Awaited<ReturnType<typeof openChromium>> | undefined;
      beforeAll(async () => {
        app = await startClockApp(kind, clock);
        browser = await openChromium();
        context = browser.context;
      });
      afterAll(async () => {
        await browser?.close();
        await app?.stop();
      });

      it('approves a device with selected mailboxes; the key reaches only those', async () => {
        const user = await app.user();
        const mk = async (title: string) => (await app.request('POST', '/v1/mailboxes', { key: user.key, body: { mailbox: { title } } })).body.data.mailbox.id as string;
        const shared = await mk('Shared with the agent');
        const secret = await mk('Private');

        const as = await discover(app);
        const client = await deviceClient(as, 'Cubby CLI on laptop');
        const da = await oauth.processDeviceAuthorizationResponse(as, client, await oauth.deviceAuthorizationRequest(as, client, oauth.None(), { scope: 'cubby:mcp', resource: mcpUrl(app) }, insecure));
        const poll = () => oauth.deviceCodeGrantRequest(as, client, oauth.None(), da.device_code, insecure).then((r) => oauth.processDeviceCodeResponse(as, client, r));
        expect(await oauthError(poll())).toBe('authorization_pending');

        const page = await context.newPage();
        try {
          await page.goto(da.verification_uri_complete!);
          // Not signed in yet: sign in, then land back on the approval page.
          await page.getByLabel('Email').fill(user.email);
          await page.getByLabel('Password').fill('a long test password');
          await Promise.all([page.waitForURL((u) => u.pathname === '/oauth/device'), page.getByRole('button', { name: 'Sign in' }).click()]);
          await expect(page.getByTestId('connection-id').textContent()).resolves.toBe(da.user_code);
          await expect(page.getByText('Cubby CLI on laptop').first().isVisible()).resolves.toBe(true);
          await page.getByLabel('Scope').selectOption('mailbox_write');
          await page.getByLabel('Only selected mailboxes').check();
          await page.getByLabel('Shared with the agent').selectOption('write');
          await screenshot(page, `device-approval-${kind}`);
          await Promise.all([page.waitForLoadState('load'), page.getByRole('button', { name: 'Confirm connection' }).click()]);
          await page.getByRole('heading', { name: 'Device connected' }).waitFor();
        } finally {
          await page.close();
        }

        clock.advance(6);
        const tokens = await poll();
        const key = tokens.cubby_api_key as string;
        const list = await app.request('GET', '/v1/mailboxes', { key });
        expect(list.body.data.mailboxes.map((m: { id: string }) => m.id)).toEqual([shared]);
        expect((await app.request('GET', `/v1/mailboxes/${secret}`, { key: tokens.access_token })).status).toBe(404);
        const status = await app.request('GET', '/v1/status', { key: tokens.access_token });
        expect(status.body.data.connection).toMatchObject({ mailbox_access: 'selected', mailbox_ids: [shared], mailbox_permissions: { [shared]: 'write' } });
      });

      // Regression: the consent page's CSP said form-action 'self', and browsers apply it to the
      // redirect that answers the form, so Confirm and Deny were blocked and never reached the client.
      it('consent: Confirm and Deny return the browser to the client (form-action allows its redirect URI)', async () => {
        const user = await app.user();
        const arrived: URL[] = [];
        const callback = http.createServer((req, res) => {
          const u = new URL(req.url!, 'http://localhost');
          if (u.pathname === '/callback') arrived.push(u);
          res.end('back at the client');
        });
        await new Promise<void>((r) => callback.listen(0, '127.0.0.1', r));
        const redirect = `http://localhost:${(callback.address() as AddressInfo).port}/callback`;
        const page = await context.newPage();
        try {
          const as = await discover(app);
          const client = await registerClient(as, { client_name: 'Remote MCP in a browser', redirect_uris: [redirect], grant_types: ['authorization_code'], token_endpoint_auth_method: 'none' });
          const verifier = oauth.generateRandomCodeVerifier();
          const authorizeUrl = async (state: string) => {
            const url = new URL(as.authorization_endpoint!);
            url.search = new URLSearchParams({ response_type: 'code', client_id: client.client_id, redirect_uri: redirect, code_challenge: await oauth.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256', scope: 'cubby:mcp', state, resource: mcpUrl(app) }).toString();
            return url.toString();
          };
          const atCallback = (u: URL) => u.origin === new URL(redirect).origin && u.pathname === '/callback';

          await context.clearCookies(); // signed out: the earlier test's person is not this one
          const consent = await page.goto(await authorizeUrl('s-approve'));
          expect(consent!.url()).toContain('/users/sign_in');
          await page.getByLabel('Email').fill(user.email);
          await page.getByLabel('Password').fill('a long test password');
          const landed = await Promise.all([page.waitForResponse((r) => new URL(r.url()).pathname === '/oauth/authorize' && r.request().method() === 'GET' && r.status() === 200), page.getByRole('button', { name: 'Sign in' }).click()]);
          expect(landed[0].headers()['content-security-policy']).toContain(`form-action 'self' ${new URL(redirect).origin};`);
          await Promise.all([page.waitForURL(atCallback), page.getByRole('button', { name: 'Confirm connection' }).click()]);
          const back = new URL(page.url());
          expect(back.searchParams.get('state')).toBe('s-approve');
          const params = oauth.validateAuthResponse(as, client, back, 's-approve');
          const tokens = await oauth.processAuthorizationCodeResponse(
            as,
            client,
            await oauth.authorizationCodeGrantRequest(as, client, oauth.None(), params, redirect, verifier, { additionalParameters: { resource: mcpUrl(app) }, ...insecure }),
          );
          expect((await app.request('GET', '/v1/status', { key: tokens.access_token })).status).toBe(200);

          await page.goto(await authorizeUrl('s-deny'));
          await Promise.all([page.waitForURL(atCallback), page.getByRole('button', { name: 'Deny' }).click()]);
          expect(new URL(page.url()).searchParams.get('error')).toBe('access_denied');
          expect(arrived.map((u) => u.searchParams.get('state'))).toEqual(['s-approve', 's-deny']);
        } finally {
          await page.close();
          await new Promise((r) => callback.close(r));
        }
      });
    });
  }
});
