import { CompiledQuery, sql, type Kysely } from 'kysely';
import type { DB, EmailsTable } from '../db/schema.ts';
import { compiledListQuery } from '../db/compiled-query.ts';
import { PLAN_EACH_TIME } from '../db/pg-prepared.ts';

/** References looked up per message at most (a long thread's References field grows with every reply). */
const MAX_REFS = 200;

/**
 * The earliest email of a mailbox with one of these Message-IDs, or (with a thread key) of that
 * thread: one indexed lookup per kind of key, joined with UNION ALL, and the earliest of what they
 * find. Without table statistics (SQLite has none unless ANALYZE has run) the planner served a
 * `WHERE mailbox_id = ? AND (… OR …) ORDER BY seq LIMIT 1`, and even a single `message_id = ?`,
 * from the (mailbox_id, seq) index, reading the mailbox's emails in order until one matched: for a
 * message that starts a conversation, all of them (38 ms per message at 100,000 emails: npm run
 * bench:conversations). Without a thread key there is one lookup, and a unary plus makes its order
 * an expression that no index provides (sqlite.org/optoverview.html; on Postgres the same number).
 * Built once per dialect and list length.
 */
const byMessageId = (db: Kysely<DB>, ids: string[], mailboxId: string) =>
  db.selectFrom('emails').select(['conversation_id', 'seq']).where('mailbox_id', '=', mailboxId).where('message_id', 'in', ids);
const FIRST_BY_IDS = compiledListQuery((db, ids, mailboxId: string) => byMessageId(db, ids, mailboxId).clearSelect().select('conversation_id').orderBy(sql`+seq`).limit(1), 1);
const FIRST_BY_IDS_OR_THREAD = compiledListQuery((db, ids, mailboxId: string, threadKey: string) => {
  const byThread = db.selectFrom('emails').select(['conversation_id', 'seq']).where('mailbox_id', '=', mailboxId).where('thread_key', '=', threadKey);
  return db.selectFrom(byMessageId(db, ids, mailboxId).unionAll(byThread).as('found')).select('conversation_id').orderBy('seq', 'asc').limit(1);
}, 2);

/**
 * The lookup of the earliest stored email a message refers to (by a Message-ID among its references
 * or its thread key) or that shares its thread key; null when it has neither.
 */
export function conversationLookup(db: Kysely<DB>, mailboxId: string, threadKey: string | null, refs: string[]): CompiledQuery<{ conversation_id: string }> | null {
  if (!threadKey && !refs.length) return null;
  const ids = [...new Set([...refs.slice(0, MAX_REFS), ...(threadKey ? [threadKey] : [])])];
  const q = threadKey ? FIRST_BY_IDS_OR_THREAD.compile(db, ids, mailboxId, threadKey) : FIRST_BY_IDS.compile(db, ids, mailboxId);
  // On Postgres planned with its values each time: a generic plan made while the mailbox was small
  // stayed a sequential scan of emails (src/db/pg-prepared.ts).
  return CompiledQuery.raw(PLAN_EACH_TIME + q.sql, [...q.parameters]) as CompiledQuery<{ conversation_id: string }>;
}

/** One message's conversation lookup (conversationLookup's arguments). */
export interface ConversationKeys {
  mailboxId: string;
  threadKey: string | null;
  refs: string[];
}

/** Bound values per combined lookup statement, well under SQLite's 32,766 and Postgres's 65,535. */
const MAX_COMBINED_PARAMETERS = 4_000;

/**
 * Several messages' lookups as one statement per MAX_COMBINED_PARAMETERS: each lookup as it runs
 * alone, tagged with its position `k` (a row for each lookup that found one). A group commit of
 * real mail (every message has a Message-ID) made one round trip per message inside its
 * transaction, holding its mailboxes' locks meanwhile. Each part keeps its own plan: SQLite runs a
 * subquery with a LIMIT as a coroutine and does not flatten it (test/sqlite-plans.test.ts), and
 * Postgres plans the parts of a UNION ALL apart. The parts' parameters are renumbered for Postgres
 * (`$n`); Kysely's SQL holds no other `$` followed by a digit.
 */
export function conversationLookups(db: Kysely<DB>, keys: ConversationKeys[]): CompiledQuery<{ k: number; conversation_id: string }>[] {
  const statements: CompiledQuery<{ k: number; conversation_id: string }>[] = [];
  let parts: string[] = [];
  let parameters: unknown[] = [];
  const flush = () => {
    if (parts.length) statements.push(CompiledQuery.raw(PLAN_EACH_TIME + parts.join(' union all '), parameters) as CompiledQuery<{ k: number; conversation_id: string }>);
    parts = [];
    parameters = [];
  };
  for (const [k, key] of keys.entries()) {
    const one = conversationLookup(db, key.mailboxId, key.threadKey, key.refs);
    if (!one) continue;
    if (parameters.length && parameters.length + one.parameters.length > MAX_COMBINED_PARAMETERS) flush();
    const offset = parameters.length;
    const text = one.sql.slice(PLAN_EACH_TIME.length).replace(/\$(\d+)/g, (_, n: string) => `$${Number(n) + offset}`);
    parts.push(`select ${k} as k, conversation_id from (${text}) as c${k}`);
    parameters.push(...one.parameters);
  }
  flush();
  return statements;
}

/**
 * Finds the conversation a message joins: that of the earliest email it refers to by Message-ID,
 * or that shares its thread root (first References id, else In-Reply-To, else its own Message-ID);
 * null when it starts one. Emails stored earlier in the same transaction are remembered here, so a
 * reply in the same group commit as its parent still joins it.
 */
export class ConversationIndex {
  private readonly recent: Pick<EmailsTable, 'mailbox_id' | 'message_id' | 'thread_key' | 'conversation_id'>[] = [];
  /** What `lookUpAll` found, by lookupKey: the stored conversation, or null when none. */
  private readonly stored = new Map<string, string | null>();

  constructor(private readonly trx: Kysely<DB>) {}

  /**
   * Looks up the stored conversations of these messages together, before `find` is asked for each
   * (the group commit writes its rows at the end, so no lookup can see another's message).
   */
  async lookUpAll(keys: ConversationKeys[]): Promise<void> {
    const wanted = keys.filter((key) => key.threadKey !== null || key.refs.length > 0);
    for (const key of wanted) this.stored.set(lookupKey(key), null);
    for (const statement of conversationLookups(this.trx, wanted)) {
      for (const row of (await this.trx.executeQuery(statement)).rows) this.stored.set(lookupKey(wanted[Number(row.k)]!), row.conversation_id);
    }
  }

  remember(row: Pick<EmailsTable, 'mailbox_id' | 'message_id' | 'thread_key' | 'conversation_id'>): void {
    this.recent.push(row);
  }

  async find(mailboxId: string, threadKey: string | null, refs: string[]): Promise<string | null> {
    const key = lookupKey({ mailboxId, threadKey, refs });
    let stored = this.stored.get(key);
    if (stored === undefined) {
      const lookup = conversationLookup(this.trx, mailboxId, threadKey, refs);
      if (!lookup) return null;
      stored = (await this.trx.executeQuery(lookup)).rows[0]?.conversation_id ?? null;
    }
    if (stored) return stored;
    const hit = this.recent.find((r) => r.mailbox_id === mailboxId && ((r.message_id !== null && (refs.includes(r.message_id) || r.message_id === threadKey)) || (threadKey !== null && r.thread_key === threadKey)));
    return hit?.conversation_id ?? null;
  }
}

/** One lookup's arguments as a map key (NUL never appears in a Message-ID, an id or a thread key). */
function lookupKey(key: ConversationKeys): string {
  return `${key.mailboxId}\0${key.threadKey === null ? '\u0001' : key.threadKey}\0${key.refs.join('\0')}`;
}
