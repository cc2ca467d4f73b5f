import { z } from 'zod';
import path from 'node:path';
import { blobConfigFromEnv, blobEnvShape, withBlobEnvChecks, type BlobConfig } from './blobs/blob-config.ts';

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
  CUBBY_HTTP_HOST: z.string().min(1).default('127.0.0.1'),
  CUBBY_HTTP_PORT: port.default(8080),
  CUBBY_SMTP_PORT: port.default(2525),
  CUBBY_SITES_PORT: port.default(8081),
  CUBBY_PUBLIC_URL: z.url().optional(),
  CUBBY_MAIL_DOMAIN: z
    .string()
    .regex(/^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)+$/i, 'must be a domain name')
    .default('mail.localhost'),
  CUBBY_SECRET_KEY: z.string().min(32, 'must be at least 32 characters').optional(),
  CUBBY_ROLES: z
    .string()
    .default('api,smtp,sites,worker')
    .transform((v) => v.split(',').map((r) => r.trim()).filter(Boolean))
    .pipe(z.array(z.enum(ROLES)).min(1)),
  // Behind a reverse proxy: trust X-Forwarded-For from this many hops (0 = none).
  CUBBY_TRUST_PROXY_HOPS: z.string().regex(/^\d{1,2}$/, 'must be a number of proxy hops from 0 to 99').transform(Number).default(0),
  CUBBY_LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  ...blobEnvShape,
}));

export interface Config {
  readonly dataDir: string;
  readonly databaseUrl: string;
  readonly databaseSchema: string | undefined;
  readonly httpHost: string;
  readonly httpPort: number;
  readonly smtpPort: number;
  readonly sitesPort: number;
  readonly publicUrl: string | undefined;
  readonly mailDomain: string;
  readonly secretKey: string | undefined;
  readonly roles: readonly Role[];
  readonly logLevel: string;
  readonly trustProxyHops: number;
  readonly blobs: BlobConfig;
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
    httpHost: e.CUBBY_HTTP_HOST,
    httpPort: e.CUBBY_HTTP_PORT,
    smtpPort: e.CUBBY_SMTP_PORT,
    sitesPort: e.CUBBY_SITES_PORT,
    publicUrl: e.CUBBY_PUBLIC_URL?.replace(/\/+$/, ''),
    mailDomain: e.CUBBY_MAIL_DOMAIN.toLowerCase(),
    secretKey: e.CUBBY_SECRET_KEY,
    roles: Object.freeze([...new Set(e.CUBBY_ROLES)]),
    logLevel: e.CUBBY_LOG_LEVEL,
    trustProxyHops: e.CUBBY_TRUST_PROXY_HOPS,
    blobs: blobConfigFromEnv(e, dataDir),
  });
}
