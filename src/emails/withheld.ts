import { sql, type ExpressionBuilder, type SqlBool, type Expression } from 'kysely';
import type { RequestCtx } from '../context.ts';
import type { DB, EmailsTable } from '../db/schema.ts';
import { AppError } from '../errors.ts';
import { labelRetryAfterSeconds } from '../labels/labeler.ts';
import { isJunk, labelingPending, viewerOf } from './emails.present.ts';

// The withheld rule reaches past the emails API: a withheld email's files under `_email/…/<id>/`
// must not leak through the files API either (list, get, by_path, download, copy, versions).

const EMAIL_FOLDER = /^_email\/\d{4}\/\d{2}\/\d{2}\/(eml_[A-Za-z0-9]+)(?:\/|$)/;

/** Pending → 503 EMAIL_LABELING_PENDING with Retry-After; Junk → 403 EMAIL_WITHHELD (API keys only). */
export function assertEmailContentReadable(ctx: Pick<RequestCtx, 'actor' | 'now'>, email: Pick<EmailsTable, 'id' | 'labeling' | 'label' | 'received_at'>): void {
  if (!viewerOf(ctx).apiKey) return;
  if (labelingPending(email)) {
    throw new AppError('EMAIL_LABELING_PENDING', undefined, { email_id: email.id, retry_after: labelRetryAfterSeconds(email as EmailsTable, ctx.now()) });
  }
  if (isJunk(email)) throw new AppError('EMAIL_WITHHELD', undefined, { email_id: email.id });
}

/** For a file path: when it belongs to a received email, that email's content rule applies. */
export async function assertEmailFileReadable(ctx: RequestCtx, mailboxId: string, path: string): Promise<void> {
  if (!viewerOf(ctx).apiKey) return;
  const id = EMAIL_FOLDER.exec(path)?.[1];
  if (!id) return;
  const email = await ctx.db.selectFrom('emails').selectAll().where('id', '=', id).where('mailbox_id', '=', mailboxId).executeTakeFirst();
  if (email) assertEmailContentReadable(ctx, email);
}

/** A files-list condition that leaves out the files of withheld emails (use for API keys only). */
export function notWithheldEmailFile(eb: ExpressionBuilder<DB, 'files'>): Expression<SqlBool> {
  return eb.not(
    eb.exists(
      eb
        .selectFrom('emails')
        .select('emails.id')
        .whereRef('emails.mailbox_id', '=', 'files.mailbox_id')
        .where((w) => w.or([w('emails.labeling', '=', 'pending'), w('emails.label', '=', 'Junk')]))
        .where((w) => w.or([w('files.folder', '=', w.ref('emails.directory')), w('files.folder', '=', sql<string>`emails.directory || '/attachments'`)])),
    ),
  );
}
