import type { Kysely } from 'kysely';
import type { DB } from '../db/schema.ts';
import type { Dialect } from '../db/database.ts';
import { compiledQuery } from '../db/compiled-query.ts';

/** The UTC month a receipt counts in, e.g. `2026-11`. */
export function usagePeriod(at: Date): string {
  return at.toISOString().slice(0, 7);
}

/** Counts `count` received messages of `bytes` in total for each scope (a mailbox id, a billing group id). */
export async function addReceivedUsage(trx: Kysely<DB>, _dialect: Dialect, scopes: string[], at: Date, bytes: number, count = 1): Promise<void> {
  const period = usagePeriod(at);
  for (const scope_id of scopes) await ADD_USAGE.execute(trx, scope_id, period, count, bytes);
}

// Both run for every received message (built once: src/db/compiled-query.ts).
const ADD_USAGE = compiledQuery(
  (db, scope_id: string, period: string, count: number, bytes: number) =>
    db
      .insertInto('received_usage')
      .values({ scope_id, period, count, bytes })
      .onConflict((oc) => oc.columns(['scope_id', 'period']).doUpdateSet((eb) => ({ count: eb('received_usage.count', '+', count), bytes: eb('received_usage.bytes', '+', bytes) }))),
  4,
);
const USAGE = compiledQuery((db, scopeId: string, period: string) => db.selectFrom('received_usage').select(['count', 'bytes']).where('scope_id', '=', scopeId).where('period', '=', period), 2);

export async function receivedUsage(db: Kysely<DB>, scopeId: string, at: Date): Promise<{ count: number; bytes: number }> {
  const row = await USAGE.executeTakeFirst(db, scopeId, usagePeriod(at));
  return { count: Number(row?.count ?? 0), bytes: Number(row?.bytes ?? 0) };
}
