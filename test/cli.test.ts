import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { DATABASES, startTestApp, type TestApp } from './harness.ts';
import { SERVER_VERSION } from '../src/version.ts';

// The operator CLI as a self-hoster runs it: a child process on a data directory (or a
// Postgres schema) that no app has touched yet; then the app starts on the same database
// and the printed key works against it.

const ROOT = path.resolve(import.meta.dirname, '..');

interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
  json: any;
}

function cubby(env: Record<string, string>, ...args: string[]): Promise<CliResult> {
  // Only our variables: CUBBY_* from the test environment (e.g. CUBBY_TEST_POSTGRES_URL) stay out.
  const childEnv: Record<string, string> = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? os.tmpdir(), CUBBY_LOG_LEVEL: 'silent', ...env };
  return new Promise((resolve) => {
    execFile(process.execPath, [path.join(ROOT, 'bin/cubby.js'), ...args], { cwd: ROOT, env: childEnv, timeout: 60_000 }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
      const lines = stdout.split('\n').filter((l) => l.trim() !== '');
      let json: any;
      try {
        json = lines.length === 1 ? JSON.parse(lines[0]!) : undefined;
      } catch {
        json = undefined;
      }
      resolve({ code, stdout, stderr, json });
    });
  });
}

/** Exactly one JSON object on stdout. */
function oneObject(r: CliResult) {
  const lines = r.stdout.split('\n').filter((l) => l.trim() !== '');
  expect(lines, `stdout: ${r.stdout}\nstderr: ${r.stderr}`).toHaveLength(1);
  expect(r.json).toBeTypeOf('object');
  expect(Array.isArray(r.json)).toBe(false);
  return r.json;
}

for (const kind of DATABASES) {
  describe(`operator CLI [${kind}]`, () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cubby-cli-'));
    const schema = `cli_${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;
    const env: Record<string, string> = {
      CUBBY_DATA_DIR: dataDir,
      ...(kind === 'postgres' ? { CUBBY_DATABASE_URL: process.env.CUBBY_TEST_POSTGRES_URL!, CUBBY_DATABASE_SCHEMA: schema } : {}),
    };
    let app: TestApp | undefined;

    afterAll(async () => {
      await app?.stop();
      fs.rmSync(dataDir, { recursive: true, force: true });
      if (kind === 'postgres') {
        const client = new pg.Client({ connectionString: process.env.CUBBY_TEST_POSTGRES_URL });
        await client.connect();
        await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
        await client.end();
      }
    });

    it('creates a user and a key that works against the app on the same database; refuses a duplicate email', { timeout: 120_000 }, async () => {
      const email = `Ops-${randomBytes(3).toString('hex')}@Example.com`;
      const created = await cubby(env, 'admin', 'create-user', '--email', email, '--password', 'a long operator password', '--name', 'Op Erator', '--account-name', 'Ops Inc', '--plan', 'agency');
      expect(created.code, created.stdout + created.stderr).toBe(0);
      const user = oneObject(created);
      expect(user.user).toEqual({ id: expect.stringMatching(/^usr_[A-Za-z0-9]+$/), email: email.toLowerCase(), name: 'Op Erator' });
      expect(user.account).toEqual({ id: expect.stringMatching(/^acct_[A-Za-z0-9]+$/), name: 'Ops Inc', kind: 'agency', plan: 'agency' });
      if (kind === 'sqlite') expect(fs.existsSync(path.join(dataDir, 'cubby.db'))).toBe(true);

      const expiresAt = new Date(Date.now() + 90 * 86_400_000).toISOString();
      const [key, duplicate, status, unknown] = await Promise.all([
        cubby(env, 'admin', 'create-key', '--email', email, '--scope', 'mailbox_write', '--label', 'ops key', '--expires-at', expiresAt),
        cubby(env, 'admin', 'create-user', '--email', email.toUpperCase(), '--password', 'another long password', '--name', 'Dup'),
        cubby(env, 'admin', 'set-status', '--account', user.account.id, '--status', 'read_only', '--reason', 'billing paused'),
        cubby(env, 'admin', 'create-key', '--email', 'nobody@example.com'),
      ]);

      expect(key.code, key.stdout + key.stderr).toBe(0);
      const k = oneObject(key);
      expect(k).toEqual({
        id: expect.stringMatching(/^key_[A-Za-z0-9]+$/),
        api_key: expect.stringMatching(/^cubby_[A-Za-z0-9]{40}$/),
        account_id: user.account.id,
        scope: 'mailbox_write',
        label: 'ops key',
        expires_at: expiresAt,
      });

      expect(duplicate.code).not.toBe(0);
      expect(oneObject(duplicate).error).toMatch(/email/i);

      expect(status.code, status.stdout + status.stderr).toBe(0);
      expect(oneObject(status)).toEqual({ id: user.account.id, status: 'read_only' });

      expect(unknown.code).not.toBe(0);
      expect(oneObject(unknown).error).toBe('no user with email nobody@example.com');

      // The app starts on the database the CLI created and migrated.
      app = await startTestApp(kind, env);
      const res = await app.request('GET', '/v1/status', { key: k.api_key });
      expect(res.status, res.text).toBe(200);
      expect(res.body.data.user).toEqual({ id: user.user.id, email: email.toLowerCase(), name: 'Op Erator' });
      expect(res.body.data.account).toMatchObject({ id: user.account.id, name: 'Ops Inc', status: 'read_only', status_reason: 'billing paused', previous_status: 'active' });
      expect(res.body.data.connection).toMatchObject({ label: 'ops key', scope: 'mailbox_write', expires_at: expiresAt });
      const users = await app.started.deps.db.selectFrom('users').select('email').execute();
      expect(users.map((u) => u.email)).toEqual([email.toLowerCase()]);

      // The listings find them, with no secrets.
      const [accounts, people] = await Promise.all([cubby(env, 'admin', 'list-accounts'), cubby(env, 'admin', 'list-users')]);
      expect(accounts.code, accounts.stdout + accounts.stderr).toBe(0);
      expect(oneObject(accounts)).toEqual({
        accounts: [
          {
            id: user.account.id,
            name: 'Ops Inc',
            kind: 'agency',
            plan: 'agency',
            status: 'read_only',
            suspended: false,
            website_publishing_enabled: false,
            parent_account_id: null,
            created_at: expect.any(String),
            members: [{ user_id: user.user.id, email: email.toLowerCase(), role: 'owner' }],
          },
        ],
      });
      expect(people.code, people.stdout + people.stderr).toBe(0);
      expect(oneObject(people)).toEqual({
        users: [{ id: user.user.id, email: email.toLowerCase(), name: 'Op Erator', created_at: expect.any(String), accounts: [{ id: user.account.id, name: 'Ops Inc', role: 'owner' }] }],
      });
      expect(people.stdout).not.toMatch(/password|hash|argon/i);
    });

    it('refuses to run against a missing or empty database instead of creating one (create-user excepted)', { timeout: 120_000 }, async () => {
      const elsewhere = path.join(dataDir, 'not-here');
      const wrong: Record<string, string> =
        kind === 'postgres'
          ? { CUBBY_DATA_DIR: elsewhere, CUBBY_DATABASE_URL: process.env.CUBBY_TEST_POSTGRES_URL!, CUBBY_DATABASE_SCHEMA: `${schema}_missing` }
          : { CUBBY_DATA_DIR: elsewhere };
      const commands = [['list-users'], ['list-accounts'], ['create-key', '--email', 'x@example.com'], ['set-status', '--account', 'acct_1', '--status', 'active'], ['backup', '--out', path.join(dataDir, 'bk-nowhere')], ['invite', '--account', 'acct_1', '--email', 'x@example.com'], ['reset-2fa', '--email', 'x@example.com'], ['reindex']];
      const runs = await Promise.all(commands.map((args) => cubby(wrong, 'admin', ...args)));
      for (const [i, r] of runs.entries()) {
        expect(r.code, commands[i]![0]).toBe(1);
        expect(oneObject(r).error, commands[i]![0]).toMatch(/no Cubby database at .*(does not exist|missing)/);
      }
      expect(fs.existsSync(elsewhere)).toBe(false);
      expect(fs.existsSync(path.join(dataDir, 'bk-nowhere'))).toBe(false);
      if (kind === 'postgres') {
        const client = new pg.Client({ connectionString: process.env.CUBBY_TEST_POSTGRES_URL });
        await client.connect();
        const r = await client.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [`${schema}_missing`]);
        // An empty schema (no Cubby tables) is refused the same way.
        await client.query(`CREATE SCHEMA "${schema}_empty"`);
        await client.end();
        expect(r.rowCount).toBe(0);
        const empty = await cubby({ ...wrong, CUBBY_DATABASE_SCHEMA: `${schema}_empty` }, 'admin', 'list-users');
        expect(empty.code).toBe(1);
        expect(oneObject(empty).error).toMatch(/no Cubby database at postgres schema ".*_empty" \(it is empty\)/);
        const c2 = new pg.Client({ connectionString: process.env.CUBBY_TEST_POSTGRES_URL });
        await c2.connect();
        const tables = await c2.query("SELECT count(*)::int AS n FROM information_schema.tables WHERE table_schema = $1", [`${schema}_empty`]);
        await c2.query(`DROP SCHEMA "${schema}_empty" CASCADE`);
        await c2.end();
        expect(tables.rows[0].n).toBe(0);
      } else {
        // A database file with no Cubby tables in it (a wrong path that happens to exist).
        fs.mkdirSync(elsewhere);
        const file = path.join(elsewhere, 'cubby.db');
        fs.writeFileSync(file, '');
        const r = await cubby(wrong, 'admin', 'list-users');
        expect(r.code).toBe(1);
        expect(oneObject(r).error).toMatch(/no Cubby database at .*cubby\.db \(it is empty\)/);
        expect(fs.readdirSync(elsewhere)).toEqual(['cubby.db']);
        expect(fs.statSync(file).size).toBe(0);
        fs.rmSync(elsewhere, { recursive: true });
      }
    });
  });
}

describe('operator CLI help and version', () => {
  it('--version prints the version; every admin command has a description', { timeout: 60_000 }, async () => {
    for (const flag of ['--version', '-V']) {
      const v = await cubby({}, flag);
      expect(v.code).toBe(0);
      expect(v.stdout.trim()).toBe(SERVER_VERSION);
    }
    const help = await cubby({}, 'admin', '--help');
    expect(help.code).toBe(0);
    // "  name [options]   Description…" (a long description wraps onto indented lines).
    const commands = [...help.stdout.split('Commands:')[1]!.matchAll(/^ {2}([a-z-]+)(?: \[[a-z]+\])*( +\S.*)?$/gm)].map((m) => ({ name: m[1]!, description: (m[2] ?? '').trim() }));
    const names = commands.map((c) => c.name);
    expect(names).toEqual(expect.arrayContaining(['create-user', 'create-key', 'set-status', 'suspend', 'set-publishing', 'dkim-key', 'list-accounts', 'list-users', 'backup', 'restore']));
    for (const c of commands) expect(c.description, `${c.name} has no description`).toMatch(/^[A-Za-z].{10,}/);
    // A command's own help explains its options too.
    const backup = await cubby({}, 'admin', 'backup', '--help');
    expect(backup.stdout).toMatch(/Take a consistent backup[\s\S]*--out <dir> +a new or empty directory/);
  });
});

describe('operator CLI configuration', () => {
  it('a bad configuration stops the command with every problem and no JSON', async () => {
    const r = await cubby({ CUBBY_DATA_DIR: os.tmpdir(), CUBBY_HTTP_PORT: 'abc', CUBBY_LOG_LEVEL: 'loud' }, 'admin', 'create-key', '--email', 'x@example.com');
    expect(r.code).toBe(2);
    expect(r.stdout.trim()).toBe('');
    expect(r.stderr).toMatch(/CUBBY_HTTP_PORT[\s\S]*CUBBY_LOG_LEVEL|CUBBY_LOG_LEVEL[\s\S]*CUBBY_HTTP_PORT/);
  });
});
