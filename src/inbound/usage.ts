import type { Kysely } from 'kysely';
import type { DB } from '../db/schema.ts';
import type { Dialect } from '../db/database.ts';

/** The UTC month a receipt counts in, e.g. `2026-11`. */
export function usagePeriod(at: Date): string {
  return at.toISOString().slice(0, 7);
}

/** Counts `count` received messages of `bytes` in total for each scope (a mailbox id, a billing group id). */
export async function addReceivedUsage(trx: Kysely<DB>, _dialect: Dialect, scopes: string[], at: Date, bytes: number, count = 1): Promise<void> {
  const period = usagePeriod(at);
  for (const scope_id of scopes) {
    await trx
      .insertInto('received_usage')
      .values({ scope_id, period, count, bytes })
      .onConflict((oc) => oc.columns(['scope_id', 'period']).doUpdateSet((eb) => ({ count: eb('received_usage.count', '+', count), bytes: eb('received_usage.bytes', '+', bytes) })))
      .execute();
  }
}

export async function receivedUsage(db: Kysely<DB>, scopeId: string, at: Date): Promise<{ count: number; bytes: number }> {
  const row = await db.selectFrom('received_usage').select(['count', 'bytes']).where('scope_id', '=', scopeId).where('period', '=', usagePeriod(at)).executeTakeFirst();
  return { count: Number(row?.count ?? 0), bytes: Number(row?.bytes ?? 0) };
}
