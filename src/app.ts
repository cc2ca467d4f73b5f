import type { FastifyInstance } from 'fastify';
import type { Config } from './config.ts';
import type { AppDeps } from './context.ts';
import { migrate, openConfiguredDatabase, type Database } from './db/database.ts';
import { resolveSecretKey } from './secret.ts';
import { createLogger, type Logger } from './logger.ts';
import type { DestinationStream } from 'pino';
import { Metrics } from './ops/metrics.ts';
import { buildHttpServer } from './http/server.ts';
import { createBlobStore } from './blobs/index.ts';
import { InlineAwareBlobStore } from './blobs/inline-blobs.ts';
import { Worker } from './jobs/worker.ts';
import { createJobs } from './jobs/jobs.ts';
import { registerMaintenance } from './jobs/maintenance.ts';
import fs from 'node:fs';
import type { SMTPServer } from 'smtp-server';
import { closeSmtpServer, createSmtpServer } from './inbound/smtp-server.ts';
import { systemResolver, type DnsResolver } from './inbound/authenticate.ts';
import { cachingResolver } from './inbound/dns-cache.ts';
import { registerEmailTasks } from './emails/tasks.ts';
import { registerSearchTasks } from './search/tasks.ts';
import { registerAgentAccessTasks } from './agent-auth/agent-access.ts';
import { startSitesServer, type SitesServer } from './sites/server/sites-server.ts';
import { registerSiteTasks } from './sites/tasks.ts';
import { customDomainOrigin, siteOrigin } from './sites/urls.ts';
import { registerAddressTasks } from './addresses/tasks.ts';
import { registerOutboundTasks } from './outbound/tasks.ts';
import { attachEvents, type EventsOptions, type EventsRuntime } from './events/runtime.ts';
import { registerEventTasks } from './webhooks/tasks.ts';
import { registerGitSyncTasks } from './gitsync/tasks.ts';

/** Whether this process runs the compiled tree (bin/compiled.js) or the TypeScript sources through tsx. */
const RUNTIME = import.meta.url.endsWith('.ts') ? 'sources' : 'compiled';

export interface StartedApp {
  urls: { http: string | null; smtp: string | null; sites: string | null };
  ports: { http: number | null; smtp: number | null; sites: number | null };
  deps: AppDeps;
  /** Writes the site analytics this process has counted so far (tests; also done on a timer and at stop). */
  flushSiteAnalytics(): Promise<void>;
}

export interface App {
  start(): Promise<StartedApp>;
  /**
   * Stops gracefully: listeners close at once, SMTP DATA and HTTP requests in progress finish,
   * idle SMTP sessions get 421, running jobs finish or give their lease back, all within
   * `graceMs` (default CUBBY_SHUTDOWN_GRACE_S); then the database closes.
   */
  stop(opts?: { graceMs?: number }): Promise<void>;
}

export interface AppOptions {
  /** Clock override for tests of time-based rules. */
  now?: () => Date;
  /** DNS for sender authentication (tests serve their own records). */
  resolver?: DnsResolver;
  /** Port of recipients' MX hosts for outbound mail (25; tests run their own SMTP server). */
  mxPort?: number;
  /** Webhook DNS and retry policy, live-channel intervals and limits (tests). */
  events?: EventsOptions;
  /** Where log lines go (default stdout): tests read them. */
  logDestination?: DestinationStream;
  /** Tests: check every API reply against the OpenAPI document (src/http/contract-check.ts). */
  checkResponses?: (violation: string) => void;
  /** Tests: awaited before each inbound commit is made durable, to stand for a slow fsync. */
  beforeDurable?: () => Promise<void>;
}

/** Builds the service from a config; nothing listens until start(). */
export function createApp(config: Config, options: AppOptions = {}): App {
  let database: Database | undefined;
  let http: FastifyInstance | undefined;
  let smtp: SMTPServer | undefined;
  let worker: Worker | null = null;
  let boundHttp: string | null = null;
  let sites: SitesServer | undefined;
  let events: EventsRuntime | undefined;
  let logger: Logger | undefined;
  let searchTasks: { close(): Promise<void> } | undefined;

  return {
    async start() {
      logger = createLogger({ level: config.logLevel, format: config.logFormat, destination: options.logDestination });
      const metrics = new Metrics();
      const secret = resolveSecretKey(config);
      database = await openConfiguredDatabase(config, { beforeDurable: options.beforeDurable, log: logger });
      await migrate(database);
      metrics.sources.db = database.db;
      metrics.sources.pool = database.poolStats;
      const now = options.now ?? (() => new Date());
      if (config.roles.includes('worker')) {
        worker = new Worker({
          db: database.db,
          dialect: database.dialect,
          now,
          log: logger,
          metrics,
          listen: database.dialect === 'postgres' ? { url: config.databaseUrl, schema: config.databaseSchema } : undefined,
          relaxed: (work) => database!.commits.relaxed(work),
        });
      }
      const deps: AppDeps = {
        db: database.db,
        dialect: database.dialect,
        commits: database.commits,
        config,
        secret,
        now,
        blobs: meteredBlobStore(new InlineAwareBlobStore(database.db, await createBlobStore(config, logger)), metrics),
        jobs: createJobs(database.dialect, now, worker),
        publicUrl: () => config.publicUrl ?? boundHttp ?? `http://${config.httpHost}:${config.httpPort}`,
        siteUrl: (label) => siteOrigin(config, label, sites?.port ?? null),
        siteDomainUrl: (hostname) => customDomainOrigin(config, hostname, sites?.port ?? null),
        domainDns: options.resolver ?? systemResolver(5_000, config.dnsServers ? [...config.dnsServers] : undefined),
        log: logger,
        metrics,
      };
      events = attachEvents(deps, { resolver: options.resolver, ...options.events }, logger);
      metrics.sources.liveConnections = () => events?.live?.connections().length ?? 0;
      await events.start();
      let httpPort: number | null = null;
      if (config.roles.includes('api')) {
        http = await buildHttpServer(deps, logger, { checkResponses: options.checkResponses });
        await http.listen({ host: config.httpHost, port: config.httpPort });
        const addr = http.server.address();
        httpPort = typeof addr === 'object' && addr ? addr.port : config.httpPort;
        const host = config.httpHost.includes(':') ? `[${config.httpHost}]` : config.httpHost;
        boundHttp = `http://${host === '0.0.0.0' ? '127.0.0.1' : host}:${httpPort}`;
      }
      let smtpPort: number | null = null;
      if (config.roles.includes('smtp')) {
        const tls = config.smtpTls ? { key: fs.readFileSync(config.smtpTls.keyFile), cert: fs.readFileSync(config.smtpTls.certFile) } : undefined;
        smtp = createSmtpServer(deps, { hostname: config.smtpHostname, resolver: options.resolver ?? cachingResolver(systemResolver()), tls, log: logger });
        await new Promise<void>((resolve, reject) => {
          smtp!.server.once('error', reject);
          smtp!.listen(config.smtpPort, config.smtpHost, () => resolve());
        });
        const addr = smtp.server.address();
        smtpPort = typeof addr === 'object' && addr ? addr.port : config.smtpPort;
      }
      if (config.roles.includes('sites')) sites = await startSitesServer(deps, config.httpHost, config.sitesPort, logger);
      if (worker) {
        registerMaintenance(worker, deps);
        registerSiteTasks(worker, deps, logger);
        registerEmailTasks(worker, deps, logger);
        searchTasks = registerSearchTasks(worker, deps, logger);
        registerAgentAccessTasks(worker, deps);
        registerEventTasks(worker, deps);
        registerAddressTasks(worker, deps);
        registerGitSyncTasks(worker, deps);
        registerOutboundTasks(worker, deps, { resolver: options.resolver ?? cachingResolver(systemResolver()), mxPort: options.mxPort });
        await worker.start();
      }
      logger.info({ roles: config.roles, http: boundHttp, smtp_port: smtpPort, sites_port: sites?.port ?? null, runtime: RUNTIME }, 'started');
      const smtpHost = config.smtpHost.includes(':') ? `[${config.smtpHost}]` : config.smtpHost;
      return {
        urls: { http: boundHttp, smtp: smtpPort === null ? null : `smtp://${smtpHost === '0.0.0.0' ? '127.0.0.1' : smtpHost}:${smtpPort}`, sites: sites ? deps.siteUrl('www').replace('//www.', '//') : null },
        ports: { http: httpPort, smtp: smtpPort, sites: sites?.port ?? null },
        deps,
        flushSiteAnalytics: async () => sites?.flushAnalytics(),
      };
    },
    async stop(opts = {}) {
      const graceMs = opts.graceMs ?? config.shutdownGraceMs;
      // The listeners close first, at once (Fastify's own close below would first run its
      // plugins' hooks); what is in progress gets the grace period. Live sockets are told to
      // reconnect elsewhere right away (they would never finish by themselves).
      if (http?.server.listening) http.server.close();
      const closing = [smtp ? closeSmtpServer(smtp, graceMs) : undefined, sites?.close()];
      await events?.stop();
      await Promise.all([...closing, http ? closeHttp(http, graceMs) : undefined, worker?.stop({ graceMs })]);
      await searchTasks?.close();
      await database?.close();
      logger?.info({}, 'stopped');
    },
  };
}

/** Counts the bytes every put and putBuffer writes (in both stores neither calls the other). */
function meteredBlobStore<T extends { put: (...args: any[]) => Promise<{ byteSize: number }>; putBuffer: (...args: any[]) => Promise<{ byteSize: number }> }>(store: T, metrics: Metrics): T {
  for (const name of ['put', 'putBuffer'] as const) {
    const write = store[name].bind(store);
    store[name] = (async (...args: any[]) => {
      const blob = await write(...args);
      metrics.blobBytesWritten.inc(blob.byteSize);
      return blob;
    }) as T[typeof name];
  }
  return store;
}

/**
 * Fastify's close stops the listener, answers new requests on open connections with 503 and
 * waits for those in progress; idle keep-alive connections are closed at once. Requests still
 * running after `graceMs` have their connections cut.
 */
async function closeHttp(http: FastifyInstance, graceMs: number): Promise<void> {
  const timer = setTimeout(() => http.server.closeAllConnections(), graceMs);
  try {
    await http.close();
  } finally {
    clearTimeout(timer);
  }
}
