import type { CompiledQuery, Kysely } from 'kysely';
import type { AppDeps } from '../context.ts';
import type { DB, EventsTable } from '../db/schema.ts';
import { newId } from '../ids.ts';
import { iso } from '../time.ts';
import { compiledInsert } from '../db/compiled-query.ts';
import { publishEvents } from './publish.ts';

export interface NewEvent {
  type: 'email.received';
  accountId: string;
  mailboxId: string;
  at: Date;
  /** The `data` object of the webhook body (COMPAT.md): ids and counts only, never content. */
  data: Record<string, unknown>;
}

/** The stored event, its payload being the webhook body `{id, type, created_at, data}`. */
export function eventRow(e: NewEvent): EventsTable {
  const id = newId('evt');
  const body = { id, type: e.type, created_at: iso(e.at), data: e.data };
  return { id, type: e.type, account_id: e.accountId, mailbox_id: e.mailboxId, payload: JSON.stringify(body), created_at: iso(e.at) };
}

/**
 * Records events in the transaction of the change they report (the outbox): webhook deliveries
 * and the live channel read them after commit, so nothing is announced that did not happen.
 * One call per transaction with all of its events (a group commit stores many emails at once).
 */
const INSERT_EVENTS = compiledInsert('events');

export async function recordEvents(deps: AppDeps, trx: Kysely<DB>, rows: EventsTable[]): Promise<void> {
  if (!rows.length) return;
  for (const insert of eventInserts(trx, rows)) await trx.executeQuery(insert);
  await publishEvents(deps, trx, rows);
}

/** The inserts of these events' rows, for a write batch; `publishEvents` must follow them. */
export function eventInserts(db: Kysely<DB>, rows: EventsTable[]): CompiledQuery[] {
  return INSERT_EVENTS.compileChunks(db, rows);
}

/** One event; see recordEvents. */
export async function recordEvent(deps: AppDeps, trx: Kysely<DB>, e: NewEvent): Promise<string> {
  const row = eventRow(e);
  await recordEvents(deps, trx, [row]);
  return row.id;
}
