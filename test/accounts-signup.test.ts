import { expect, it } from 'vitest';
import { describeAccounts, linkIn, mailTo } from './account-helpers.ts';
import { WebClient } from './web-client.ts';
import { mailboxWithAddress } from './smtp-helpers.ts';

// CUBBY_SIGNUP=invite (the default): the first person on an empty instance signs up, then only
// invited people; a new address is confirmed by a link before the account sends mail.

describeAccounts('sign-up policy and email verification', (env) => {
  it('the first person signs up; after that sign-up needs an invitation, and nothing is created', async () => {
    const { app, sink } = env();
    const first = new WebClient(app.base);
    const res = await first.signUp({ email: 'first@example.com', name: 'First Owner' });
    expect(res.status).toBe(303);
    expect(first.cookies.has('cubby_session')).toBe(true);

    const stranger = new WebClient(app.base);
    const page = await stranger.get('/users/sign_up');
    expect(page.status).toBe(403);
    expect(page.text).toContain('Sign-up is by invitation');
    // A form posted anyway (a token from the sign-in page) is refused the same way.
    const posted = await stranger.submit('/users/sign_in', '/users/sign_up', { email: 'stranger@example.com', name: 'Stranger', password: 'a long test password' });
    expect(posted.status).toBe(403);
    expect(await app.started.deps.db.selectFrom('users').select('id').where('email', '=', 'stranger@example.com').executeTakeFirst()).toBeUndefined();

    // The first person's address is not confirmed yet: their account cannot send mail.
    const db = app.started.deps.db;
    const user = await db.selectFrom('users').innerJoin('memberships', 'memberships.user_id', 'users.id').select(['users.id', 'memberships.account_id', 'users.email_verified_at']).where('email', '=', 'first@example.com').executeTakeFirstOrThrow();
    expect(user.email_verified_at).toBeNull();
    const key = await app.key({ userId: user.id, accountId: user.account_id, email: 'first@example.com', key: '' });
    const box = await mailboxWithAddress(app, { userId: user.id, accountId: user.account_id, email: 'first@example.com', key });
    const send = () => app.request('POST', `/v1/mailboxes/${box.id}/emails`, { key, body: { to: ['first@example.com'], subject: 'Hello', text: 'Hi' } });
    const refused = await send();
    expect(refused.status).toBe(403);
    expect(refused.body.error.code).toBe('EMAIL_NOT_VERIFIED');
    expect((await first.get('/account')).text).toContain('Confirm your email address');

    const mail = await mailTo(sink, 'first@example.com', /Confirm your email address/);
    const link = linkIn(mail.text, app, '/users/verify_email');
    const confirmed = await new WebClient(app.base).get(link);
    expect(confirmed.status).toBe(200);
    expect(confirmed.text).toContain('Email confirmed');
    const again = await new WebClient(app.base).get(link);
    expect(again.status).toBe(410);
    expect(again.text).toContain('already used');
    const bogus = await new WebClient(app.base).get('/users/verify_email?token=nonsense');
    expect(bogus.status).toBe(404);
    expect((await send()).status).toBe(202);
    expect((await first.get('/account')).text).not.toContain('Confirm your email address');
  });
});

describeAccounts(
  'sign-up policy: closed',
  (env) => {
    it('nobody signs up without an invitation, not even the first person', async () => {
      const { app } = env();
      const res = await new WebClient(app.base).signUp({ email: 'first@example.com' }).catch((e) => e as Error);
      // The sign-up page itself is refused, so there is no form to take a token from.
      expect(res).toBeInstanceOf(Error);
      const page = await new WebClient(app.base).get('/users/sign_up');
      expect(page.status).toBe(403);
    });
  },
  { CUBBY_SIGNUP: 'closed' },
);

describeAccounts(
  'sign-up policy: open',
  (env) => {
    it('anyone signs up', async () => {
      const { app } = env();
      expect((await new WebClient(app.base).signUp({ email: 'one@example.com' })).status).toBe(303);
      expect((await new WebClient(app.base).signUp({ email: 'two@example.com' })).status).toBe(303);
    });
  },
  { CUBBY_SIGNUP: 'open' },
);
