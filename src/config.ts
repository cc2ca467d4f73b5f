import { z } from 'zod';
import path from 'node:path';
import { blobConfigFromEnv, blobEnvShape, withBlobEnvChecks, type BlobConfig } from './blobs/blob-config.ts';
import { sitesHostOverlapsDashboard } from './sites/urls.ts';

// Every setting the service reads. Nothing else in the code reads process.env:
// the config is built once at start, frozen, and passed down.
const ROLES = ['api', 'smtp', 'sites', 'worker'] as const;
export type Role = (typeof ROLES)[number];

// A plain decimal port. z.coerce.number() would read ' ' as 0 (a random port), '1e3' as 1000
// and '0x50' as 80; a typo should stop start-up instead.
const port = z
  .string()
  .regex(/^\d{1,5}$/, 'must be a port number from 0 to 65535')
  .transform(Number)
  .pipe(z.number().int().min(0, 'must be a port number from 0 to 65535').max(65535, 'must be a port number from 0 to 65535'));

const envSchema = withBlobEnvChecks(z.object({
  CUBBY_DATA_DIR: z.string().min(1).default('./data'),
  CUBBY_DATABASE_URL: z
    .string()
    .refine((v) => /^(postgres|postgresql|sqlite|file):/.test(v) || v.endsWith('.db') || v === ':memory:', {
      message: 'must be postgres://…, sqlite:PATH or a path ending in .db',
    })
    .optional(),
  CUBBY_DATABASE_SCHEMA: z.string().regex(/^[a-z_][a-z0-9_]{0,62}$/, 'must be a plain lower-case identifier').optional(),
  CUBBY_DATABASE_PREPARED_STATEMENTS: z.enum(['true', 'false']).default('true'),
  CUBBY_HTTP_HOST: z.string().min(1).default('127.0.0.1'),
  CUBBY_HTTP_PORT: port.default(8080),
  CUBBY_SMTP_PORT: port.default(2525),
  CUBBY_SMTP_HOST: z.string().min(1).default('127.0.0.1'),
  // Concurrent SMTP connections one client address may hold (loopback senders count too).
  CUBBY_SMTP_MAX_CONNECTIONS_PER_IP: z.string().regex(/^[1-9]\d{0,4}$/, 'must be a whole number from 1 to 99999').transform(Number).default(100),
  // Milliseconds to wait before the SMTP greeting; a client that talks before it is refused
  // ("early talker", a spam-bot habit). 0 (default) greets at once.
  CUBBY_SMTP_GREETING_DELAY_MS: z.string().regex(/^\d{1,5}$/, 'must be a whole number of milliseconds (0-99999)').transform(Number).default(0),
  // Worker threads that parse received mail and check SPF/DKIM/DMARC/ARC (src/inbound/analyze-pool.ts),
  // started with the first message; 0 does that work on the event loop.
  CUBBY_SMTP_ANALYSIS_THREADS: z.string().regex(/^\d{1,2}$/, 'must be a whole number of threads (0-99)').transform(Number).default(1),
  // Milliseconds a group commit of received mail may wait for analyzed messages to join it
  // (src/db/group-commit.ts): fewer, larger transactions under a stream of mail. 0 turns it off.
  CUBBY_SMTP_COMMIT_WINDOW_MS: z.string().regex(/^\d{1,3}$/, 'must be a whole number of milliseconds (0-999)').transform(Number).default(5),
  // Message bytes all SMTP sessions may hold in memory at once (each message is kept while it streams
  // to the store); past it, DATA is answered 451 4.3.2. A message alone in flight is always admitted.
  CUBBY_SMTP_MAX_DATA_IN_FLIGHT_BYTES: z.string().regex(/^[1-9]\d{0,12}$/, 'must be a whole number of bytes').transform(Number).default(256 * 1024 * 1024),
  // The name the SMTP server gives itself (greeting, EHLO, Authentication-Results).
  CUBBY_SMTP_HOSTNAME: z.string().regex(/^[a-z0-9.-]{1,253}$/i, 'must be a host name').optional(),
  // PEM files; when both are set the SMTP server offers STARTTLS.
  CUBBY_SMTP_TLS_KEY: z.string().min(1).optional(),
  CUBBY_SMTP_TLS_CERT: z.string().min(1).optional(),
  // Email labeler: builtin rules, or an OpenAI-compatible chat-completions endpoint.
  CUBBY_LABELER: z.enum(['builtin', 'openai']).default('builtin'),
  CUBBY_LABELER_URL: z.url().optional(),
  CUBBY_LABELER_API_KEY: z.string().min(1).optional(),
  CUBBY_LABELER_MODEL: z.string().min(1).optional(),
  CUBBY_SITES_PORT: port.default(8081),
  // Published sites are served at <slug>.CUBBY_SITES_HOST (default: <slug>.localhost:<sites port>).
  CUBBY_SITES_HOST: z.string().regex(/^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*(:\d{1,5})?$/i, 'must be a host name, optionally with :port').optional(),
  // Site analytics (docs/sites.md): on by default; counters are flushed to the database every
  // FLUSH_MS and kept RETENTION_DAYS; countries only with a local MaxMind/GeoLite2 .mmdb file.
  CUBBY_SITE_ANALYTICS: z.enum(['on', 'off']).default('on'),
  CUBBY_SITE_ANALYTICS_FLUSH_MS: z.string().regex(/^\d{2,7}$/, 'must be a whole number of milliseconds (10-9999999)').transform(Number).default(10_000),
  CUBBY_SITE_ANALYTICS_RETENTION_DAYS: z.string().regex(/^[1-9]\d{0,3}$/, 'must be a whole number of days (1-9999)').transform(Number).default(90),
  CUBBY_GEOIP_DB: z.string().min(1).optional(),
  // Custom site domains (docs/sites.md): the sites server's public addresses, which a domain's A/AAAA
  // records may name instead of a CNAME; and ACME certificates (off unless a directory is given).
  CUBBY_SITES_ADDRESSES: z
    .string()
    .transform((v) => v.split(',').map((s) => s.trim().toLowerCase()).filter(Boolean))
    .pipe(z.array(z.union([z.ipv4(), z.ipv6()], 'must be IPv4 or IPv6 addresses, comma-separated')).max(20))
    .default([]),
  CUBBY_ACME_DIRECTORY: z.url().optional(),
  CUBBY_ACME_EMAIL: z.email().optional(),
  // PEM file of a CA to trust for the ACME directory (a private ACME server, or a test one).
  CUBBY_ACME_CA_FILE: z.string().min(1).optional(),
  CUBBY_SITES_TLS_PORT: port.default(443),
  CUBBY_PUBLIC_URL: z.url().optional(),
  // Extra Host names /mcp answers besides CUBBY_PUBLIC_URL's host and loopback (DNS-rebinding
  // protection, docs/agent-access.md): `host` (any port) or `host:port`, comma-separated.
  CUBBY_MCP_ALLOWED_HOSTS: z
    .string()
    .transform((v) => v.split(',').map((s) => s.trim().toLowerCase()).filter(Boolean))
    .pipe(z.array(z.string().regex(/^(\[[0-9a-f:.]+\]|[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*)(:\d{1,5})?$/, 'must be host or host:port')))
    .default([]),
  CUBBY_MAIL_DOMAIN: z
    .string()
    .regex(/^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)+$/i, 'must be a domain name')
    .default('mail.localhost'),
  // Custom receiving domains: the host their MX records name (default: the SMTP hostname), the name
  // servers their DNS checks ask ("ip" or "ip:port", comma-separated; default: the system's), and
  // the setup requests (claim, check, verify) one account may make per hour.
  CUBBY_MX_HOST: z.string().regex(/^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)+$/i, 'must be a host name').optional(),
  CUBBY_DNS_SERVERS: z
    .string()
    .transform((v) => v.split(',').map((s) => s.trim()).filter(Boolean))
    .pipe(z.array(z.string().regex(/^(\d{1,3}(\.\d{1,3}){3}(:\d{1,5})?|\[?[0-9a-f:]+\]?(:\d{1,5})?)$/i, 'must be ip or ip:port')).min(1))
    .optional(),
  CUBBY_DOMAIN_SETUP_LIMIT: z.string().regex(/^\d{1,6}$/, 'must be a whole number of requests per hour').transform(Number).default(30),
  CUBBY_SECRET_KEY: z.string().min(32, 'must be at least 32 characters').optional(),
  CUBBY_ROLES: z
    .string()
    .default('api,smtp,sites,worker')
    .transform((v) => v.split(',').map((r) => r.trim()).filter(Boolean))
    .pipe(z.array(z.enum(ROLES)).min(1)),
  // Behind a reverse proxy: trust X-Forwarded-For from this many hops (0 = none).
  CUBBY_TRUST_PROXY_HOPS: z.string().regex(/^\d{1,2}$/, 'must be a number of proxy hops from 0 to 99').transform(Number).default(0),
  CUBBY_LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  // json: one JSON object per line (for collectors); pretty: coloured, human-readable (a terminal).
  CUBBY_LOG_FORMAT: z.enum(['json', 'pretty'], { error: 'must be json or pretty' }).default('json'),
  // GET /metrics: with a token, any client presenting it (Authorization: Bearer …); without one,
  // only direct loopback clients (see docs/operations.md).
  CUBBY_METRICS_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
  // SIGTERM: seconds to finish SMTP DATA, HTTP requests and jobs in progress before exiting.
  CUBBY_SHUTDOWN_GRACE_S: z.string().regex(/^\d{1,4}$/, 'must be a whole number of seconds').transform(Number).default(25),
  // Webhooks: private destinations only for tests and local development; extra trusted CA (PEM file).
  CUBBY_WEBHOOK_ALLOW_PRIVATE: z.enum(['true', 'false']).default('false'),
  CUBBY_WEBHOOK_CA_FILE: z.string().min(1).optional(),
  // Git sync (src/gitsync): on or off for the instance; how often connections are checked; private
  // repository hosts only for tests and closed networks; extra trusted CA (PEM file); size limits.
  CUBBY_GIT_SYNC: z.enum(['true', 'false']).default('true'),
  CUBBY_GIT_SYNC_INTERVAL_S: z.string().regex(/^[1-9]\d{0,6}$/, 'must be a whole number of seconds').transform(Number).default(900),
  CUBBY_GIT_ALLOW_PRIVATE: z.enum(['true', 'false']).default('false'),
  CUBBY_GIT_CA_FILE: z.string().min(1).optional(),
  CUBBY_GIT_MAX_REPO_BYTES: z.string().regex(/^[1-9]\d{0,11}$/, 'must be a whole number of bytes').transform(Number).default(200 * 1024 * 1024),
  CUBBY_GIT_MAX_FILES: z.string().regex(/^[1-9]\d{0,6}$/, 'must be a whole number').transform(Number).default(5000),
  CUBBY_GIT_MAX_FILE_BYTES: z.string().regex(/^[1-9]\d{0,11}$/, 'must be a whole number of bytes').transform(Number).default(50 * 1024 * 1024),
  // Sending (src/outbound): a relay (smtp://user:pass@host:port, smtps:// for implicit TLS) for mail to
  // other domains, else direct MX delivery; a DKIM key for the platform mail domain; the per-mailbox rate.
  CUBBY_SMTP_RELAY_URL: z.string().regex(/^smtps?:\/\/([^@\/\s]+@)?[^:@\/\s]+(:\d{1,5})?\/?$/, 'must be smtp://[user:pass@]host[:port] or smtps://…').optional(),
  CUBBY_DKIM_SELECTOR: z.string().regex(/^[a-z0-9][a-z0-9._-]{0,62}$/i, 'must be a DNS label').optional(),
  CUBBY_DKIM_PRIVATE_KEY_FILE: z.string().min(1).optional(),
  CUBBY_SEND_RATE_PER_HOUR: z.string().regex(/^\d{1,6}$/, 'must be a whole number').transform(Number).default(60),
  // Direct MX delivery dials public addresses only; true lets MX hosts be loopback/private (tests, closed networks).
  CUBBY_SMTP_ALLOW_PRIVATE_MX: z.enum(['true', 'false']).default('false'),
  // Crash leftovers (temp files of unfinished writes, blobs whose row was never committed) older than
  // this are removed by the worker's sweeper. Longer than any upload or SMTP DATA may stall.
  CUBBY_ORPHAN_SWEEP_AGE_S: z.string().regex(/^[1-9]\d{0,8}$/, 'must be a whole number of seconds (1 or more)').transform(Number).default(86_400),
  // Compatibility (docs/compat.md): an upload session with no activity for this many seconds
  // releases its write lock and expires; extra brand words for OAuth scopes, token fields and headers.
  CUBBY_UPLOAD_SESSION_IDLE_S: z.string().regex(/^[1-9]\d{0,6}$/, 'must be a whole number of seconds').transform(Number).default(900),
  CUBBY_COMPAT_BRANDS: z
    .string()
    .default('')
    .transform((v) => v.split(',').map((s) => s.trim().toLowerCase()).filter(Boolean))
    .pipe(z.array(z.string().regex(/^[a-z][a-z0-9]{1,30}$/, 'must be comma-separated words of letters and digits')).max(10)),
  // Who may open an account in the browser: anyone, the invited (and the first person on an empty instance), or nobody.
  CUBBY_SIGNUP: z.enum(['open', 'invite', 'closed']).default('invite'),
  // Search (src/search): the Postgres text-search configuration (stemming language), and the limits
  // of text extraction per file (bytes read, seconds spent).
  CUBBY_SEARCH_LANGUAGE: z.string().regex(/^[a-z_]{1,63}$/, 'must be a Postgres text search configuration name, e.g. english or simple').default('english'),
  CUBBY_SEARCH_EXTRACT_MAX_BYTES: z.string().regex(/^[1-9]\d{0,11}$/, 'must be a whole number of bytes').transform(Number).default(50 * 1024 * 1024),
  CUBBY_SEARCH_EXTRACT_TIMEOUT_MS: z.string().regex(/^[1-9]\d{0,6}$/, 'must be a whole number of milliseconds').transform(Number).default(30_000),
  ...blobEnvShape,
}))
  .refine((e) => (e.CUBBY_SMTP_TLS_KEY === undefined) === (e.CUBBY_SMTP_TLS_CERT === undefined), {
    when: () => true,
    path: ['CUBBY_SMTP_TLS_CERT'],
    message: 'set CUBBY_SMTP_TLS_KEY and CUBBY_SMTP_TLS_CERT together, or neither',
  })
  .refine((e) => (e.CUBBY_DKIM_SELECTOR === undefined) === (e.CUBBY_DKIM_PRIVATE_KEY_FILE === undefined), {
    when: () => true,
    path: ['CUBBY_DKIM_PRIVATE_KEY_FILE'],
    message: 'set CUBBY_DKIM_SELECTOR and CUBBY_DKIM_PRIVATE_KEY_FILE together, or neither',
  })
  .refine((e) => e.CUBBY_LABELER !== 'openai' || (e.CUBBY_LABELER_URL && e.CUBBY_LABELER_API_KEY && e.CUBBY_LABELER_MODEL), {
    when: () => true,
    path: ['CUBBY_LABELER_URL'],
    message: 'CUBBY_LABELER=openai needs CUBBY_LABELER_URL, CUBBY_LABELER_API_KEY and CUBBY_LABELER_MODEL',
  })
  // Published sites run anyone's scripts: they must never share cookies with the dashboard.
  .refine((e) => !e.CUBBY_SITES_HOST || !e.CUBBY_PUBLIC_URL || !sitesHostOverlapsDashboard(e.CUBBY_SITES_HOST, e.CUBBY_PUBLIC_URL), {
    when: () => true,
    path: ['CUBBY_SITES_HOST'],
    message: "must not contain or sit under CUBBY_PUBLIC_URL's host (a site could claim the dashboard's host or set cookies it reads); use a domain of its own",
  });

export interface Config {
  readonly dataDir: string;
  readonly databaseUrl: string;
  readonly databaseSchema: string | undefined;
  /** Postgres: run frequent statements as named prepared statements (src/db/pg-prepared.ts). */
  readonly databasePreparedStatements: boolean;
  readonly httpHost: string;
  readonly httpPort: number;
  readonly smtpPort: number;
  readonly smtpHost: string;
  readonly smtpMaxConnectionsPerIp: number;
  readonly smtpMaxDataInFlightBytes: number;
  readonly smtpGreetingDelayMs: number;
  readonly smtpCommitWindowMs: number;
  readonly smtpAnalysisThreads: number;
  readonly smtpHostname: string;
  readonly smtpTls: { keyFile: string; certFile: string } | null;
  readonly labeler: { kind: 'builtin' } | { kind: 'openai'; url: string; apiKey: string; model: string };
  readonly sitesPort: number;
  readonly sitesHost: string | undefined;
  readonly siteAnalytics: { enabled: boolean; flushMs: number; retentionDays: number; geoipDb: string | null };
  /** Custom site domains: A/AAAA targets besides the CNAME, and ACME (null: TLS is the proxy's). */
  readonly siteDomains: { addresses: readonly string[]; acme: { directoryUrl: string; email: string | undefined; caFile: string | undefined } | null; tlsPort: number };
  readonly publicUrl: string | undefined;
  /** CUBBY_MCP_ALLOWED_HOSTS: more Host names /mcp answers. */
  readonly mcpAllowedHosts: readonly string[];
  readonly mailDomain: string;
  readonly mxHost: string;
  readonly dnsServers: readonly string[] | null;
  readonly domainSetupLimitPerHour: number;
  readonly secretKey: string | undefined;
  readonly roles: readonly Role[];
  readonly logLevel: string;
  readonly logFormat: 'json' | 'pretty';
  readonly metricsToken: string | undefined;
  readonly shutdownGraceMs: number;
  readonly trustProxyHops: number;
  readonly blobs: BlobConfig;
  readonly outbound: { relayUrl: string | null; dkim: { selector: string; privateKeyFile: string } | null; sendRatePerHour: number; allowPrivateMx: boolean };
  /** CUBBY_SIGNUP: who may open an account in the browser (see docs/accounts.md). */
  readonly signup: 'open' | 'invite' | 'closed';
  readonly webhookAllowPrivate: boolean;
  readonly webhookCaFile: string | undefined;
  /** Git sync (docs/git-sync.md). */
  readonly gitSync: { enabled: boolean; intervalMs: number; allowPrivate: boolean; caFile: string | undefined; maxRepoBytes: number; maxFiles: number; maxFileBytes: number };
  /** CUBBY_ORPHAN_SWEEP_AGE_S in milliseconds. */
  readonly orphanSweepAgeMs: number;
  readonly uploadSessionIdleSeconds: number;
  readonly compatBrands: readonly string[];
  readonly search: { language: string; extractMaxBytes: number; extractTimeoutMs: number };
}

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
  }
}

/** Builds the frozen config from an environment object, listing every problem at once. */
export function loadConfig(env: Record<string, string | undefined>): Config {
  const picked = Object.fromEntries(Object.entries(env).filter(([k, v]) => k.startsWith('CUBBY_') && v !== ''));
  const parsed = envSchema.safeParse(picked);
  if (!parsed.success) {
    throw new ConfigError(parsed.error.issues.map((i) => `${i.path.join('.') || 'env'}: ${i.message}`));
  }
  const e = parsed.data;
  const dataDir = path.resolve(e.CUBBY_DATA_DIR);
  return Object.freeze({
    dataDir,
    databaseUrl: e.CUBBY_DATABASE_URL ?? `sqlite:${path.join(dataDir, 'cubby.db')}`,
    databaseSchema: e.CUBBY_DATABASE_SCHEMA,
    databasePreparedStatements: e.CUBBY_DATABASE_PREPARED_STATEMENTS === 'true',
    httpHost: e.CUBBY_HTTP_HOST,
    httpPort: e.CUBBY_HTTP_PORT,
    smtpPort: e.CUBBY_SMTP_PORT,
    smtpHost: e.CUBBY_SMTP_HOST,
    smtpMaxConnectionsPerIp: e.CUBBY_SMTP_MAX_CONNECTIONS_PER_IP,
    smtpMaxDataInFlightBytes: e.CUBBY_SMTP_MAX_DATA_IN_FLIGHT_BYTES,
    smtpGreetingDelayMs: e.CUBBY_SMTP_GREETING_DELAY_MS,
    smtpCommitWindowMs: e.CUBBY_SMTP_COMMIT_WINDOW_MS,
    smtpAnalysisThreads: e.CUBBY_SMTP_ANALYSIS_THREADS,
    smtpHostname: (e.CUBBY_SMTP_HOSTNAME ?? e.CUBBY_MAIL_DOMAIN).toLowerCase(),
    smtpTls: e.CUBBY_SMTP_TLS_KEY && e.CUBBY_SMTP_TLS_CERT ? { keyFile: path.resolve(e.CUBBY_SMTP_TLS_KEY), certFile: path.resolve(e.CUBBY_SMTP_TLS_CERT) } : null,
    labeler:
      e.CUBBY_LABELER === 'openai'
        ? { kind: 'openai' as const, url: e.CUBBY_LABELER_URL!, apiKey: e.CUBBY_LABELER_API_KEY!, model: e.CUBBY_LABELER_MODEL! }
        : { kind: 'builtin' as const },
    sitesPort: e.CUBBY_SITES_PORT,
    sitesHost: e.CUBBY_SITES_HOST?.toLowerCase(),
    siteAnalytics: Object.freeze({ enabled: e.CUBBY_SITE_ANALYTICS === 'on', flushMs: e.CUBBY_SITE_ANALYTICS_FLUSH_MS, retentionDays: e.CUBBY_SITE_ANALYTICS_RETENTION_DAYS, geoipDb: e.CUBBY_GEOIP_DB ?? null }),
    siteDomains: Object.freeze({
      addresses: Object.freeze([...e.CUBBY_SITES_ADDRESSES]),
      acme: e.CUBBY_ACME_DIRECTORY ? Object.freeze({ directoryUrl: e.CUBBY_ACME_DIRECTORY, email: e.CUBBY_ACME_EMAIL, caFile: e.CUBBY_ACME_CA_FILE ? path.resolve(e.CUBBY_ACME_CA_FILE) : undefined }) : null,
      tlsPort: e.CUBBY_SITES_TLS_PORT,
    }),
    publicUrl: e.CUBBY_PUBLIC_URL?.replace(/\/+$/, ''),
    mcpAllowedHosts: Object.freeze([...e.CUBBY_MCP_ALLOWED_HOSTS]),
    mailDomain: e.CUBBY_MAIL_DOMAIN.toLowerCase(),
    mxHost: (e.CUBBY_MX_HOST ?? e.CUBBY_SMTP_HOSTNAME ?? e.CUBBY_MAIL_DOMAIN).toLowerCase(),
    dnsServers: e.CUBBY_DNS_SERVERS ? Object.freeze([...e.CUBBY_DNS_SERVERS]) : null,
    domainSetupLimitPerHour: e.CUBBY_DOMAIN_SETUP_LIMIT,
    secretKey: e.CUBBY_SECRET_KEY,
    roles: Object.freeze([...new Set(e.CUBBY_ROLES)]),
    logLevel: e.CUBBY_LOG_LEVEL,
    logFormat: e.CUBBY_LOG_FORMAT,
    metricsToken: e.CUBBY_METRICS_TOKEN,
    shutdownGraceMs: e.CUBBY_SHUTDOWN_GRACE_S * 1000,
    trustProxyHops: e.CUBBY_TRUST_PROXY_HOPS,
    blobs: blobConfigFromEnv(e, dataDir),
    signup: e.CUBBY_SIGNUP,
    webhookAllowPrivate: e.CUBBY_WEBHOOK_ALLOW_PRIVATE === 'true',
    webhookCaFile: e.CUBBY_WEBHOOK_CA_FILE ? path.resolve(e.CUBBY_WEBHOOK_CA_FILE) : undefined,
    gitSync: {
      enabled: e.CUBBY_GIT_SYNC === 'true',
      intervalMs: e.CUBBY_GIT_SYNC_INTERVAL_S * 1000,
      allowPrivate: e.CUBBY_GIT_ALLOW_PRIVATE === 'true',
      caFile: e.CUBBY_GIT_CA_FILE ? path.resolve(e.CUBBY_GIT_CA_FILE) : undefined,
      maxRepoBytes: e.CUBBY_GIT_MAX_REPO_BYTES,
      maxFiles: e.CUBBY_GIT_MAX_FILES,
      maxFileBytes: e.CUBBY_GIT_MAX_FILE_BYTES,
    },
    orphanSweepAgeMs: e.CUBBY_ORPHAN_SWEEP_AGE_S * 1000,
    uploadSessionIdleSeconds: e.CUBBY_UPLOAD_SESSION_IDLE_S,
    compatBrands: Object.freeze([...new Set(e.CUBBY_COMPAT_BRANDS)].filter((b) => b !== 'cubby' && b !== 'service')),
    search: { language: e.CUBBY_SEARCH_LANGUAGE, extractMaxBytes: e.CUBBY_SEARCH_EXTRACT_MAX_BYTES, extractTimeoutMs: e.CUBBY_SEARCH_EXTRACT_TIMEOUT_MS },
    outbound: {
      relayUrl: e.CUBBY_SMTP_RELAY_URL ?? null,
      dkim: e.CUBBY_DKIM_SELECTOR && e.CUBBY_DKIM_PRIVATE_KEY_FILE ? { selector: e.CUBBY_DKIM_SELECTOR, privateKeyFile: path.resolve(e.CUBBY_DKIM_PRIVATE_KEY_FILE) } : null,
      sendRatePerHour: e.CUBBY_SEND_RATE_PER_HOUR,
      allowPrivateMx: e.CUBBY_SMTP_ALLOW_PRIVATE_MX === 'true',
    },
  });
}
