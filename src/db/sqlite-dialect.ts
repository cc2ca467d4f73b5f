import { CompiledQuery, SqliteDialect, SqliteDriver, type DatabaseConnection, type Driver, type SqliteDialectConfig } from 'kysely';
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
   * Closed while the checkpoint thread holds the write lock (src/db/write-gate.ts). Whoever takes
   * the one connection waits for it first, asynchronously, so no statement reaches SQLite's busy
   * handler (which sleeps the event loop) while a RESTART runs. Reads wait too: a RESTART takes a
   * few milliseconds every few seconds, and one rule in one place is worth more than those.
   */
  writeGate?: WriteGate;
}

class ImmediateSqliteDriver extends SqliteDriver {
  constructor(private readonly writeGate: WriteGate | undefined, config: SqliteDialectConfig) {
    super(config);
  }

  override async acquireConnection(): Promise<DatabaseConnection> {
    const connection = await super.acquireConnection();
    // Waited with the connection held, just before its holder's first statement: anything queued
    // behind it would wait for the gate anyway.
    await this.writeGate?.whenOpen();
    return connection;
  }

  override async beginTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(BEGIN_IMMEDIATE);
  }
}

/** SqliteDialect whose transactions begin with BEGIN IMMEDIATE, and whose connection minds the write gate. */
export class ImmediateSqliteDialect extends SqliteDialect {
  readonly #config: GatedSqliteDialectConfig;

  constructor(config: GatedSqliteDialectConfig) {
    super(config);
    this.#config = config;
  }

  override createDriver(): Driver {
    return new ImmediateSqliteDriver(this.#config.writeGate, this.#config);
  }
}
