import type { Kysely } from 'kysely';
import type { DB, EmailsTable } from '../db/schema.ts';

/**
 * Finds the conversation a message joins: that of the earliest email it refers to by Message-ID,
 * or that shares its thread root (first References id, else In-Reply-To, else its own Message-ID);
 * null when it starts one. Emails stored earlier in the same transaction are remembered here, so a
 * reply in the same group commit as its parent still joins it.
 */
export class ConversationIndex {
  private readonly recent: Pick<EmailsTable, 'mailbox_id' | 'message_id' | 'thread_key' | 'conversation_id'>[] = [];

  constructor(private readonly trx: Kysely<DB>) {}

  remember(row: Pick<EmailsTable, 'mailbox_id' | 'message_id' | 'thread_key' | 'conversation_id'>): void {
    this.recent.push(row);
  }

  async find(mailboxId: string, threadKey: string | null, refs: string[]): Promise<string | null> {
    if (!threadKey && !refs.length) return null;
    const stored = await this.trx
      .selectFrom('emails')
      .select('conversation_id')
      .where('mailbox_id', '=', mailboxId)
      .where((eb) => {
        const ors = [];
        if (refs.length) ors.push(eb('message_id', 'in', refs.slice(0, 200)));
        if (threadKey) ors.push(eb('thread_key', '=', threadKey), eb('message_id', '=', threadKey));
        return eb.or(ors);
      })
      .orderBy('seq', 'asc')
      .limit(1)
      .executeTakeFirst();
    if (stored) return stored.conversation_id;
    const hit = this.recent.find((r) => r.mailbox_id === mailboxId && ((r.message_id !== null && (refs.includes(r.message_id) || r.message_id === threadKey)) || (threadKey !== null && r.thread_key === threadKey)));
    return hit?.conversation_id ?? null;
  }
}
