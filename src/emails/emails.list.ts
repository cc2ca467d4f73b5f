import { sql, type SqlBool } from 'kysely';
import type { EmailsTable } from '../db/schema.ts';
import type { RequestCtx } from '../context.ts';
import { decodeCursor, toPage } from '../http/cursor.ts';
import { invalidArgument } from '../errors.ts';
import { iso } from '../time.ts';
import { loadMailbox } from '../mailboxes/mailboxes.service.ts';
import { viewerOf } from './emails.present.ts';
import { parseQuery } from '../search/query.ts';
import { emailFilterConditions, emailIdCondition } from '../search/search.service.ts';

// The email list. It keys on `seq`, the per-mailbox arrival order assigned under the mailbox row
// lock (so arrival order is commit order): with `order=asc` a saved cursor returns exactly the mail
// that arrived after it. Every page carries a cursor, an empty one too (it keeps the position it
// was given), so that polling can go on. Default order: newest first.

export interface ListEmailsInput {
  accountId?: string | null;
  mailboxId: string;
  limit: number;
  cursor?: string;
  order?: 'asc' | 'desc';
  direction?: 'received' | 'sent' | 'all';
  sender?: string;
  subject?: string;
  receivedAfter?: string;
  receivedBefore?: string;
  read?: boolean;
  hasAttachments?: boolean;
  conversationId?: string;
  /** Search syntax (src/search/query.ts); combines with every other filter. */
  q?: string;
}

/** A date-time filter as the stored ISO text (UTC, milliseconds), which compares correctly as text. */
function instant(field: string, value: string | undefined): string | null {
  if (value === undefined) return null;
  const ms = Date.parse(value);
  // Date-times only: a bare date or a time without zone would be read in some zone we cannot know.
  if (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})$/i.test(value.trim()) || !Number.isFinite(ms)) {
    throw invalidArgument(field, 'must be an ISO 8601 date-time with a zone, e.g. 2025-01-31T12:00:00Z');
  }
  return iso(ms);
}

const likePattern = (text: string) => `%${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;

export async function listEmails(ctx: RequestCtx, input: ListEmailsInput) {
  const { mailbox } = await loadMailbox(ctx, input.accountId, input.mailboxId, 'read');
  const order = input.order ?? 'desc';
  const direction = input.direction ?? 'received';
  const sender = input.sender?.trim().toLowerCase() || null;
  const subject = input.subject?.toLowerCase() || null;
  const after = instant('received_after', input.receivedAfter);
  const before = instant('received_before', input.receivedBefore);
  const q = input.q?.trim() ? input.q.trim() : null;
  const parsed = q ? parseQuery(q, { allowFilterOnly: true }) : null;
  // Everything that decides which rows a page holds is bound into the cursor; include_storage
  // only changes how rows look and is not.
  const filters = {
    mailbox: mailbox.id,
    order,
    direction,
    sender,
    subject,
    after,
    before,
    read: input.read ?? null,
    has_attachments: input.hasAttachments ?? null,
    conversation: input.conversationId ?? null,
    ...(q ? { q } : {}),
  };

  let query = ctx.db.selectFrom('emails').selectAll().where('mailbox_id', '=', mailbox.id);
  if (direction !== 'all') query = query.where('direction', '=', direction);
  if (sender) query = query.where('sender_address', '=', sender);
  if (subject) query = query.where(sql<SqlBool>`subject_search like ${likePattern(subject)} escape '\\'`);
  if (after) query = query.where('received_at', '>', after);
  if (before) query = query.where('received_at', '<', before);
  if (input.read !== undefined) query = query.where('read_at', input.read ? 'is not' : 'is', null);
  if (input.hasAttachments !== undefined) query = query.where('attachment_count', input.hasAttachments ? '>' : '=', 0);
  if (input.conversationId !== undefined) query = query.where('conversation_id', '=', input.conversationId);
  if (parsed) {
    const match = emailIdCondition(ctx, parsed, mailbox.id);
    if (match) query = query.where(match);
    for (const c of emailFilterConditions(parsed)) query = query.where(c);
  }
  // `sender`, `subject` and `q` search content that API keys may not see on withheld mail: matching it
  // would let a key learn a withheld sender or subject by probing. Withheld rows never match them.
  const contentFilter = viewerOf(ctx).apiKey && (sender !== null || subject !== null || q !== null);
  if (contentFilter) query = query.where('labeling', '<>', 'pending').where((eb) => eb.or([eb('label', 'is', null), eb('label', '<>', 'Junk')]));

  let previous: (string | number | null)[] | null = null;
  if (input.cursor) {
    const key = decodeCursor(ctx.secret, input.cursor, 'emails', filters);
    // [] is the position before the first email (the cursor of an empty first page).
    if (key.length > 1 || (key.length === 1 && !Number.isSafeInteger(key[0]))) throw invalidArgument('cursor', 'is not a cursor returned by this list; start again without it');
    previous = key;
    if (key.length === 1) query = query.where('seq', order === 'asc' ? '>' : '<', Number(key[0]));
  }
  if (contentFilter && order === 'asc') {
    // Polling must not step over mail still being labeled that may match once it is labeled: the
    // page ends before the first pending email after the cursor (whatever its content, so this
    // tells nothing about it), and the saved cursor returns to it once labeling is done.
    let pending = ctx.db.selectFrom('emails').select((eb) => eb.fn.min('seq').as('seq')).where('mailbox_id', '=', mailbox.id).where('labeling', '=', 'pending');
    if (previous?.length === 1) pending = pending.where('seq', '>', Number(previous[0]));
    const first = (await pending.executeTakeFirst())?.seq;
    if (first !== null && first !== undefined) query = query.where('seq', '<', Number(first));
  }
  const rows: EmailsTable[] = await query.orderBy('seq', order).limit(input.limit + 1).execute();
  return toPage(rows, input.limit, (e) => [Number(e.seq)], { secret: ctx.secret, list: 'emails', filters, alwaysCursor: true, previous });
}
