import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { AppDeps } from '../context.ts';
import { AppError } from '../errors.ts';
import { attachmentDownload, deleteEmail, loadEmail, rawDownload, setEmailRead } from '../emails/emails.service.ts';
import { attachmentsOf } from '../emails/emails.present.ts';
import { isCategory } from '../labels/categories.ts';
import { messagePage, sendPage } from './html.ts';
import { csrfToken, toSignIn, type WebSession } from './session.ts';
import { mayChange, openMailbox, type OpenedMailbox } from './person-ctx.ts';
import { emailListPage, type EmailFilters } from './mailbox.data.ts';
import { emailPage, emailRow, mailboxBase, mailboxPage, type EmailView } from './mailbox.views.ts';
import { issueLiveToken, LIVE_TOKEN_TTL_S } from '../live/tokens.ts';
import { CHANNEL } from '../live/cable.ts';
import { frameDocument, MAX_SOURCE_CHARS, rawBytes, viewMessage } from './email-body.ts';
import { attempt, notice, refusalPage } from './ui.ts';

// The mailbox's mail list and the email page. Tenancy is loadMailbox's (through openMailbox); a
// foreign, deleted or missing id answers the same 404. Opening an email never marks it read, as
// in the API; the buttons do. The HTML body is served by its own route into a sandboxed frame.

const ROUTE = { schema: { hide: true }, config: { auth: false } } as const;
const SEQ = /^\d{1,15}$/;
const BUCKET_ID = /^bkt_[A-Za-z0-9]{1,64}$/;

type MailboxParams = { id: string };
type EmailParams = { id: string; email_id: string };

export function notFound(reply: FastifyReply, what: 'Mailbox' | 'Email' | 'File', back = { href: '/', text: 'Back to your mailboxes' }, session?: WebSession | null) {
  return sendPage(
    reply,
    404,
    messagePage(`${what} not found`, `There is no such ${what.toLowerCase()}, or you are not a member of its account.`, back, { user: session?.user, status: 404 }),
  );
}

/** The position query (`?before=` / `?after=`); anything malformed is ignored (first page). */
function position(query: unknown): { before?: number; after?: number } {
  const q = (query ?? {}) as Record<string, unknown>;
  if (typeof q.after === 'string' && SEQ.test(q.after)) return { after: Number(q.after) };
  if (typeof q.before === 'string' && SEQ.test(q.before)) return { before: Number(q.before) };
  return {};
}

/** The list filters from the query; unknown values are ignored. */
function filtersOf(query: unknown): EmailFilters {
  const q = (query ?? {}) as Record<string, unknown>;
  const sender = typeof q.sender === 'string' ? q.sender.trim().slice(0, 320) : '';
  return {
    unread: q.unread === '1' || undefined,
    attachments: q.attachments === '1' || undefined,
    label: typeof q.label === 'string' && isCategory(q.label) ? q.label : undefined,
    sender: sender || undefined,
    direction: q.direction === 'sent' || q.direction === 'received' ? q.direction : undefined,
  };
}

/** The email within an opened mailbox, or null (EMAIL_NOT_FOUND). */
export async function findEmail(opened: OpenedMailbox, emailId: string) {
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

/** The frame's CSP: nothing runs, nothing is sent; images only inline until remote content is allowed. */
function frameCsp(remote: boolean): string {
  return [
    "default-src 'none'",
    `img-src data:${remote ? ' https: http:' : ''}`,
    "style-src 'unsafe-inline'",
    "form-action 'none'",
    "base-uri 'none'",
    "frame-ancestors 'self'",
    'sandbox allow-popups allow-popups-to-escape-sandbox',
  ].join('; ');
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
    if (!opened) return notFound(reply, 'Mailbox', undefined, session);
    const mailbox = opened.loaded.mailbox;
    const filters = filtersOf(req.query);
    const emails = await emailListPage(deps, mailbox.id, position(req.query), filters);
    return sendPage(
      reply,
      200,
      mailboxPage({
        user: session.user,
        csrf: csrfToken(req, reply, deps),
        mailbox,
        emails,
        filters,
        canWrite: mayChange(opened.loaded),
        canAdmin: mayChange(opened.loaded, 'admin'),
        notice: notice(req.query),
      }),
    );
  });

  // A ticket for the live channel, authorized by this page's session (src/live/access.ts checks the
  // session and membership again on connect and while the socket is open). JSON for app.js.
  web.get('/mailboxes/:id/live', ROUTE, async (req: FastifyRequest<{ Params: MailboxParams }>, reply) => {
    const session = req.webSession;
    if (!session) return reply.code(401).header('cache-control', 'no-store').send({ error: 'Sign in again.' });
    const opened = await openMailbox(deps, req, session, req.params.id);
    if (!opened) return reply.code(404).header('cache-control', 'no-store').send({ error: 'Mailbox not found.' });
    const m = opened.loaded.mailbox;
    const { token } = await issueLiveToken(deps.db, { apiKeyId: session.id, userId: session.user.id, accountId: m.account_id, mailboxId: m.id }, deps.now());
    return reply.header('cache-control', 'no-store').send({ token, expires_in: LIVE_TOKEN_TTL_S, channel: CHANNEL, mailbox_id: m.id, account_id: m.account_id });
  });

  // Rows newer than `after` as list items (escaped like the page), for the live list to prepend.
  web.get('/mailboxes/:id/rows', ROUTE, async (req: FastifyRequest<{ Params: MailboxParams; Querystring: { after?: string } }>, reply) => {
    const session = req.webSession;
    if (!session) return reply.code(401).send('');
    const opened = await openMailbox(deps, req, session, req.params.id);
    if (!opened) return reply.code(404).send('');
    const after = typeof req.query.after === 'string' && SEQ.test(req.query.after) ? Number(req.query.after) : 0;
    const page = await emailListPage(deps, opened.loaded.mailbox.id, { after });
    const fresh = await deps.db.selectFrom('mailboxes').select(['unread_count', 'message_count']).where('id', '=', opened.loaded.mailbox.id).executeTakeFirst();
    const base = mailboxBase(opened.loaded.mailbox);
    return reply
      .header('content-type', 'text/html; charset=utf-8')
      .header('cache-control', 'no-store')
      .header('x-unread-count', String(Number(fresh?.unread_count ?? 0)))
      .send(page.rows.map((e) => emailRow(base, e).value).join(''));
  });

  web.get('/mailboxes/:id/emails/:email_id', ROUTE, async (req: FastifyRequest<{ Params: EmailParams; Querystring: { view?: string; remote?: string } }>, reply) => {
    const session = req.webSession;
    if (!session) return toSignIn(req, reply);
    const opened = await openMailbox(deps, req, session, req.params.id);
    if (!opened) return notFound(reply, 'Mailbox', undefined, session);
    const email = await findEmail(opened, req.params.email_id);
    if (!email) return notFound(reply, 'Email', { href: `/mailboxes/${encodeURIComponent(opened.loaded.mailbox.id)}`, text: 'Back to the mailbox' }, session);
    const input = { accountId: opened.loaded.access.account.id, mailboxId: opened.loaded.mailbox.id, emailId: email.id };
    // A person sees withheld (Junk, pending) mail in full: the withheld rule is for API keys.
    const [rawLink, attachments, bytes] = await Promise.all([
      linkOrNull(() => rawDownload(opened.ctx, input)),
      Promise.all(
        attachmentsOf(email).map(async (a) => ({
          id: a.id,
          filename: a.filename,
          contentType: a.content_type,
          size: Number(a.size_bytes),
          link: await linkOrNull(() => attachmentDownload(opened.ctx, { ...input, attachmentId: a.id })),
        })),
      ),
      rawBytes(deps, email),
    ]);
    const viewed = bytes ? await viewMessage(bytes) : null;
    const hasHtml = Boolean(viewed?.html);
    const wanted = req.query.view;
    const view: EmailView = wanted === 'text' || wanted === 'headers' || wanted === 'source' ? wanted : wanted === 'html' || hasHtml ? (hasHtml ? 'html' : 'text') : 'text';
    const source = bytes && view === 'source' ? { text: bytes.toString('latin1').slice(0, MAX_SOURCE_CHARS), cut: bytes.length > MAX_SOURCE_CHARS } : null;
    return sendPage(
      reply,
      200,
      emailPage({
        user: session.user,
        csrf: csrfToken(req, reply, deps),
        mailbox: opened.loaded.mailbox,
        email,
        view,
        hasHtml,
        hasRemote: Boolean(viewed?.hasRemote),
        remote: req.query.remote === '1',
        headers: viewed?.headers ?? null,
        source,
        raw: rawLink,
        attachments,
        canWrite: mayChange(opened.loaded),
        canAdmin: mayChange(opened.loaded, 'admin'),
        notice: notice(req.query),
      }),
    );
  });

  // An attachment shown inline for preview (images, audio, video, PDF, text as plain text), sandboxed.
  web.get('/mailboxes/:id/emails/:email_id/attachments/:attachment_id', ROUTE, async (req: FastifyRequest<{ Params: EmailParams & { attachment_id: string } }>, reply) => {
    const session = req.webSession;
    if (!session) return reply.code(401).send();
    const opened = await openMailbox(deps, req, session, req.params.id);
    const email = opened ? await findEmail(opened, req.params.email_id) : null;
    const a = email ? attachmentsOf(email).find((x) => x.id === req.params.attachment_id) : undefined;
    let q = deps.db.selectFrom('file_versions').select(['sha256']).where('file_id', '=', a?.id ?? '').where('mailbox_id', '=', email?.mailbox_id ?? '');
    if (a?.version_id) q = q.where('id', '=', a.version_id);
    const v = a ? await q.orderBy('version_number', 'desc').executeTakeFirst() : undefined;
    if (!a || !v?.sha256) return reply.code(404).send();
    const type = /^(image\/(png|jpe?g|gif|webp|bmp)|audio\/|video\/|application\/pdf)/i.test(a.content_type) ? a.content_type : 'text/plain; charset=utf-8';
    return reply
      .header('content-type', type)
      .header('content-security-policy', "default-src 'none'; img-src 'self'; media-src 'self'; style-src 'unsafe-inline'; sandbox")
      .header('content-disposition', 'inline')
      .header('cache-control', 'private, no-store')
      .header('x-content-type-options', 'nosniff')
      .send(await deps.blobs.read(v.sha256));
  });

  // The HTML body alone, for the sandboxed frame of the email page.
  web.get('/mailboxes/:id/emails/:email_id/body.html', ROUTE, async (req: FastifyRequest<{ Params: EmailParams; Querystring: { remote?: string } }>, reply) => {
    const session = req.webSession;
    if (!session) return reply.code(401).header('content-type', 'text/plain; charset=utf-8').send('Sign in to see this email.');
    const opened = await openMailbox(deps, req, session, req.params.id);
    const email = opened ? await findEmail(opened, req.params.email_id) : null;
    const bytes = email ? await rawBytes(deps, email) : null;
    const viewed = bytes ? await viewMessage(bytes) : null;
    return reply
      .code(viewed?.html ? 200 : 404)
      .header('content-type', 'text/html; charset=utf-8')
      .header('content-security-policy', frameCsp(req.query.remote === '1'))
      .header('cache-control', 'no-store')
      .header('x-frame-options', 'SAMEORIGIN')
      .header('x-content-type-options', 'nosniff')
      .header('referrer-policy', 'no-referrer')
      .send(frameDocument(viewed?.html ?? '<p>This email has no HTML body.</p>'));
  });

  for (const [action, read] of [
    ['read', true],
    ['unread', false],
  ] as const) {
    web.post(`/mailboxes/:id/emails/:email_id/${action}`, ROUTE, async (req: FastifyRequest<{ Params: EmailParams }>, reply) => {
      const session = req.webSession;
      if (!session) return toSignIn(req, reply);
      const opened = await openMailbox(deps, req, session, req.params.id);
      if (!opened) return notFound(reply, 'Mailbox', undefined, session);
      const here = `/mailboxes/${encodeURIComponent(opened.loaded.mailbox.id)}`;
      try {
        // The API's guarded update: unread_count moves only when the status really changes.
        const email = await setEmailRead(opened.ctx, { accountId: opened.loaded.access.account.id, mailboxId: opened.loaded.mailbox.id, emailId: req.params.email_id, read });
        return reply.redirect(`${here}/emails/${encodeURIComponent(email.id)}`, 303);
      } catch (err) {
        if (err instanceof AppError && err.code === 'EMAIL_NOT_FOUND') return notFound(reply, 'Email', { href: here, text: 'Back to the mailbox' }, session);
        throw err;
      }
    });
  }

  web.post('/mailboxes/:id/emails/:email_id/delete', ROUTE, async (req: FastifyRequest<{ Params: EmailParams }>, reply) => {
    const session = req.webSession;
    if (!session) return toSignIn(req, reply);
    const opened = await openMailbox(deps, req, session, req.params.id);
    if (!opened) return notFound(reply, 'Mailbox', undefined, session);
    const here = `/mailboxes/${encodeURIComponent(opened.loaded.mailbox.id)}`;
    const done = await attempt(() => deleteEmail(opened.ctx, { accountId: opened.loaded.access.account.id, mailboxId: opened.loaded.mailbox.id, emailId: req.params.email_id }));
    if (!done.ok) {
      if (done.error.code === 'EMAIL_NOT_FOUND') return notFound(reply, 'Email', { href: here, text: 'Back to the mailbox' }, session);
      return refusalPage(req, reply, deps, session, done.error, { href: `${here}/emails/${encodeURIComponent(req.params.email_id)}`, text: 'Back to the email' });
    }
    return reply.redirect(`${here}?done=email_deleted`, 303);
  });
}
