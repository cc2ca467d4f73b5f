import type { TestApp } from './harness.ts';
import { eventRow, recordEvents } from '../src/events/events.ts';

/**
 * Records an `email.received` event for `eml_rolledback` in a transaction that then rolls back,
 * and one for `eml_committed` in a transaction that commits: subscribers must see only the second.
 */
export async function rolledBackThenCommitted(app: TestApp, accountId: string, mailboxId: string): Promise<void> {
  const deps = app.started.deps;
  const event = (emailId: string) =>
    eventRow({ type: 'email.received', accountId, mailboxId, at: deps.now(), data: { account_id: accountId, mailbox_id: mailboxId, email_id: emailId, received_at: deps.now().toISOString(), attachment_count: 0 } });
  await deps.db
    .transaction()
    .execute(async (trx) => {
      await recordEvents(deps, trx, [event('eml_rolledback')]);
      throw new Error('roll back');
    })
    .catch(() => undefined);
  await deps.db.transaction().execute((trx) => recordEvents(deps, trx, [event('eml_committed')]));
}
