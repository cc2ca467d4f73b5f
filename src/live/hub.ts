import pg from 'pg';
import { sql, type CompiledQuery, type Kysely } from 'kysely';
import type { DB, EventsTable } from '../db/schema.ts';
import type { Dialect } from '../db/database.ts';
import { randomToken } from '../ids.ts';
import { iso } from '../time.ts';
import { checkLiveAccess } from './access.ts';
import type { CableConnection, LiveLimits } from './cable.ts';

// The live fan-out of one node: which open connections listen to which mailbox, and how committed
// events reach them. Events are announced inside the transaction that records them; only a
// commit makes them visible:
// - Postgres: pg_notify on a channel per database schema, carrying the event bodies. Postgres
//   delivers a NOTIFY at commit and never for a rolled-back transaction, to every node's LISTEN
//   connection (this node's too), so mail stored by any node reaches sockets on all of them.
// - SQLite (one node): the announcement is kept in memory and confirmed after the transaction
//   ends: the confirming read goes through the same single connection, which the transaction holds
//   until it commits or rolls back, so it only finds the events of a committed transaction.

export interface LiveSettings extends LiveLimits {
  pingMs: number;
  /** How often open connections re-check their key and mailbox access. */
  accessCheckMs: number;
  maxConnectionsPerKey: number;
}

export const DEFAULT_LIVE_SETTINGS: LiveSettings = {
  pingMs: 3000,
  accessCheckMs: 3000,
  maxSubscriptions: 5,
  maxConnectionsPerKey: 20,
  maxCommandBytes: 4096,
  commandBurst: 20,
  commandsPerSecond: 2,
  maxBufferedBytes: 1024 * 1024,
};

/** A connection row older than this no longer counts (its node stopped refreshing it). */
const CONNECTION_STALE_MS = 60_000;
const HEARTBEAT_MS = 15_000;
/** pg_notify payloads must stay under 8000 bytes. */
const NOTIFY_MAX = 7000;

export function liveChannel(schema: string | undefined): string {
  return `cubby_live_${schema ?? 'public'}`;
}

/** Called inside the recording transaction: makes the events reach live subscribers after commit. */
export async function announceLive(db: Kysely<DB>, dialect: Dialect, schema: string | undefined, hub: LiveHub | undefined, rows: EventsTable[]): Promise<void> {
  for (const q of liveAnnouncements(db, dialect, schema, hub, rows)) await db.executeQuery(q);
}

/**
 * The same as statements to run in the transaction, for a write batch (as calls: src/db/write-batch.ts):
 * the NOTIFYs on Postgres; none on SQLite, where the push is arranged here, for after the commit.
 */
export function liveAnnouncements(db: Kysely<DB>, dialect: Dialect, schema: string | undefined, hub: LiveHub | undefined, rows: EventsTable[]): CompiledQuery[] {
  if (!rows.length) return [];
  if (dialect !== 'postgres') {
    hub?.afterCommit(rows);
    return [];
  }
  const out: CompiledQuery[] = [];
  let chunk: string[] = [];
  let size = 2;
  const flush = () => {
    if (chunk.length) out.push(sql`select pg_notify(${liveChannel(schema)}, ${`[${chunk.join(',')}]`})`.compile(db));
    chunk = [];
    size = 2;
  };
  for (const r of rows) {
    const item = JSON.stringify([r.mailbox_id, r.payload]);
    if (size + item.length > NOTIFY_MAX) flush();
    chunk.push(item);
    size += item.length + 1;
  }
  flush();
  return out;
}

export interface HubOptions {
  db: Kysely<DB>;
  dialect: Dialect;
  now: () => Date;
  log: { error: (obj: unknown, msg: string) => void };
  /** Postgres LISTEN connection (absent on SQLite). */
  listen?: { url: string; schema?: string };
  settings: LiveSettings;
}

export class LiveHub {
  readonly nodeId = `node_${randomToken(12)}`;
  private byMailbox = new Map<string, Set<CableConnection>>();
  private listener: pg.Client | undefined;
  private timers: NodeJS.Timeout[] = [];
  private checking = false;
  private stopped = false;
  /** Connection rows being forgotten (awaited on stop, before the database closes). */
  private removals = new Set<Promise<unknown>>();

  constructor(readonly opts: HubOptions) {}

  get settings(): LiveSettings {
    return this.opts.settings;
  }

  connections(): CableConnection[] {
    return [...this.byMailbox.values()].flatMap((s) => [...s]);
  }

  async start(): Promise<void> {
    this.stopped = false;
    if (this.opts.listen) await this.listen(this.opts.listen);
    const every = (ms: number, fn: () => Promise<void> | void) => {
      const t = setInterval(() => void Promise.resolve(fn()).catch((err) => this.opts.log.error({ err }, 'live housekeeping failed')), ms);
      t.unref();
      this.timers.push(t);
    };
    every(this.settings.pingMs, () => this.ping());
    every(this.settings.accessCheckMs, () => this.checkAccess());
    every(HEARTBEAT_MS, () => this.heartbeat());
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const t of this.timers.splice(0)) clearInterval(t);
    for (const c of this.connections()) c.disconnect('server_restart');
    await this.listener?.end().catch(() => undefined);
    await Promise.all(this.removals);
  }

  /**
   * The LISTEN connection. When it breaks, notifications in the gap are lost, so every local
   * connection is ended (clients take a new ticket and catch up with the email list) and the
   * listener reconnects.
   */
  private async listen(target: { url: string; schema?: string }): Promise<void> {
    const client = new pg.Client({ connectionString: target.url });
    let lost = false;
    const onLost = (err?: unknown) => {
      if (lost || this.stopped) return;
      lost = true;
      this.opts.log.error({ err }, 'live listener lost; reconnecting');
      for (const c of this.connections()) c.disconnect('server_restart');
      void client.end().catch(() => undefined);
      const retry = async () => {
        if (this.stopped) return;
        try {
          await this.listen(target);
        } catch (e) {
          this.opts.log.error({ err: e }, 'live listener reconnect failed');
          setTimeout(() => void retry(), 2000).unref();
        }
      };
      setTimeout(() => void retry(), 1000).unref();
    };
    let listening = false;
    client.on('notification', (n) => this.onNotification(n.payload));
    client.on('error', (err) => listening && onLost(err));
    client.on('end', () => listening && onLost());
    try {
      await client.connect();
      await client.query(`LISTEN "${liveChannel(target.schema)}"`);
    } catch (err) {
      await client.end().catch(() => undefined);
      throw err;
    }
    listening = true;
    this.listener = client;
  }

  add(c: CableConnection): void {
    let set = this.byMailbox.get(c.binding.mailboxId);
    if (!set) this.byMailbox.set(c.binding.mailboxId, (set = new Set()));
    set.add(c);
  }

  /** Forgets a closed connection (also its row, so it stops counting against the key's limit). */
  remove(c: CableConnection): void {
    const set = this.byMailbox.get(c.binding.mailboxId);
    set?.delete(c);
    if (set && !set.size) this.byMailbox.delete(c.binding.mailboxId);
    const p = this.opts.db
      .deleteFrom('live_connections')
      .where('id', '=', c.id)
      .execute()
      .catch((err) => this.opts.log.error({ err }, 'forgetting a live connection failed'))
      .finally(() => this.removals.delete(p));
    this.removals.add(p);
  }

  /** Open connections of a key on all nodes (rows refreshed recently). */
  async countConnections(apiKeyId: string): Promise<number> {
    const row = await this.opts.db
      .selectFrom('live_connections')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('api_key_id', '=', apiKeyId)
      .where('seen_at', '>', iso(this.opts.now().getTime() - CONNECTION_STALE_MS))
      .executeTakeFirst();
    return Number(row?.n ?? 0);
  }

  async register(c: CableConnection): Promise<void> {
    const at = iso(this.opts.now());
    await this.opts.db
      .insertInto('live_connections')
      .values({ id: c.id, api_key_id: c.binding.apiKeyId, mailbox_id: c.binding.mailboxId, node_id: this.nodeId, connected_at: at, seen_at: at })
      .execute();
  }

  /** SQLite: confirm after the transaction that the events were committed, then push them. */
  afterCommit(rows: EventsTable[]): void {
    if (!rows.some((r) => this.byMailbox.has(r.mailbox_id))) return;
    setImmediate(() => {
      this.opts.db
        .selectFrom('events')
        .select('id')
        .where('id', 'in', rows.map((r) => r.id))
        .execute()
        .then((found) => {
          const committed = new Set(found.map((f) => f.id));
          this.deliver(rows.filter((r) => committed.has(r.id)).map((r) => [r.mailbox_id, r.payload]));
        })
        .catch((err) => this.opts.log.error({ err }, 'live fan-out failed'));
    });
  }

  private onNotification(payload: string | undefined): void {
    try {
      this.deliver(JSON.parse(payload ?? '[]'));
    } catch (err) {
      this.opts.log.error({ err }, 'unreadable live notification');
    }
  }

  /** Pushes committed events (mailbox id, webhook body text) to this node's subscribers. */
  deliver(items: [mailboxId: string, body: string][]): void {
    for (const [mailboxId, body] of items) {
      const set = this.byMailbox.get(mailboxId);
      if (set) for (const c of set) c.push(body);
    }
  }

  private ping(): void {
    const frame = JSON.stringify({ type: 'ping', message: Math.floor(Date.now() / 1000) });
    for (const c of this.connections()) c.send(frame);
  }

  /** Ends connections whose key or mailbox access is gone. */
  async checkAccess(): Promise<void> {
    if (this.checking) return;
    this.checking = true;
    try {
      const conns = this.connections();
      if (!conns.length) return;
      const verdicts = await checkLiveAccess(this.opts.db, conns.map((c) => c.binding), this.opts.now());
      conns.forEach((c, i) => {
        if (!verdicts[i]!.ok) c.disconnect('unauthorized');
      });
    } finally {
      this.checking = false;
    }
  }

  private async heartbeat(): Promise<void> {
    const ids = this.connections().map((c) => c.id);
    for (let i = 0; i < ids.length; i += 500) {
      await this.opts.db.updateTable('live_connections').set({ seen_at: iso(this.opts.now()) }).where('id', 'in', ids.slice(i, i + 500)).execute();
    }
  }

  /** Drops connection rows nobody refreshes (a node that died). */
  static async sweep(db: Kysely<DB>, now: Date): Promise<number> {
    const res = await db.deleteFrom('live_connections').where('seen_at', '<', iso(now.getTime() - 5 * CONNECTION_STALE_MS)).executeTakeFirst();
    return Number(res.numDeletedRows);
  }
}
