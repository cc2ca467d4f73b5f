import type { Config } from '../config.ts';
import { inspectDatabase } from '../db/database.ts';

/**
 * Why an operator command must not run against the configured database, or null when it may: a
 * missing or empty database means the command was run with other CUBBY_* settings than the server
 * (another directory, another schema), and opening it would create a new, empty one beside the real.
 */
export async function missingDatabaseMessage(cfg: Config): Promise<string | null> {
  const state = await inspectDatabase(cfg.databaseUrl, cfg.databaseSchema).catch((err: unknown) => err as Error);
  if (state instanceof Error) return `cannot reach the database: ${state.message}`;
  if (state.state === 'ready') return null;
  return `no Cubby database at ${state.where} (${state.state === 'missing' ? 'it does not exist' : 'it is empty'}): run admin commands with the same CUBBY_* settings as \`cubby serve\` (CUBBY_DATA_DIR=${cfg.dataDir}), or start the server once to create the database`;
}
