import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { AppDeps } from '../context.ts';
import { AppError } from '../errors.ts';
import { attachmentDownload, loadEmail, rawDownload, setEmailRead } from '../emails/emails.service.ts';
import { attachmentsOf } from '../emails/emails.present.ts';
import { messagePage, sendPage } from './html.ts';
import { csrfToken, toSignIn } from './session.ts';
import { openMailbox, type OpenedMailbox } from './person-ctx.ts';
import { emailListPage, topLevelEntries } from './mailbox.data.ts';
import { emailPage, mailboxPage } from './mailbox.views.ts';

// The mailbox page (`dashboard_url` of every mailbox and bucket) and the email page. Tenancy is
// loadMailbox's (through openMailbox); a foreign, deleted or missing id answers the same 404.
// Opening an email never marks it read, as in the API; the buttons do.

const ROUTE = { schema: { hide: true }, config: { auth: false } } as const;
const SEQ = /^\d{1,15}$/;
const BUCKET_ID = /^bkt_[A-Za-z0-9]{1,64}$/;

type MailboxParams = { id: string };
type EmailParams = { id: string; email_id: string };

function notFound(reply: FastifyReply, what: 'Mailbox' | 'Email', back = { href: '/', text: 'Back to the dashboard' }) {
  return sendPage(reply, 404, messagePage(`${what} not found`, `There is no such ${what.toLowerCase()}, or you are not a member of its account.`, back));
}

/** The position query (`?before=` / `?after=`); anything malformed is ignored (first page). */
function position(query: unknown): { before?: number; after?: number } {
  const q = (query ?? {}) as Record<string, unknown>;
  if (typeof q.after === 'string' && SEQ.test(q.after)) return { after: Number(q.after) };
  if (typeof q.before === 'string' && SEQ.test(q.before)) return { before: Number(q.before) };
  return {};
}

/** The email within an opened mailbox, or null (EMAIL_NOT_FOUND). */
async function findEmail(opened: OpenedMailbox, emailId: string) {
  try {
    return (await loadEmail(opened.ctx, opened.loaded.access.account.id, opened.loaded.mailbox.id, emailId, 'read')).email;
  } catch (err) {
    if (err instanceof AppError && err.code === 'EMAIL_NOT_FOUND') return null;
    throw err;
  }
}

/** A signed link, or null when the blob is not there (e.g. an attachment not stored). */
async function linkOrNull<T>(make: () => Promise<T>): Promise<T | null> {
  try {
    return await make();
  } catch (err) {
    if (err instanceof AppError && (err.code === 'EMAIL_NOT_FOUND' || err.code === 'EMAIL_ATTACHMENT_NOT_FOUND')) return null;
    throw err;
  }
}

export function registerMailboxPages(web: FastifyInstance, deps: AppDeps): void {
  // Dashboard links of the bucket era (`/buckets/view?id=<bucket id>`) open the mailbox page, which
  // asks for sign-in first when needed (docs/compat.md). Anything but one well-formed id is a 404.
  web.get('/buckets/view', ROUTE, async (req, reply) => {
    const id = (req.query as Record<string, unknown> | undefined)?.id;
    if (typeof id !== 'string' || !BUCKET_ID.test(id)) return notFound(reply, 'Mailbox');
    return reply.redirect(`/mailboxes/${id}`, 302);
  });

  web.get('/mailboxes/:id', ROUTE, async (req: FastifyRequest<{ Params: MailboxParams }>, reply) => {
    const session = req.webSession;
    if (!session) return toSignIn(req, reply);
    const opened = await openMailbox(deps, req, session, req.params.id);
    if (!opened) return notFound(reply, 'Mailbox');
    const mailbox = opened.loaded.mailbox;
    const [emails, top] = await Promise.all([emailListPage(deps, mailbox.id, position(req.query)), topLevelEntries(deps, mailbox.id)]);
    return sendPage(reply, 200, mailboxPage({ user: session.user, csrf: csrfToken(req, reply, deps), mailbox, emails, folders: top.folders, files: top.files }));
  });

  web.get('/mailboxes/:id/emails/:email_id', ROUTE, async (req: FastifyRequest<{ Params: EmailParams }>, reply) => {
    const session = req.webSession;
    if (!session) return toSignIn(req, reply);
    const opened = await openMailbox(deps, req, session, req.params.id);
    if (!opened) return notFound(reply, 'Mailbox');
    const email = await findEmail(opened, req.params.email_id);
    if (!email) return notFound(reply, 'Email', { href: `/mailboxes/${encodeURIComponent(opened.loaded.mailbox.id)}`, text: 'Back to the mailbox' });
    const input = { accountId: opened.loaded.access.account.id, mailboxId: opened.loaded.mailbox.id, emailId: email.id };
    // A person sees withheld (Junk, pending) mail in full: the withheld rule is for API keys.
    const [raw, attachments] = await Promise.all([
      linkOrNull(() => rawDownload(opened.ctx, input)),
      Promise.all(
        attachmentsOf(email).map(async (a) => ({
          filename: a.filename,
          contentType: a.content_type,
          size: Number(a.size_bytes),
          link: await linkOrNull(() => attachmentDownload(opened.ctx, { ...input, attachmentId: a.id })),
        })),
      ),
    ]);
    return sendPage(reply, 200, emailPage({ user: session.user, csrf: csrfToken(req, reply, deps), mailbox: opened.loaded.mailbox, email, raw, attachments }));
  });

  for (const [action, read] of [
    ['read', true],
    ['unread', false],
  ] as const) {
    web.post(`/mailboxes/:id/emails/:email_id/${action}`, ROUTE, async (req: FastifyRequest<{ Params: EmailParams }>, reply) => {
      const session = req.webSession;
      if (!session) return toSignIn(req, reply);
      const opened = await openMailbox(deps, req, session, req.params.id);
      if (!opened) return notFound(reply, 'Mailbox');
      const here = `/mailboxes/${encodeURIComponent(opened.loaded.mailbox.id)}`;
      try {
        // The API's guarded update: unread_count moves only when the status really changes.
        const email = await setEmailRead(opened.ctx, { accountId: opened.loaded.access.account.id, mailboxId: opened.loaded.mailbox.id, emailId: req.params.email_id, read });
        return reply.redirect(`${here}/emails/${encodeURIComponent(email.id)}`, 303);
      } catch (err) {
        if (err instanceof AppError && err.code === 'EMAIL_NOT_FOUND') return notFound(reply, 'Email', { href: here, text: 'Back to the mailbox' });
        throw err;
      }
    });
  }
}
