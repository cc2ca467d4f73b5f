import type { RequestCtx } from '../context.ts';
import { AppError } from '../errors.ts';
import { assertEmailFileReadable } from '../emails/withheld.ts';

/** Files per sent email, and their total size: what common mail servers accept (25 MiB before encoding). */
export const MAX_ATTACHMENTS = 20;
export const MAX_ATTACHMENT_BYTES = 25 * 1024 * 1024;

export interface LoadedAttachment {
  fileId: string;
  filename: string;
  contentType: string;
  sha256: string;
  byteSize: number;
  content: Buffer;
}

/**
 * `attachment_ids`: current files of this mailbox (any folder, including attachments of received
 * mail the credential may read). A missing, deleted or foreign id is EMAIL_ATTACHMENT_NOT_FOUND;
 * too many or too large together is EMAIL_ATTACHMENTS_TOO_LARGE.
 */
export async function loadAttachments(ctx: RequestCtx, mailboxId: string, ids: string[]): Promise<LoadedAttachment[]> {
  const wanted = [...new Set(ids)];
  if (!wanted.length) return [];
  if (wanted.length > MAX_ATTACHMENTS) throw new AppError('EMAIL_ATTACHMENTS_TOO_LARGE', `At most ${MAX_ATTACHMENTS} attachments.`, { count: wanted.length, max: MAX_ATTACHMENTS });
  const rows = await ctx.db
    .selectFrom('files')
    .innerJoin('file_versions', 'file_versions.id', 'files.current_version_id')
    .select(['files.id', 'files.basename', 'files.path', 'file_versions.mime_type', 'file_versions.sha256', 'file_versions.byte_size', 'file_versions.deleted'])
    .where('files.mailbox_id', '=', mailboxId)
    .where('files.id', 'in', wanted.filter((id) => /^df_[A-Za-z0-9]{1,64}$/.test(id)))
    .where('files.deleted_at', 'is', null)
    .execute();
  const byId = new Map(rows.flatMap((r) => (r.deleted || !r.sha256 ? [] : [[r.id, { ...r, sha256: r.sha256 }] as const])));
  let total = 0;
  for (const id of wanted) {
    const r = byId.get(id);
    if (!r) throw new AppError('EMAIL_ATTACHMENT_NOT_FOUND', `No current file ${id} in this mailbox.`, { attachment_id: id, field: 'attachment_ids' });
    await assertEmailFileReadable(ctx, mailboxId, r.path);
    total += Number(r.byte_size);
  }
  if (total > MAX_ATTACHMENT_BYTES) throw new AppError('EMAIL_ATTACHMENTS_TOO_LARGE', undefined, { byte_size: total, max_bytes: MAX_ATTACHMENT_BYTES });
  const out: LoadedAttachment[] = [];
  for (const id of wanted) {
    const r = byId.get(id)!;
    const chunks: Buffer[] = [];
    for await (const c of await ctx.blobs.read(r.sha256)) chunks.push(c as Buffer);
    out.push({ fileId: r.id, filename: r.basename, contentType: r.mime_type, sha256: r.sha256, byteSize: Number(r.byte_size), content: Buffer.concat(chunks) });
  }
  return out;
}
