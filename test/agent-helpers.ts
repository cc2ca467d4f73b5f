import * as oauth from 'oauth4webapi';
import { startTestApp, type DatabaseKind, type TestApp, type TestUser } from './harness.ts';
import { csrfOf, WebClient, type PageResponse } from './web-client.ts';

// Helpers for the agent-access tests: an app on a clock the test can move (device-code
// intervals and expiry without sleeping), OAuth discovery and registration with oauth4webapi,
// and the dashboard approval forms driven over HTTP.

export interface Clock {
  now: () => Date;
  advance(seconds: number): void;
}

export function testClock(): Clock {
  let offset = 0;
  return { now: () => new Date(Date.now() + offset), advance: (s) => void (offset += s * 1000) };
}

export async function startClockApp(kind: DatabaseKind, clock: Clock, env: Record<string, string> = {}): Promise<TestApp> {
  return startTestApp(kind, env, { now: clock.now });
}

export const insecure = { [oauth.allowInsecureRequests]: true } as const;

export async function discover(app: TestApp): Promise<oauth.AuthorizationServer> {
  const issuer = new URL(app.base);
  return oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, { algorithm: 'oauth2', ...insecure }));
}

export async function registerClient(as: oauth.AuthorizationServer, metadata: Record<string, unknown>): Promise<oauth.Client> {
  return oauth.processDynamicClientRegistrationResponse(await oauth.dynamicClientRegistrationRequest(as, metadata as any, insecure)) as Promise<oauth.Client>;
}

export const DEVICE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code';

export async function deviceClient(as: oauth.AuthorizationServer, name = 'Test CLI'): Promise<oauth.Client> {
  return registerClient(as, { client_name: name, redirect_uris: [], grant_types: [DEVICE_GRANT, 'refresh_token'], response_types: [], token_endpoint_auth_method: 'none' });
}

/** The error code of a rejected oauth4webapi call. */
export async function oauthError(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    if (err instanceof oauth.ResponseBodyError) return err.error;
    throw err;
  }
  throw new Error('expected an OAuth error');
}

export async function signedIn(app: TestApp, user: TestUser): Promise<WebClient> {
  const web = new WebClient(app.base);
  const r = await web.signIn(user.email, 'a long test password');
  if (r.status !== 303) throw new Error(`sign-in failed: ${r.status}`);
  return web;
}

/** Submits the approval form on `page` with the given decision and choices. */
export function decide(web: WebClient, page: PageResponse, action: string, fields: Record<string, string>): Promise<PageResponse> {
  const hidden: Record<string, string> = {};
  for (const m of page.text.matchAll(/<input type="hidden" name="(user_code|pending)" value="([^"]+)">/g)) hidden[m[1]!] = m[2]!;
  return web.request('POST', action, { _csrf: csrfOf(page.text), ...hidden, ...fields });
}

export function mcpUrl(app: TestApp): string {
  return `${app.base}/mcp`;
}
