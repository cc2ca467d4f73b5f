import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../src/config.ts';
import { resolveSecretKey } from '../src/secret.ts';
import { createApp } from '../src/app.ts';

// Configuration: read once from CUBBY_* variables, every problem listed at once; the generated
// secret key file.

function problemsOf(env: Record<string, string>): string[] {
  try {
    loadConfig(env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).problems;
  }
  throw new Error('expected a ConfigError');
}

const tempDirs: string[] = [];
function tempDir(): string {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'cubby-config-'));
  tempDirs.push(d);
  return d;
}
afterEach(() => {
  for (const d of tempDirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

describe('loadConfig', () => {
  it('has defaults for everything', () => {
    const c = loadConfig({});
    expect(c).toMatchObject({
      dataDir: path.resolve('./data'),
      databaseUrl: `sqlite:${path.join(path.resolve('./data'), 'cubby.db')}`,
      databaseSchema: undefined,
      httpHost: '127.0.0.1',
      httpPort: 8080,
      smtpPort: 2525,
      sitesPort: 8081,
      publicUrl: undefined,
      mailDomain: 'mail.localhost',
      secretKey: undefined,
      roles: ['api', 'smtp', 'sites', 'worker'],
      logLevel: 'info',
    });
    expect(Object.isFrozen(c)).toBe(true);
    expect(Object.isFrozen(c.roles)).toBe(true);
  });

  it('reads every variable', () => {
    const c = loadConfig({
      CUBBY_DATA_DIR: '/tmp/cubby-x',
      CUBBY_DATABASE_URL: 'postgres://u@h:5432/db',
      CUBBY_DATABASE_SCHEMA: 'tenant_1',
      CUBBY_HTTP_HOST: '0.0.0.0',
      CUBBY_HTTP_PORT: '0',
      CUBBY_SMTP_PORT: '25',
      CUBBY_SITES_PORT: '65535',
      CUBBY_PUBLIC_URL: 'https://cubby.example.com/',
      CUBBY_MAIL_DOMAIN: 'Mail.Example.COM',
      CUBBY_SECRET_KEY: 'k'.repeat(32),
      CUBBY_ROLES: 'api, worker,api',
      CUBBY_LOG_LEVEL: 'silent',
    });
    expect(c).toMatchObject({
      dataDir: '/tmp/cubby-x',
      databaseUrl: 'postgres://u@h:5432/db',
      databaseSchema: 'tenant_1',
      httpHost: '0.0.0.0',
      httpPort: 0,
      smtpPort: 25,
      sitesPort: 65535,
      publicUrl: 'https://cubby.example.com',
      mailDomain: 'mail.example.com',
      secretKey: 'k'.repeat(32),
      roles: ['api', 'worker'],
      logLevel: 'silent',
    });
  });

  it('prepared statements on Postgres are on unless turned off, and only true or false is taken', () => {
    expect(loadConfig({}).databasePreparedStatements).toBe(true);
    expect(loadConfig({ CUBBY_DATABASE_PREPARED_STATEMENTS: 'false' }).databasePreparedStatements).toBe(false);
    expect(problemsOf({ CUBBY_DATABASE_PREPARED_STATEMENTS: 'off' }).join('\n')).toMatch(/CUBBY_DATABASE_PREPARED_STATEMENTS/);
  });

  it('port 0 is allowed (pick a free port)', () => {
    expect(loadConfig({ CUBBY_HTTP_PORT: '0', CUBBY_SMTP_PORT: '0', CUBBY_SITES_PORT: '0' })).toMatchObject({ httpPort: 0, smtpPort: 0, sitesPort: 0 });
  });

  it('an empty variable counts as unset', () => {
    expect(loadConfig({ CUBBY_HTTP_PORT: '', CUBBY_ROLES: '', CUBBY_SECRET_KEY: '' })).toMatchObject({ httpPort: 8080, roles: ['api', 'smtp', 'sites', 'worker'], secretKey: undefined });
  });

  it('ignores variables that are not CUBBY_*', () => {
    expect(loadConfig({ PORT: 'nonsense', HTTP_PORT: 'x' }).httpPort).toBe(8080);
  });

  it('lists every problem at once', () => {
    const problems = problemsOf({
      CUBBY_HTTP_PORT: 'abc',
      CUBBY_SMTP_PORT: '70000',
      CUBBY_SITES_PORT: '-1',
      CUBBY_DATABASE_URL: 'mysql://x',
      CUBBY_DATABASE_SCHEMA: 'Bad-Schema',
      CUBBY_PUBLIC_URL: 'not a url',
      CUBBY_MAIL_DOMAIN: 'localhost',
      CUBBY_SECRET_KEY: 'short',
      CUBBY_ROLES: 'api,bogus',
      CUBBY_LOG_LEVEL: 'loud',
    });
    const names = ['CUBBY_HTTP_PORT', 'CUBBY_SMTP_PORT', 'CUBBY_SITES_PORT', 'CUBBY_DATABASE_URL', 'CUBBY_DATABASE_SCHEMA', 'CUBBY_PUBLIC_URL', 'CUBBY_MAIL_DOMAIN', 'CUBBY_SECRET_KEY', 'CUBBY_ROLES', 'CUBBY_LOG_LEVEL'];
    for (const n of names) expect(problems.some((p) => p.startsWith(`${n}`)), `${n} in ${JSON.stringify(problems)}`).toBe(true);
    expect(problems).toHaveLength(names.length);
    // and the message lists them all, one per line
    try {
      loadConfig({ CUBBY_HTTP_PORT: 'abc', CUBBY_ROLES: 'nope' });
    } catch (err) {
      expect((err as Error).message).toMatch(/CUBBY_HTTP_PORT[\s\S]*CUBBY_ROLES/);
    }
  });

  it('refuses ports that are not plain numbers instead of reading them as something else', () => {
    for (const value of [' ', '80.5', '1e3', '0x50', '8080abc', '+80']) {
      const problems = problemsOf({ CUBBY_HTTP_PORT: value });
      expect(problems, JSON.stringify(value)).toHaveLength(1);
      expect(problems[0]).toMatch(/^CUBBY_HTTP_PORT/);
    }
  });

  it('site analytics settings: defaults, values, and bad values listed', () => {
    expect(loadConfig({}).siteAnalytics).toEqual({ enabled: true, flushMs: 10_000, retentionDays: 90, geoipDb: null });
    expect(loadConfig({ CUBBY_SITE_ANALYTICS: 'off', CUBBY_SITE_ANALYTICS_FLUSH_MS: '500', CUBBY_SITE_ANALYTICS_RETENTION_DAYS: '30', CUBBY_GEOIP_DB: '/var/lib/GeoLite2-Country.mmdb' }).siteAnalytics).toEqual({
      enabled: false,
      flushMs: 500,
      retentionDays: 30,
      geoipDb: '/var/lib/GeoLite2-Country.mmdb',
    });
    const problems = problemsOf({ CUBBY_SITE_ANALYTICS: 'maybe', CUBBY_SITE_ANALYTICS_FLUSH_MS: '5', CUBBY_SITE_ANALYTICS_RETENTION_DAYS: '0' });
    expect(problems.join('\n')).toMatch(/CUBBY_SITE_ANALYTICS\b/);
    expect(problems.join('\n')).toMatch(/CUBBY_SITE_ANALYTICS_FLUSH_MS/);
    expect(problems.join('\n')).toMatch(/CUBBY_SITE_ANALYTICS_RETENTION_DAYS/);
  });

  it('refuses an empty role list', () => {
    expect(problemsOf({ CUBBY_ROLES: ' , ' })[0]).toMatch(/^CUBBY_ROLES/);
  });

  it('accepts the SQLite URL forms', () => {
    for (const url of ['sqlite:/tmp/x.db', 'file:/tmp/x.db', '/tmp/cubby.db', ':memory:', 'postgresql://a@b/c']) {
      expect(loadConfig({ CUBBY_DATABASE_URL: url }).databaseUrl).toBe(url);
    }
  });
});

describe('the secret key', () => {
  it('CUBBY_SECRET_KEY wins and no file is written', () => {
    const dir = tempDir();
    const key = resolveSecretKey(loadConfig({ CUBBY_DATA_DIR: dir, CUBBY_SECRET_KEY: 's'.repeat(40) }));
    expect(key).toBe('s'.repeat(40));
    expect(fs.existsSync(path.join(dir, 'secret.key'))).toBe(false);
  });

  it('is generated into the data directory with mode 0600 on first start and reused after', async () => {
    const dir = path.join(tempDir(), 'nested', 'data');
    const config = loadConfig({ CUBBY_DATA_DIR: dir, CUBBY_HTTP_PORT: '0', CUBBY_LOG_LEVEL: 'silent', CUBBY_ROLES: 'api' });
    const app1 = createApp(config);
    const s1 = await app1.start();
    const file = path.join(dir, 'secret.key');
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    const first = fs.readFileSync(file, 'utf8').trim();
    expect(first.length).toBeGreaterThanOrEqual(32);
    expect(s1.deps.secret).toBe(first);
    await app1.stop();

    const app2 = createApp(config);
    const s2 = await app2.start();
    expect(s2.deps.secret).toBe(first);
    expect(fs.readFileSync(file, 'utf8').trim()).toBe(first);
    await app2.stop();
  });

  it('two processes starting at once agree on one key', () => {
    const dir = tempDir();
    const config = loadConfig({ CUBBY_DATA_DIR: dir });
    const keys = new Set(Array.from({ length: 5 }, () => resolveSecretKey(config)));
    expect(keys.size).toBe(1);
  });

  it('refuses a secret file that is too short rather than signing with it', () => {
    const dir = tempDir();
    for (const content of ['', 'short\n']) {
      fs.writeFileSync(path.join(dir, 'secret.key'), content, { mode: 0o600 });
      expect(() => resolveSecretKey(loadConfig({ CUBBY_DATA_DIR: dir }))).toThrow(/secret\.key/);
    }
  });
});
