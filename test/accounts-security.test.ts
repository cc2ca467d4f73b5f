import * as OTPAuth from 'otpauth';
import { expect, it } from 'vitest';
import { describeAccounts, linkIn, mailTo, webSignIn } from './account-helpers.ts';
import type { Clock } from './agent-helpers.ts';
import { WebClient, csrfOf } from './web-client.ts';
import type { TestApp } from './harness.ts';

// /account/security over HTTP: password change, TOTP two-factor (codes computed here), recovery
// codes, the second sign-in step, sessions, the email-code flow refused, and password reset.

const PASSWORD = 'a long test password';

function totpCode(secret: string, clock: Clock, offsetSeconds = 0): string {
  return new OTPAuth.TOTP({ secret: OTPAuth.Secret.fromBase32(secret), digits: 6, period: 30, algorithm: 'SHA1' }).generate({ timestamp: clock.now().getTime() + offsetSeconds * 1000 });
}

/** Turns two-factor on for a signed-in person; returns the seed and the recovery codes. */
async function enableTwoFactor(app: TestApp, web: WebClient, clock: Clock): Promise<{ secret: string; codes: string[]; enabledWith: string }> {
  const setup = await web.submit('/account/security', '/account/security/totp/start', {});
  expect(setup.status).toBe(200);
  expect(setup.text).toMatch(/<img src="data:image\/svg\+xml;base64,/);
  const secret = setup.text.match(/data-testid="totp-secret">([A-Z2-7]+)</)![1]!;
  const setupToken = setup.text.match(/name="setup_token" value="([^"]+)"/)![1]!;
  const wrong = await web.request('POST', '/account/security/totp/enable', { _csrf: csrfOf(setup.text), setup_token: setupToken, code: '000000' === totpCode(secret, clock) ? '111111' : '000000' });
  expect(wrong.status).toBe(422);
  expect(wrong.text).toContain('That code is not correct');
  const enabledWith = totpCode(secret, clock);
  const done = await web.request('POST', '/account/security/totp/enable', { _csrf: csrfOf(setup.text), setup_token: setupToken, code: enabledWith });
  expect(done.status).toBe(200);
  const codes = done.text.match(/data-testid="recovery-codes">([^<]+)</)![1]!.split('\n');
  expect(codes).toHaveLength(10);
  void app;
  return { secret, codes, enabledWith };
}

/** Password step of a two-factor sign-in: lands on the code page. */
async function passwordStep(app: TestApp, email: string): Promise<WebClient> {
  const web = new WebClient(app.base);
  const res = await web.signIn(email, PASSWORD);
  expect(res.status).toBe(303);
  expect(res.location).toBe('/users/two_factor');
  expect(web.cookies.has('cubby_session')).toBe(false);
  return web;
}

const enterCode = (web: WebClient, code: string) => web.submit('/users/two_factor', '/users/two_factor', { code });

describeAccounts('sign-in security', (env) => {
  it('changes the password: the current one is checked, other sessions end, this one stays', async () => {
    const { app } = env();
    const user = await app.user();
    const web = await webSignIn(app, user.email);
    const other = await webSignIn(app, user.email);
    const wrong = await web.submit('/account/security', '/account/security/password', { current_password: 'not my password', new_password: 'a brand new passphrase' });
    expect(wrong.status).toBe(422);
    expect(wrong.text).toContain('Your current password is not correct');
    const weak = await web.submit('/account/security', '/account/security/password', { current_password: PASSWORD, new_password: 'short' });
    expect(weak.status).toBe(422);
    expect((await other.get('/account/security')).status).toBe(200);

    const ok = await web.submit('/account/security', '/account/security/password', { current_password: PASSWORD, new_password: 'a brand new passphrase' });
    expect(ok.status).toBe(303);
    expect((await web.get('/account/security')).status).toBe(200);
    expect((await other.get('/account/security')).status).toBe(303);
    expect((await new WebClient(app.base).signIn(user.email, PASSWORD)).status).toBe(422);
    expect((await new WebClient(app.base).signIn(user.email, 'a brand new passphrase')).status).toBe(303);
  });

  it('TOTP: sign-in asks for the code; a code is accepted once per window; recovery codes work once', async () => {
    const { app, clock } = env();
    const user = await app.user();
    const web = await webSignIn(app, user.email);
    const { secret, codes, enabledWith } = await enableTwoFactor(app, web, clock);
    const db = app.started.deps.db;
    const stored = await db.selectFrom('recovery_codes').select('code_hash').where('user_id', '=', user.userId).execute();
    expect(stored).toHaveLength(10);
    for (const c of codes) expect(stored.map((s) => s.code_hash)).not.toContain(c);
    expect(JSON.stringify(await db.selectFrom('users').select('totp_secret').where('id', '=', user.userId).executeTakeFirstOrThrow())).not.toContain(secret);

    // The code that turned two-factor on cannot sign in: its window was used. The same code, not
    // one computed again: the clock is real time, and a new 30 s window may have begun meanwhile.
    const a = await passwordStep(app, user.email);
    const reused = await enterCode(a, enabledWith);
    expect(reused.status).toBe(422);
    expect(reused.text).toContain('already used');
    expect((await enterCode(a, '12345')).status).toBe(422);
    clock.advance(30);
    const fresh = totpCode(secret, clock);
    const ok = await enterCode(a, fresh);
    expect(ok.status).toBe(303);
    expect(a.cookies.has('cubby_session')).toBe(true);
    expect((await a.get('/account/security')).text).toContain('recovery codes left');
    // The finished sign-in's step cannot be replayed.
    expect((await a.get('/users/two_factor')).status).toBe(410);
    const b = await passwordStep(app, user.email);
    expect((await enterCode(b, fresh)).text).toContain('already used');

    // A recovery code, once.
    expect((await enterCode(b, codes[0]!.toUpperCase())).status).toBe(303);
    const c = await passwordStep(app, user.email);
    const again = await enterCode(c, codes[0]!);
    expect(again.status).toBe(422);
    expect(again.text).toContain('already used');
    expect((await c.get('/account/security')).status).toBe(303);

    // Wrong codes count as failed sign-ins of this email from this client (with the password
    // step, which counts until its code is right): the fifth failure stops the codes, and
    // starting over from the password does not buy new guesses.
    for (let i = 0; i < 3; i++) expect((await enterCode(c, 'wrong-code')).status).toBe(422);
    const stopped = await enterCode(c, totpCode(secret, clock, 30));
    expect(stopped.status).toBe(429);
    expect(stopped.headers.get('retry-after')).toBeTruthy();
    expect(stopped.text).toContain('Too many failed sign-in attempts');
    expect((await c.signIn(user.email, PASSWORD)).status).toBe(429);
    // Another network is not locked out.
    const d = await passwordStep(app, user.email);
    clock.advance(30);
    expect((await enterCode(d, totpCode(secret, clock))).status).toBe(303);
  });

  it('the email-code flow is refused on both surfaces once two-factor is on', async () => {
    const { app, sink, clock } = env();
    const user = await app.user();
    await enableTwoFactor(app, await webSignIn(app, user.email), clock);
    for (const prefix of ['/v1', '/api/v1']) {
      const before = sink.messages.length;
      expect((await app.request('POST', `${prefix}/agent_auth/request_code`, { body: { email: user.email } })).status).toBe(200);
      const mail = await mailTo(sink, user.email, /sign-in code/, before);
      const code = mail.text.match(/code is (\d{6})/)![1]!;
      const res = await app.request('POST', `${prefix}/agent_auth/verify_code`, { body: { email: user.email, code } });
      expect(res.status).toBe(403);
      expect(res.body.error.code).toBe('TWO_FACTOR_REQUIRED');
    }
  });

  it('lists sessions and signs out everywhere else', async () => {
    const { app } = env();
    const user = await app.user();
    const web = await webSignIn(app, user.email);
    const other = await webSignIn(app, user.email);
    const page = await web.get('/account/security');
    expect(page.text).toContain('this browser');
    expect(page.text.match(/<tr><td>/g)).toHaveLength(2);
    expect((await web.submit(page, '/account/security/sessions/end', { all: '1' })).status).toBe(303);
    expect((await other.get('/account')).status).toBe(303);
    expect((await web.get('/account')).status).toBe(200);
  });

  it('password reset: one link, 30 minutes, sessions signed out; bad links say why', async () => {
    const { app, sink, clock } = env();
    const user = await app.user();
    const signedIn = await webSignIn(app, user.email);
    const anon = new WebClient(app.base);
    const asked = await anon.submit('/users/password/new', '/users/password/new', { email: user.email });
    expect(asked.status).toBe(200);
    const unknown = await anon.submit('/users/password/new', '/users/password/new', { email: 'nobody@example.com' });
    // The same answer whether or not the address has a login.
    expect(unknown.status).toBe(200);
    expect(asked.text).toContain(`If ${user.email} has a Cubby login, a reset link is on its way.`);
    expect(unknown.text).toContain('If nobody@example.com has a Cubby login, a reset link is on its way.');
    const link = linkIn((await mailTo(sink, user.email, /Reset your Cubby password/)).text, app, '/users/password/edit');
    const form = await anon.get(link);
    expect(form.status).toBe(200);
    const token = new URL(link, app.base).searchParams.get('token')!;
    expect((await anon.submit(form, '/users/password/edit', { token, password: 'short' })).status).toBe(422);
    const done = await anon.submit(form, '/users/password/edit', { token, password: 'reset to a new passphrase' });
    expect(done.status).toBe(200);
    expect(done.text).toContain('Password changed');
    expect((await signedIn.get('/account')).status).toBe(303);
    const reused = await anon.get(link);
    expect(reused.status).toBe(410);
    expect(reused.text).toContain('already used');
    expect((await new WebClient(app.base).signIn(user.email, 'reset to a new passphrase')).status).toBe(303);

    // Expired after 30 minutes.
    const before = sink.messages.length;
    await anon.submit('/users/password/new', '/users/password/new', { email: user.email });
    const late = linkIn((await mailTo(sink, user.email, /Reset your Cubby password/, before)).text, app, '/users/password/edit');
    clock.advance(31 * 60);
    const expired = await anon.get(late);
    expect(expired.status).toBe(410);
    expect(expired.text).toContain('expired');

    // A link for a login that no longer exists.
    const gone = await app.user();
    const before2 = sink.messages.length;
    await anon.submit('/users/password/new', '/users/password/new', { email: gone.email });
    const orphan = linkIn((await mailTo(sink, gone.email, /Reset your Cubby password/, before2)).text, app, '/users/password/edit');
    const db = app.started.deps.db;
    await db.deleteFrom('user_tokens').where('user_id', '=', gone.userId).execute();
    const keys = db.selectFrom('api_keys').select('id').where('user_id', '=', gone.userId);
    await db.deleteFrom('api_key_accounts').where('api_key_id', 'in', keys).execute();
    await db.deleteFrom('api_key_mailboxes').where('api_key_id', 'in', keys).execute();
    await db.deleteFrom('api_keys').where('user_id', '=', gone.userId).execute();
    await db.deleteFrom('memberships').where('user_id', '=', gone.userId).execute();
    await db.deleteFrom('users').where('id', '=', gone.userId).execute();
    const res = await anon.get(orphan);
    expect(res.status).toBe(404);
    expect(res.text).toContain('not valid');
  });
});
