import type { Kysely } from 'kysely';
import type { Config } from './config.ts';
import type { DB } from './db/schema.ts';
import type { Dialect } from './db/database.ts';
import type { DurableCommits } from './db/durable-commit.ts';
import type { AgentInfo, Credential } from './auth/credential.ts';
import type { BlobStore } from './blobs/blob-store.ts';
import type { Jobs } from './jobs/jobs.ts';
import type { Logger } from './logger.ts';
import type { Metrics } from './ops/metrics.ts';

/** Long-lived things every service function may use. */
export interface AppDeps {
  db: Kysely<DB>;
  dialect: Dialect;
  /** Transactions acknowledged only once durable, without waiting for the disk on the event loop (inbound mail). */
  commits: DurableCommits;
  config: Config;
  /** Secret for signing cursors, links and cookies (derived from CUBBY_SECRET_KEY). */
  secret: string;
  now: () => Date;
  /** File bytes, content-addressed by SHA-256. */
  blobs: BlobStore;
  /** Durable background work (src/jobs). */
  jobs: Jobs;
  /** Base URL for links shown to people and clients (CUBBY_PUBLIC_URL or the bound address). */
  publicUrl: () => string;
  /** Origin of a published site by host label (`<slug>` or `preview-<slug>`): see src/sites/urls.ts. */
  siteUrl: (label: string) => string;
  /** The process's logger (one line per request, SMTP transaction, job run, webhook attempt). */
  log: Logger;
  /** Prometheus metrics of this app (src/ops/metrics.ts). */
  metrics: Metrics;
}

/** Who is acting, for activity history. */
export interface Actor {
  userId: string | null;
  apiKeyId: string | null;
  agent: AgentInfo | null;
  requestId: string | null;
}

/** One authenticated API request. */
export interface RequestCtx extends AppDeps {
  credential: Credential;
  actor: Actor;
}
