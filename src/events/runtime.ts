import fs from 'node:fs';
import type { AppDeps } from '../context.ts';
import { hostResolverFrom, systemHostResolver, type HostResolver, type RecordResolver } from '../net/resolve.ts';
import { DEFAULT_RETRY_POLICY, type RetryPolicy } from '../webhooks/schedule.ts';
import { DEFAULT_LIVE_SETTINGS, LiveHub, type LiveSettings } from '../live/hub.ts';

// What the event features keep for the life of the app: how webhooks reach the outside (DNS,
// private-address policy, extra trusted CAs, retry policy) and, on nodes serving the API, the live
// hub with its Postgres LISTEN connection. Built once by createApp and hung on AppDeps.

export interface EventsOptions {
  /** DNS for webhook destinations in the shape of AppOptions.resolver (tests serve their own). */
  resolver?: RecordResolver;
  /** Or a host resolver directly; wins over `resolver`. */
  hostResolver?: HostResolver;
  retry?: Partial<RetryPolicy>;
  live?: Partial<LiveSettings>;
  /** Per-attempt deadline (default 15 s). */
  webhookTimeoutMs?: number;
}

export interface WebhookRuntime {
  resolver: HostResolver;
  allowPrivate: boolean;
  extraCa: string[];
  retry: RetryPolicy;
  timeoutMs: number;
}

export interface EventsRuntime {
  webhooks: WebhookRuntime;
  /** Present where the API role runs (sockets live there). */
  live: LiveHub | null;
  start(): Promise<void>;
  stop(): Promise<void>;
}

declare module '../context.ts' {
  interface AppDeps {
    /** Webhook and live-channel runtime (src/events/runtime.ts); absent outside the server. */
    events?: EventsRuntime;
  }
}

export function webhookRuntime(deps: Pick<AppDeps, 'config'>, opts: EventsOptions = {}): WebhookRuntime {
  const caFile = deps.config.webhookCaFile;
  return {
    resolver: opts.hostResolver ?? (opts.resolver ? hostResolverFrom(opts.resolver) : systemHostResolver),
    allowPrivate: deps.config.webhookAllowPrivate,
    extraCa: caFile ? [readCaFile(caFile)] : [],
    retry: { ...DEFAULT_RETRY_POLICY, ...opts.retry },
    timeoutMs: opts.webhookTimeoutMs ?? 15_000,
  };
}

function readCaFile(file: string): string {
  try {
    const pem = fs.readFileSync(file, 'utf8');
    if (!pem.includes('-----BEGIN CERTIFICATE-----')) throw new Error('no PEM certificate in it');
    return pem;
  } catch (err) {
    throw new Error(`CUBBY_WEBHOOK_CA_FILE: cannot use ${file}: ${(err as Error).message}`);
  }
}

/** Builds the runtime and puts it on `deps.events`; start() opens the LISTEN connection. */
export function attachEvents(deps: AppDeps, opts: EventsOptions, log: { error: (obj: unknown, msg: string) => void }): EventsRuntime {
  const live = deps.config.roles.includes('api')
    ? new LiveHub({
        db: deps.db,
        dialect: deps.dialect,
        now: deps.now,
        log,
        listen: deps.dialect === 'postgres' ? { url: deps.config.databaseUrl, schema: deps.config.databaseSchema } : undefined,
        settings: { ...DEFAULT_LIVE_SETTINGS, ...opts.live },
      })
    : null;
  const runtime: EventsRuntime = {
    webhooks: webhookRuntime(deps, opts),
    live,
    start: async () => live?.start(),
    stop: async () => live?.stop(),
  };
  deps.events = runtime;
  return runtime;
}
