import { sql } from 'kysely';
import type { AppDeps } from '../context.ts';
import { pendingMigrations } from '../db/database.ts';

// GET /readyz: can this node do its work? The database answers, the blob store takes a write,
// and every migration this code knows has run (a node started against a database that a newer
// or older node migrated, or one still migrating, is not ready).

export type Part = 'database' | 'blob_store' | 'migrations';
export interface Readiness {
  status: 'ready' | 'not_ready';
  failing: Part[];
  checks: Record<Part, { ok: boolean; error?: string }>;
}

/** A fixed probe: content-addressed, so every check rewrites the same small blob (a write and a sync). */
const PROBE = Buffer.from('cubby readiness probe\n');
const TIMEOUT_MS = 5_000;

export async function checkReadiness(deps: AppDeps): Promise<Readiness> {
  const [database, blobStore, migrations] = await Promise.all([
    attempt(async () => {
      await sql`select 1`.execute(deps.db);
    }),
    attempt(async () => {
      await deps.blobs.putBuffer(PROBE);
    }),
    attempt(async () => {
      const pending = await pendingMigrations(deps.db, deps.dialect, deps.config.databaseSchema);
      if (pending.length) throw new Error(`not applied: ${pending.join(', ')}`);
    }),
  ]);
  const checks = { database, blob_store: blobStore, migrations };
  const failing = (Object.keys(checks) as Part[]).filter((k) => !checks[k].ok);
  return { status: failing.length ? 'not_ready' : 'ready', failing, checks };
}

async function attempt(fn: () => Promise<void>): Promise<{ ok: boolean; error?: string }> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([fn(), new Promise((_, reject) => (timer = setTimeout(() => reject(new Error(`no answer within ${TIMEOUT_MS / 1000} s`)), TIMEOUT_MS)))]);
    return { ok: true };
  } catch (err) {
    // The operator's view: the driver's message (no credentials are in it), cut short.
    return { ok: false, error: String((err as Error)?.message ?? err).slice(0, 300) };
  } finally {
    clearTimeout(timer);
  }
}
