import { execFile } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { expect, it } from 'vitest';
import { describeAccounts, linkIn, mailTo } from './account-helpers.ts';
import { WebClient } from './web-client.ts';

// `cubby admin invite | set-role | reset-2fa` as an operator runs them: a child process on the
// running app's database; the invitation it queues is delivered by the app's worker.

const ROOT = path.resolve(import.meta.dirname, '..');

function cubby(env: Record<string, string>, ...args: string[]): Promise<{ code: number; json: any; stdout: string }> {
  const childEnv: Record<string, string> = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? os.tmpdir(), ...env, CUBBY_LOG_LEVEL: 'silent' };
  return new Promise((resolve) => {
    execFile(process.execPath, [path.join(ROOT, 'bin/cubby.js'), 'admin', ...args], { cwd: ROOT, env: childEnv, timeout: 60_000 }, (err, stdout) => {
      const lines = stdout.split('\n').filter((l) => l.trim() !== '');
      expect(lines, stdout).toHaveLength(1);
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, json: JSON.parse(lines[0]!), stdout });
    });
  });
}

describeAccounts('operator commands for members', (env) => {
  it('invites by email, changes and removes roles, keeps the last owner, and resets two-factor', async () => {
    const { app, sink } = env();
    const owner = await app.user();
    // Links in mail from the CLI use CUBBY_PUBLIC_URL, as the service's own links do.
    const invited = await cubby({ ...app.env, CUBBY_PUBLIC_URL: app.base }, 'invite', '--account', owner.accountId, '--email', 'Newcomer@Example.com', '--role', 'administrator');
    expect(invited.code).toBe(0);
    expect(invited.json).toMatchObject({ account_id: owner.accountId, email: 'newcomer@example.com', role: 'administrator', link: expect.stringContaining('/invitations/') });
    const mail = await mailTo(sink, 'newcomer@example.com', /invited you/);
    expect(mail.text).toContain('The Cubby operator');
    const link = linkIn(mail.text, app, '/invitations/');
    const web = new WebClient(app.base);
    const token = link.split('/').pop()!;
    expect((await web.submit(`/users/sign_up?invitation=${token}`, '/users/sign_up', { invitation: token, email: 'newcomer@example.com', name: 'Newcomer', password: 'a long test password' })).status).toBe(303);

    const demoted = await cubby(app.env, 'set-role', '--account', owner.accountId, '--email', 'newcomer@example.com', '--role', 'collaborator');
    expect(demoted.json).toMatchObject({ role: 'collaborator', revoked_connections: 0 });
    const db = app.started.deps.db;
    const role = () => db.selectFrom('memberships').innerJoin('users', 'users.id', 'memberships.user_id').select('role').where('account_id', '=', owner.accountId).where('email', '=', 'newcomer@example.com').executeTakeFirst();
    expect((await role())?.role).toBe('collaborator');

    const last = await cubby(app.env, 'set-role', '--account', owner.accountId, '--email', owner.email, '--role', 'administrator');
    expect(last.code).toBe(1);
    expect(last.json.error).toMatch(/^LAST_OWNER/);
    const unknown = await cubby(app.env, 'set-role', '--account', owner.accountId, '--email', 'nobody@example.com', '--role', 'owner');
    expect(unknown.json.error).toContain('no user with email');

    const removed = await cubby(app.env, 'set-role', '--account', owner.accountId, '--email', 'newcomer@example.com', '--role', 'none');
    expect(removed.json).toMatchObject({ role: null });
    expect(await role()).toBeUndefined();

    await db.updateTable('users').set({ two_factor_enabled: 1, totp_secret: 'sealed' }).where('id', '=', owner.userId).execute();
    const reset = await cubby(app.env, 'reset-2fa', '--email', owner.email);
    expect(reset.json).toMatchObject({ user_id: owner.userId, two_factor_enabled: false, changed: true });
    const user = await db.selectFrom('users').select(['two_factor_enabled', 'totp_secret']).where('id', '=', owner.userId).executeTakeFirstOrThrow();
    expect(user).toEqual({ two_factor_enabled: 0, totp_secret: null });
  });
});
