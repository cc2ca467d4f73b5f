import type { Kysely } from 'kysely';
import type { AppDeps } from '../context.ts';
import type { DB } from '../db/schema.ts';
import { newId } from '../ids.ts';
import { iso } from '../time.ts';

export interface NewEvent {
  type: 'email.received';
  accountId: string;
  mailboxId: string;
  at: Date;
  /** The `data` object of the webhook body (COMPAT.md): ids and counts only, never content. */
  data: Record<string, unknown>;
}

/**
 * Records an event in the transaction of the change it reports (the outbox): webhook deliveries
 * and the live channel read it after commit, so nothing is announced that did not happen.
 */
export async function recordEvent(_deps: AppDeps, trx: Kysely<DB>, e: NewEvent): Promise<string> {
  const id = newId('evt');
  const body = { id, type: e.type, created_at: iso(e.at), data: e.data };
  await trx.insertInto('events').values({ id, type: e.type, account_id: e.accountId, mailbox_id: e.mailboxId, payload: JSON.stringify(body), created_at: iso(e.at) }).execute();
  return id;
}
