import type { Kysely } from 'kysely';
import type { AppDeps } from '../context.ts';
import type { DB, EventsTable } from '../db/schema.ts';
import { queueWebhookDeliveries } from '../webhooks/outbox.ts';
import { announceLive } from '../live/hub.ts';

/**
 * What recording events sets in motion, inside the same transaction: webhook deliveries (rows and
 * jobs) and the live announcement (a NOTIFY on Postgres, delivered at commit; on SQLite a push
 * confirmed after the transaction ends). A rolled-back transaction leaves no trace of either. The
 * inbound group commit (src/inbound/store.ts) does the same in fewer statements: it reads the
 * webhooks with its blob inserts and sends the NOTIFYs with its other writes.
 */
export async function publishEvents(deps: AppDeps, trx: Kysely<DB>, rows: EventsTable[]): Promise<void> {
  await queueWebhookDeliveries(deps, trx, rows);
  await announceLive(trx, deps.dialect, deps.config.databaseSchema, deps.events?.live ?? undefined, rows);
}
