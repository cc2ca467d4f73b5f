import type { FastifyInstance } from 'fastify';
import type { Config } from './config.ts';
import type { AppDeps } from './context.ts';
import { migrate, openDatabase, type Database } from './db/database.ts';
import { resolveSecretKey } from './secret.ts';
import { createLogger } from './logger.ts';
import { buildHttpServer } from './http/server.ts';
import { sweepActivity } from './activity/activity.service.ts';
import { createBlobStore } from './blobs/index.ts';
import { expireUploadSessions } from './uploads/upload-sessions.lifecycle.ts';
import { collectGarbageBlobs, purgeDeletedMailboxes } from './files/purge.service.ts';
import { sweepSessions } from './web/session.ts';
import { sweepSignInAttempts } from './web/throttle.ts';

export interface StartedApp {
  urls: { http: string | null };
  ports: { http: number | null };
  deps: AppDeps;
}

export interface App {
  start(): Promise<StartedApp>;
  stop(): Promise<void>;
}

const SWEEP_INTERVAL_MS = 10 * 60 * 1000;
const UPLOAD_SWEEP_INTERVAL_MS = 60 * 1000;

export interface AppOptions {
  /** Clock override for tests of time-based rules. */
  now?: () => Date;
}

/** Builds the service from a config; nothing listens until start(). */
export function createApp(config: Config, options: AppOptions = {}): App {
  let database: Database | undefined;
  let http: FastifyInstance | undefined;
  let sweeper: NodeJS.Timeout | undefined;
  let uploadSweeper: NodeJS.Timeout | undefined;
  let boundHttp: string | null = null;

  return {
    async start() {
      const logger = createLogger(config.logLevel);
      const secret = resolveSecretKey(config);
      database = await openDatabase(config.databaseUrl, config.databaseSchema);
      await migrate(database);
      const deps: AppDeps = {
        db: database.db,
        dialect: database.dialect,
        config,
        secret,
        now: options.now ?? (() => new Date()),
        blobs: createBlobStore(config),
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
      if (config.roles.includes('worker')) {
        const sweep = async () => {
          for (const [name, task] of [
            ['activity', () => sweepActivity(deps.db, deps.now())],
            ['sessions', () => sweepSessions(deps.db, deps.now())],
            ['sign-in attempts', () => sweepSignInAttempts(deps.db, deps.now())],
            ['deleted mailboxes', () => purgeDeletedMailboxes(deps.db)],
            ['blobs', () => collectGarbageBlobs(deps.db, deps.blobs, deps.now())],
          ] as const) {
            await task().catch((err) => logger.error({ err }, `${name} sweep failed`));
          }
        };
        sweeper = setInterval(sweep, SWEEP_INTERVAL_MS);
        sweeper.unref();
        // Upload sessions past uploads_expire_at: expired, unsaved uploads discarded, lock released.
        const expireUploads = () => expireUploadSessions(deps.db, deps.now()).catch((err) => logger.error({ err }, 'upload session sweep failed'));
        uploadSweeper = setInterval(expireUploads, UPLOAD_SWEEP_INTERVAL_MS);
        uploadSweeper.unref();
      }
      return { urls: { http: boundHttp }, ports: { http: httpPort }, deps };
    },
    async stop() {
      if (sweeper) clearInterval(sweeper);
      if (uploadSweeper) clearInterval(uploadSweeper);
      await http?.close();
      await database?.close();
    },
  };
}
