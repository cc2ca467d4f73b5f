import { CompiledQuery, SqliteDialect, SqliteDriver, type DatabaseConnection, type Driver, type SqliteDialectConfig } from 'kysely';

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

class ImmediateSqliteDriver extends SqliteDriver {
  override async beginTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(BEGIN_IMMEDIATE);
  }
}

/** SqliteDialect whose transactions begin with BEGIN IMMEDIATE. */
export class ImmediateSqliteDialect extends SqliteDialect {
  readonly #config: SqliteDialectConfig;

  constructor(config: SqliteDialectConfig) {
    super(config);
    this.#config = config;
  }

  override createDriver(): Driver {
    return new ImmediateSqliteDriver(this.#config);
  }
}
