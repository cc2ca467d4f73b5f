import { CompiledQuery, SqliteDialect, SqliteDriver, type DatabaseConnection, type Driver, type QueryResult, type SqliteDialectConfig } from 'kysely';
import type { WriteGate } from './write-gate.ts';

// Kysely begins SQLite transactions with a plain (deferred) BEGIN: the transaction takes the write
// lock at its first write. Most of ours read first. Between that read and the write, the checkpoint
// thread (src/db/checkpointer.ts) may start a RESTART checkpoint: it holds the write lock and waits
// for the readers of the WAL, this transaction among them. SQLite cannot let the reader wait for
// the writer that waits for it, so the transaction's first write fails at once with SQLITE_BUSY
// (its busy_timeout is not consulted) and the request with it: 500 INTERNAL in an upload of 20,000
// files, about 300 times a second in a loop of such transactions. BEGIN IMMEDIATE takes the write
// lock first, waiting in the busy handler like any write; the app has one connection, whose
// transactions run one at a time anyway, so nothing else waits longer.
const BEGIN_IMMEDIATE = CompiledQuery.raw('begin immediate');

export interface GatedSqliteDialectConfig extends SqliteDialectConfig {
  /**
   * Closed while the checkpoint thread holds the write lock (src/db/write-gate.ts): a transaction,
   * or a write outside one, waits for it to open before it asks SQLite for the lock. It waits
   * holding the connection (Kysely hands it out before the first statement), so queries queued
   * behind it wait too; the group commit waits before it takes the connection (durable-commit.ts).
   */
  writeGate?: WriteGate;
  /** Whether the connection is inside a transaction (which holds the write lock already). */
  inTransaction: () => boolean;
}

class ImmediateSqliteDriver extends SqliteDriver {
  #gated: GatedConnection | undefined;

  constructor(private readonly gateConfig: GatedSqliteDialectConfig) {
    super(gateConfig);
  }

  override async acquireConnection(): Promise<DatabaseConnection> {
    const connection = await super.acquireConnection();
    const gate = this.gateConfig.writeGate;
    if (!gate) return connection;
    this.#gated ??= new GatedConnection(connection, gate, this.gateConfig.inTransaction);
    return this.#gated;
  }

  override async beginTransaction(connection: DatabaseConnection): Promise<void> {
    await this.gateConfig.writeGate?.whenOpen();
    await connection.executeQuery(BEGIN_IMMEDIATE);
  }
}

/** The one connection, whose writes outside a transaction wait while the write gate is closed. */
class GatedConnection implements DatabaseConnection {
  constructor(
    private readonly connection: DatabaseConnection,
    private readonly gate: WriteGate,
    private readonly inTransaction: () => boolean,
  ) {}

  executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    if (!this.gate.closed || this.inTransaction() || isRead(query)) return this.connection.executeQuery(query);
    return this.gate.whenOpen().then(() => this.connection.executeQuery(query));
  }

  streamQuery<R>(query: CompiledQuery, chunkSize?: number): AsyncIterableIterator<QueryResult<R>> {
    return this.connection.streamQuery(query, chunkSize); // selects only (Kysely's SQLite driver)
  }
}

/** Statements that take no write lock; anything else counts as a write (waiting costs it little). */
function isRead(query: CompiledQuery): boolean {
  return query.query.kind === 'SelectQueryNode' || /^\s*(select|pragma|explain)\b/i.test(query.sql);
}

/** SqliteDialect whose transactions begin with BEGIN IMMEDIATE, and whose writes mind the write gate. */
export class ImmediateSqliteDialect extends SqliteDialect {
  readonly #config: GatedSqliteDialectConfig;

  constructor(config: GatedSqliteDialectConfig) {
    super(config);
    this.#config = config;
  }

  override createDriver(): Driver {
    return new ImmediateSqliteDriver(this.#config);
  }
}
