import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe } from 'vitest';
import { loadConfig } from '../src/config.ts';
import { createApp, type AppOptions, type StartedApp } from '../src/app.ts';
import { registerUser } from '../src/accounts/accounts.service.ts';
import { createApiKey, type CreateKeyInput } from '../src/auth/keys.service.ts';
import type { PlanName } from '../src/db/schema.ts';

// Boots the real app on ephemeral ports against a real database: a fresh SQLite file,
// or a fresh Postgres schema when CUBBY_TEST_POSTGRES_URL is set. Talk to it over HTTP.

export type DatabaseKind = 'sqlite' | 'postgres';
export const DATABASES: DatabaseKind[] = process.env.CUBBY_TEST_POSTGRES_URL ? ['sqlite', 'postgres'] : ['sqlite'];

export interface TestApp {
  kind: DatabaseKind;
  base: string;
  dataDir: string;
  started: StartedApp;
  env: Record<string, string>;
  /**
   * Replies that broke the API contract (src/http/contract-check.ts), in arrival order.
   * describeEachDatabase fails the test that caused them; stop() fails on any left over.
   */
  contractViolations: string[];
  /** Takes the recorded violations and throws if there were any. */
  assertContract(): void;
  stop(): Promise<void>;
  request(method: string, url: string, opts?: RequestOptions): Promise<TestResponse>;
  /** A person with their own account and an API key (mailbox_admin, all mailboxes unless told). */
  user(opts?: UserOptions): Promise<TestUser>;
  key(user: TestUser, opts?: Partial<CreateKeyInput>): Promise<string>;
}

export interface RequestOptions {
  key?: string;
  body?: unknown;
  rawBody?: string;
  query?: Record<string, string | number | boolean | undefined>;
  headers?: Record<string, string>;
}

export interface TestResponse {
  status: number;
  headers: Headers;
  body: any;
  text: string;
}

export interface UserOptions {
  plan?: PlanName;
  email?: string;
  name?: string;
}

export interface TestUser {
  userId: string;
  accountId: string;
  email: string;
  key: string;
}

/** A DNS with no records at all (every lookup is ENOTFOUND). */
export async function emptyZone(name: string): Promise<never> {
  throw Object.assign(new Error(`queryTxt ENOTFOUND ${name}`), { code: 'ENOTFOUND' });
}

let counter = 0;
function unique(): string {
  return `${Date.now().toString(36)}${(counter++).toString(36)}${randomBytes(3).toString('hex')}`;
}

export async function startTestApp(kind: DatabaseKind, extraEnv: Record<string, string> = {}, appOptions: AppOptions = {}): Promise<TestApp> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cubby-app-'));
  const schema = kind === 'postgres' ? `t_${unique()}` : undefined;
  const env: Record<string, string> = {
    CUBBY_DATA_DIR: dataDir,
    CUBBY_HTTP_PORT: '0',
    CUBBY_SMTP_PORT: '0',
    CUBBY_SITES_PORT: '0',
    CUBBY_LOG_LEVEL: 'silent',
    CUBBY_SECRET_KEY: randomBytes(32).toString('hex'),
    // Suites sign people up in the browser freely; the sign-up policy tests set their own.
    CUBBY_SIGNUP: 'open',
    // Received mail is analyzed on the event loop here: an analysis thread loads its own copy of the
    // parsing and authentication modules (about a CPU-second per app), which suites about other
    // things need not pay. test/smtp-analysis-threads.test.ts and the suites that run
    // `cubby serve` (test/serve-process.ts) use the default thread.
    CUBBY_SMTP_ANALYSIS_THREADS: '0',
    ...(kind === 'postgres' ? { CUBBY_DATABASE_URL: process.env.CUBBY_TEST_POSTGRES_URL!, CUBBY_DATABASE_SCHEMA: schema! } : {}),
    ...extraEnv,
  };
  // No real DNS in tests: sender authentication sees an empty zone unless a test serves records.
  // Every reply of the API is checked against the OpenAPI document (the contract).
  const contractViolations: string[] = [];
  const app = createApp(loadConfig(env), { resolver: emptyZone, checkResponses: (v) => contractViolations.push(v), ...appOptions });
  const assertContract = () => {
    const found = contractViolations.splice(0);
    if (found.length) throw new Error(`${found.length} API contract violation(s):\n${[...new Set(found)].join('\n')}`);
  };
  const started = await app.start();
  const base = started.urls.http!;

  const request = async (method: string, url: string, opts: RequestOptions = {}): Promise<TestResponse> => {
    const u = new URL(url, base);
    for (const [k, v] of Object.entries(opts.query ?? {})) if (v !== undefined) u.searchParams.set(k, String(v));
    const headers: Record<string, string> = { accept: 'application/json', ...opts.headers };
    if (opts.key) headers.authorization = `Bearer ${opts.key}`;
    let body: string | undefined = opts.rawBody;
    if (opts.body !== undefined) body = JSON.stringify(opts.body);
    if (body !== undefined && !Object.keys(headers).some((h) => h.toLowerCase() === 'content-type')) headers['content-type'] = 'application/json';
    const res = await fetch(u, { method, headers, body });
    const text = await res.text();
    const violation = res.headers.get('x-cubby-contract-violation');
    if (violation) {
      contractViolations.splice(0);
      throw new Error(decodeURIComponent(violation));
    }
    let parsed: unknown = undefined;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = undefined;
    }
    return { status: res.status, headers: res.headers, body: parsed, text };
  };

  const deps = started.deps;
  const testApp: TestApp = {
    kind,
    base,
    dataDir,
    started,
    env,
    contractViolations,
    assertContract,
    request,
    async user(opts = {}) {
      const email = opts.email ?? `user-${unique()}@example.com`;
      const { user, account } = await registerUser(deps.db, { email, password: 'a long test password', name: opts.name ?? 'Test Person', plan: opts.plan }, new Date());
      const key = await createApiKey(deps.db, { userId: user.id, accountId: account.id, scope: 'mailbox_admin' }, { userId: user.id, apiKeyId: null, agent: null, requestId: null }, new Date());
      return { userId: user.id, accountId: account.id, email, key: key.token };
    },
    async key(user, opts = {}) {
      const key = await createApiKey(deps.db, { userId: user.userId, accountId: user.accountId, scope: 'mailbox_admin', ...opts }, { userId: user.userId, apiKeyId: null, agent: null, requestId: null }, new Date());
      return key.token;
    },
    async stop() {
      await app.stop();
      const leftover = contractViolations.splice(0);
      fs.rmSync(dataDir, { recursive: true, force: true });
      if (schema) {
        const client = new pg.Client({ connectionString: process.env.CUBBY_TEST_POSTGRES_URL });
        await client.connect();
        await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
        await client.end();
      }
      if (leftover.length) throw new Error(`API contract violation(s):\n${[...new Set(leftover)].join('\n')}`);
    },
  };
  return testApp;
}

/**
 * Runs a suite once per database. `app()` returns the app booted for that database
 * (one per suite, shared by its tests; tests make their own users so they don't collide).
 * `extraEnv` is read when the suite's app boots (an outer beforeAll may still fill it in);
 * `only` narrows the databases (those without CUBBY_TEST_POSTGRES_URL still never run Postgres).
 */
export function describeEachDatabase(name: string, body: (app: () => TestApp) => void, extraEnv: Record<string, string> = {}, opts: { only?: DatabaseKind[]; appOptions?: AppOptions } = {}) {
  for (const kind of DATABASES.filter((k) => !opts.only || opts.only.includes(k))) {
    describe(`${name} [${kind}]`, () => {
      let current: TestApp | undefined;
      beforeAll(async () => {
        current = await startTestApp(kind, extraEnv, opts.appOptions);
      });
      // A reply that broke the contract fails the test that received it (also through plain fetch).
      afterEach(() => {
        current?.assertContract();
      });
      afterAll(async () => {
        await current?.stop();
      });
      body(() => {
        if (!current) throw new Error('test app not started');
        return current;
      });
    });
  }
}
