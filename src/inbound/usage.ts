import type { CompiledQuery, Kysely } from 'kysely';
import type { DB } from '../db/schema.ts';
import { compiledInsert, compiledQuery } from '../db/compiled-query.ts';

/** The UTC month a receipt counts in, e.g. `2026-11`. */
export function usagePeriod(at: Date): string {
  return at.toISOString().slice(0, 7);
}

// Run for every received message (built once: src/db/compiled-query.ts).
const ADD_USAGE_RETURNING = compiledInsert('received_usage', (qb) =>
  qb
    .onConflict((oc: any) => oc.columns(['scope_id', 'period']).doUpdateSet((eb: any) => ({ count: eb('received_usage.count', '+', eb.ref('excluded.count')), bytes: eb('received_usage.bytes', '+', eb.ref('excluded.bytes')) })))
    .returning(['scope_id', 'count', 'bytes']),
);

/**
 * One statement that counts received messages for several scopes and answers each scope's new
 * totals for the month (`scope_id`, `count`, `bytes`), for a write batch. Scopes go in sorted
 * order: on Postgres each row is locked as it is upserted, and two transactions taking the same
 * rows in opposite orders would deadlock.
 */
export function receivedUsageUpsert(db: Kysely<DB>, at: Date, added: Map<string, { count: number; bytes: number }>): CompiledQuery | null {
  if (!added.size) return null;
  const period = usagePeriod(at);
  const rows = [...added.keys()].sort().map((scope_id) => ({ scope_id, period, count: added.get(scope_id)!.count, bytes: added.get(scope_id)!.bytes }));
  return ADD_USAGE_RETURNING.compile(db, rows);
}

const USAGE = compiledQuery((db, scopeId: string, period: string) => db.selectFrom('received_usage').select(['count', 'bytes']).where('scope_id', '=', scopeId).where('period', '=', period), 2);

export async function receivedUsage(db: Kysely<DB>, scopeId: string, at: Date): Promise<{ count: number; bytes: number }> {
  const row = await USAGE.executeTakeFirst(db, scopeId, usagePeriod(at));
  return { count: Number(row?.count ?? 0), bytes: Number(row?.bytes ?? 0) };
}
