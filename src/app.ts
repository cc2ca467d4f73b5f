import type { FastifyInstance } from 'fastify';
import type { Config } from './config.ts';
import type { AppDeps } from './context.ts';
import { migrate, openDatabase, type Database } from './db/database.ts';
import { resolveSecretKey } from './secret.ts';
import { createLogger } from './logger.ts';
import { buildHttpServer } from './http/server.ts';
import { createBlobStore } from './blobs/index.ts';
import { Worker } from './jobs/worker.ts';
import { createJobs } from './jobs/jobs.ts';
import { registerMaintenance } from './jobs/maintenance.ts';

export interface StartedApp {
  urls: { http: string | null };
  ports: { http: number | null };
  deps: AppDeps;
}

export interface App {
  start(): Promise<StartedApp>;
  stop(): Promise<void>;
}

export interface AppOptions {
  /** Clock override for tests of time-based rules. */
  now?: () => Date;
}

/** Builds the service from a config; nothing listens until start(). */
export function createApp(config: Config, options: AppOptions = {}): App {
  let database: Database | undefined;
  let http: FastifyInstance | undefined;
  let worker: Worker | null = null;
  let boundHttp: string | null = null;

  return {
    async start() {
      const logger = createLogger(config.logLevel);
      const secret = resolveSecretKey(config);
      database = await openDatabase(config.databaseUrl, config.databaseSchema);
      await migrate(database);
      const now = options.now ?? (() => new Date());
      if (config.roles.includes('worker')) {
        worker = new Worker({
          db: database.db,
          dialect: database.dialect,
          now,
          log: logger,
          listen: database.dialect === 'postgres' ? { url: config.databaseUrl, schema: config.databaseSchema } : undefined,
        });
      }
      const deps: AppDeps = {
        db: database.db,
        dialect: database.dialect,
        config,
        secret,
        now,
        blobs: createBlobStore(config),
        jobs: createJobs(database.dialect, now, worker),
        publicUrl: () => config.publicUrl ?? boundHttp ?? `http://${config.httpHost}:${config.httpPort}`,
      };
      let httpPort: number | null = null;
      if (config.roles.includes('api')) {
        http = await buildHttpServer(deps, logger);
        await http.listen({ host: config.httpHost, port: config.httpPort });
        const addr = http.server.address();
        httpPort = typeof addr === 'object' && addr ? addr.port : config.httpPort;
        const host = config.httpHost.includes(':') ? `[${config.httpHost}]` : config.httpHost;
        boundHttp = `http://${host === '0.0.0.0' ? '127.0.0.1' : host}:${httpPort}`;
      }
      if (worker) {
        registerMaintenance(worker, deps);
        await worker.start();
      }
      return { urls: { http: boundHttp }, ports: { http: httpPort }, deps };
    },
    async stop() {
      await http?.close();
      await worker?.stop();
      await database?.close();
    },
  };
}
