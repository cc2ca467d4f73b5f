import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Kysely } from 'kysely';
import type { DB } from '../db/schema.ts';

// The service's Prometheus metrics (GET /metrics, see src/ops/ops.routes.ts). One registry per
// app, not prom-client's global one: tests run several apps in one process. Counters and
// histograms are updated where things happen; gauges that describe state (queue depth, live
// connections, the database pool) are read when scraped.

export interface PoolStats {
  total: number;
  idle: number;
  waiting: number;
}

/** State read at scrape time; each part is set by whoever owns it. */
export interface MetricSources {
  db?: Kysely<DB>;
  pool?: () => PoolStats;
  liveConnections?: () => number;
}

const SECONDS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
const DATA_END_SECONDS = [0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.0125, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.06, 0.075, 0.1, 0.125, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.75, 1, 2, 5, 10];

export class Metrics {
  readonly registry = new Registry();
  readonly sources: MetricSources = {};

  readonly httpRequests = new Counter({ name: 'cubby_http_requests_total', help: 'HTTP requests answered, by method, route pattern and status', labelNames: ['method', 'route', 'status'] as const, registers: [this.registry] });
  readonly httpDuration = new Histogram({ name: 'cubby_http_request_duration_seconds', help: 'HTTP request latency until the response was sent, by method, route pattern and status', labelNames: ['method', 'route', 'status'] as const, buckets: SECONDS, registers: [this.registry] });

  readonly smtpSessions = new Counter({ name: 'cubby_smtp_sessions_total', help: 'SMTP connections opened', registers: [this.registry] });
  readonly smtpMessages = new Counter({ name: 'cubby_smtp_messages_total', help: 'SMTP transactions by outcome (accepted or refused) and final reply code', labelNames: ['outcome', 'code'] as const, registers: [this.registry] });
  readonly smtpIngest = new Histogram({ name: 'cubby_smtp_ingest_duration_seconds', help: 'Time from DATA to the final reply (storing, parsing, authentication), by outcome', labelNames: ['outcome'] as const, buckets: SECONDS, registers: [this.registry] });
  // Finer buckets than SECONDS: the end of DATA to 250 is the wait a sender sees, a few ms to tens of ms.
  readonly smtpDataEndToReply = new Histogram({ name: 'cubby_smtp_data_end_to_reply_seconds', help: 'Time from the end of DATA (the final dot) to the 250 of an accepted message: parse, authenticate, fsync, commit', buckets: DATA_END_SECONDS, registers: [this.registry] });

  readonly smtpAnalyses = new Counter({ name: 'cubby_smtp_analyses_total', help: 'Received messages parsed and authenticated, by where: on an analysis thread, or on the event loop (no threads configured, or a thread was lost)', labelNames: ['on'] as const, registers: [this.registry] });
  readonly smtpGroupCommits = new Counter({ name: 'cubby_smtp_group_commits_total', help: 'Transactions that stored received mail (a group commit holds one or more messages)', registers: [this.registry] });

  readonly jobRuns = new Counter({ name: 'cubby_job_runs_total', help: 'Job runs by task and outcome (done, retry, failed, released)', labelNames: ['task', 'outcome'] as const, registers: [this.registry] });
  readonly jobDuration = new Histogram({ name: 'cubby_job_duration_seconds', help: 'Job run time by task', labelNames: ['task'] as const, buckets: SECONDS, registers: [this.registry] });

  readonly webhookAttempts = new Counter({ name: 'cubby_webhook_attempts_total', help: 'Webhook delivery attempts by outcome (succeeded, retry, failed)', labelNames: ['outcome'] as const, registers: [this.registry] });
  readonly blobBytesWritten = new Counter({ name: 'cubby_blob_bytes_written_total', help: 'Bytes written to the blob store (files, mail, attachments)', registers: [this.registry] });
  readonly blobInlineBytesWritten = new Counter({
    name: 'cubby_blob_inline_bytes_written_total',
    help: 'Bytes of small blobs kept in their database rows instead of the blob store (received mail)',
    registers: [this.registry],
  });

  constructor() {
    const sources = this.sources;
    collectDefaultMetrics({ register: this.registry, prefix: 'cubby_' });
    new Gauge({
      name: 'cubby_live_connections',
      help: 'Open live-event connections on this node',
      registers: [this.registry],
      collect() {
        this.set(sources.liveConnections?.() ?? 0);
      },
    });
    new Gauge({
      name: 'cubby_db_pool_connections',
      help: 'Database pool connections by state (total, idle, waiting requests); SQLite has one connection',
      labelNames: ['state'] as const,
      registers: [this.registry],
      collect() {
        const s = sources.pool?.() ?? { total: 1, idle: 0, waiting: 0 };
        this.set({ state: 'total' }, s.total);
        this.set({ state: 'idle' }, s.idle);
        this.set({ state: 'waiting' }, s.waiting);
      },
    });
    // Depth and age are read from the jobs table: they describe the whole cluster, not this node.
    const queue = async () => {
      if (!sources.db) return [];
      return sources.db
        .selectFrom('jobs')
        .select((eb) => ['task', eb.fn.countAll<number>().as('n'), eb.fn.min('run_at').as('oldest')])
        .where('status', '=', 'queued')
        .groupBy('task')
        .execute();
    };
    let pending: Promise<Awaited<ReturnType<typeof queue>>> | null = null;
    const once = () => (pending ??= queue().finally(() => setTimeout(() => (pending = null), 0)));
    new Gauge({
      name: 'cubby_job_queue_depth',
      help: 'Queued jobs by task (due or scheduled)',
      labelNames: ['task'] as const,
      registers: [this.registry],
      async collect() {
        this.reset();
        for (const r of await once()) this.set({ task: r.task }, Number(r.n));
      },
    });
    new Gauge({
      name: 'cubby_job_queue_oldest_age_seconds',
      help: 'Age of the oldest queued job by task, counted from when it was due (0 when not yet due)',
      labelNames: ['task'] as const,
      registers: [this.registry],
      async collect() {
        this.reset();
        const now = Date.now();
        for (const r of await once()) this.set({ task: r.task }, Math.max(0, (now - Date.parse(String(r.oldest))) / 1000));
      },
    });
  }
}
