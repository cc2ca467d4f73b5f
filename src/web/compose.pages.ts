import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { AppDeps } from '../context.ts';
import type { EmailsTable } from '../db/schema.ts';
import { replySubject, sendEmail } from '../outbound/send.service.ts';
import { replyDefault } from '../outbound/rules.ts';
import { MAX_ATTACHMENT_BYTES, MAX_ATTACHMENTS } from '../outbound/attachments.ts';
import { attachmentsOf } from '../emails/emails.present.ts';
import { sendingBlockedReason } from '../outbound/sending-state.ts';
import { html, layout, sendPage } from './html.ts';
import { csrfInput, formField, formValues, input, type FieldErrors, type FormBody } from './forms.ts';
import { mayChange, openMailbox, type OpenedMailbox } from './person-ctx.ts';
import { csrfToken, toSignIn, type WebSession } from './session.ts';
import { attempt, errorField, refusalText } from './ui.ts';
import { addresses, formatSize, mailboxBase, mailboxName } from './mailbox.views.ts';
import { findEmail, notFound } from './mailbox.pages.ts';

// Compose, reply, reply-all and forward: a form over sendEmail, the API's send, so the sending
// rules are the same; a refusal is shown on the form in words (which recipient, why, and what
// would allow it), with what was typed kept. A forward carries the original's attachments (each
// can be left out): they go as sendEmail's attachment ids, so its limits on count and size apply.

const ROUTE = { schema: { hide: true }, config: { auth: false } } as const;

interface ComposeForm {
  to: string;
  cc: string;
  subject: string;
  text: string;
  inReplyTo: string;
  /** The forwarded email's id, and which of its attachments (file ids) go along. */
  forwardOf: string;
  attachments: string[];
}

const BLOCKED: Record<string, string> = {
  mailbox_archived: 'The mailbox is archived; unarchive it to send.',
  account_suspended: 'The account is suspended.',
  account_read_only: 'The account is read-only.',
  plan_disallows_sending: 'The account’s plan does not include sending email.',
  no_address: 'The mailbox has no address to send from.',
  sending_disabled: 'Sending is turned off for this mailbox.',
};

function splitAddresses(value: string): string[] {
  return value
    .split(/[,;\s]+/)
    .map((a) => a.trim())
    .filter(Boolean)
    .slice(0, 50);
}

function quoted(original: EmailsTable): string {
  const from = addresses(original.from_addresses)[0]?.address ?? 'the sender';
  const body = (original.body_text ?? '').slice(0, 20_000);
  return `\n\nOn ${original.received_at.slice(0, 16).replace('T', ' ')} UTC, ${from} wrote:\n${body.replace(/^/gm, '> ')}`;
}

function forwarded(original: EmailsTable): string {
  const list = (json: string) => addresses(json).map((a) => (a.name ? `${a.name} <${a.address}>` : a.address)).join(', ');
  return `\n\n---------- Forwarded message ----------\nFrom: ${list(original.from_addresses)}\nDate: ${original.received_at}\nSubject: ${original.subject ?? ''}\nTo: ${list(original.to_addresses)}\n\n${(original.body_text ?? '').slice(0, 50_000)}`;
}

/** The form as it starts: empty, or prefilled for a reply (to the authenticated sender), reply-all or forward. */
function startingForm(opened: OpenedMailbox, original: EmailsTable | null, mode: 'new' | 'reply' | 'all' | 'forward'): ComposeForm {
  const none = { forwardOf: '', attachments: [] };
  if (!original || mode === 'new') return { to: '', cc: '', subject: '', text: '', inReplyTo: '', ...none };
  if (mode === 'forward') {
    const s = (original.subject ?? '').trim();
    return { to: '', cc: '', subject: /^fwd?:/i.test(s) ? s : `Fwd: ${s}`, text: forwarded(original), inReplyTo: '', forwardOf: original.id, attachments: attachmentsOf(original).map((a) => a.id) };
  }
  const own = (opened.loaded.mailbox.address ?? '').toLowerCase();
  const replyTo = addresses(original.reply_to_addresses)[0]?.address;
  const to = replyTo ?? replyDefault(original) ?? '';
  const others =
    mode === 'all'
      ? [...addresses(original.to_addresses), ...addresses(original.cc_addresses)].map((a) => a.address.toLowerCase()).filter((a) => a !== own && a !== to.toLowerCase())
      : [];
  return { to, cc: [...new Set(others)].join(', '), subject: replySubject(original.subject), text: quoted(original), inReplyTo: original.id, ...none };
}

/** The forwarded email's attachments as checkboxes (all on at first), with the sending limits. */
function forwardAttachments(original: EmailsTable | null, form: ComposeForm) {
  const list = original && form.forwardOf ? attachmentsOf(original) : [];
  if (!list.length) return html``;
  const total = list.reduce((n, a) => n + Number(a.size_bytes), 0);
  const over = list.length > MAX_ATTACHMENTS || total > MAX_ATTACHMENT_BYTES;
  return html`<fieldset class="attachments"><legend>Attachments of the original</legend>${list.map(
    (a) => html`<label class="choice"><input type="checkbox" name="attachment" value="${a.id}"${form.attachments.includes(a.id) ? html` checked` : ''}> ${a.filename} <span class="muted small">(${formatSize(Number(a.size_bytes))})</span></label>`,
  )}<p class="hint${over ? ' error' : ''}">A message carries at most ${MAX_ATTACHMENTS} files and ${formatSize(MAX_ATTACHMENT_BYTES)} together${over ? html`; these are ${list.length} files and ${formatSize(total)}: leave some out` : ''}.</p></fieldset>`;
}

function renderCompose(
  req: FastifyRequest,
  reply: FastifyReply,
  deps: AppDeps,
  session: WebSession,
  opened: OpenedMailbox,
  form: ComposeForm,
  original: EmailsTable | null,
  errors: FieldErrors,
  alert: string | null,
  status = 200,
) {
  const csrf = csrfToken(req, reply, deps);
  const m = opened.loaded.mailbox;
  const base = mailboxBase(m);
  const blocked = sendingBlockedReason(m, opened.loaded.access.account);
  const canWrite = mayChange(opened.loaded);
  const heading = original ? (form.forwardOf ? `Forward: ${original.subject ?? '(no subject)'}` : `Reply: ${original.subject ?? '(no subject)'}`) : 'New message';
  const body = html`<p class="crumbs"><a href="/?account=${m.account_id}">Mailboxes</a> / <a href="${base}">${mailboxName(m)}</a> / compose</p>
<h1>${heading}</h1>
${alert ? html`<div class="alert bad" role="alert">${alert}</div>` : ''}
${blocked ? html`<div class="alert bad" role="alert">This mailbox cannot send now. ${BLOCKED[blocked] ?? blocked}</div>` : ''}
${!canWrite ? html`<div class="alert bad" role="alert">Your role in this account cannot send from this mailbox.</div>` : ''}
<div class="card"><form method="post" action="${base}/compose">${csrfInput(csrf)}
<input type="hidden" name="in_reply_to" value="${form.inReplyTo}">
<input type="hidden" name="forward_of" value="${form.forwardOf}">
<p class="small muted">From <code>${m.address ?? 'no address'}</code></p>
${input('to', 'To', errors, { value: form.to, hint: form.inReplyTo ? 'leave empty to answer the original sender when they passed authentication' : 'addresses separated by commas', maxlength: 3000 })}
${input('cc', 'Cc', errors, { value: form.cc, maxlength: 3000 })}
${input('subject', 'Subject', errors, { value: form.subject, maxlength: 998 })}
<label for="f-text">Message</label>
<textarea id="f-text" name="text" rows="14"${errors.text ? html` aria-invalid="true"` : ''}>
${form.text}</textarea>
${errors.text ? html`<div class="error">${errors.text}</div>` : ''}
${forwardAttachments(original, form)}
<p class="hint">A mailbox writes to members of its account and to other mailboxes of the account; on paid plans also to senders who emailed it and passed authentication.</p>
<div class="actions"><button type="submit"${blocked || !canWrite ? html` disabled` : ''}>Send</button><a href="${original ? `${base}/emails/${encodeURIComponent(original.id)}` : base}">Cancel</a></div>
</form></div>`;
  return sendPage(reply, status, layout({ title: heading, user: session.user, csrf, body, active: 'mailboxes' }));
}

export function registerComposePages(web: FastifyInstance, deps: AppDeps): void {
  web.get('/mailboxes/:id/compose', ROUTE, async (req: FastifyRequest<{ Params: { id: string }; Querystring: { reply?: string; all?: string; forward?: string } }>, reply) => {
    const session = req.webSession;
    if (!session) return toSignIn(req, reply);
    const opened = await openMailbox(deps, req, session, req.params.id);
    if (!opened) return notFound(reply, 'Mailbox', undefined, session);
    const originalId = req.query.reply ?? req.query.forward;
    const original = typeof originalId === 'string' ? await findEmail(opened, originalId) : null;
    if (originalId && !original) return notFound(reply, 'Email', { href: mailboxBase(opened.loaded.mailbox), text: 'Back to the mailbox' }, session);
    const mode = req.query.forward ? 'forward' : req.query.reply ? (req.query.all === '1' ? 'all' : 'reply') : 'new';
    return renderCompose(req, reply, deps, session, opened, startingForm(opened, original, mode), original, {}, null);
  });

  web.post('/mailboxes/:id/compose', ROUTE, async (req: FastifyRequest<{ Params: { id: string } }>, reply) => {
    const session = req.webSession;
    if (!session) return toSignIn(req, reply);
    const opened = await openMailbox(deps, req, session, req.params.id);
    if (!opened) return notFound(reply, 'Mailbox', undefined, session);
    const b = req.body as FormBody;
    const form: ComposeForm = {
      to: formField(b, 'to', 3000),
      cc: formField(b, 'cc', 3000),
      subject: formField(b, 'subject', 998),
      text: formField(b, 'text', 1024 * 1024),
      inReplyTo: formField(b, 'in_reply_to', 100),
      forwardOf: formField(b, 'forward_of', 100),
      attachments: formValues(b, 'attachment', 100, 100),
    };
    const originalId = form.inReplyTo || form.forwardOf;
    const original = originalId ? await findEmail(opened, originalId) : null;
    if (originalId && !original) return notFound(reply, 'Email', { href: mailboxBase(opened.loaded.mailbox), text: 'Back to the mailbox' }, session);
    // Only the forwarded email's own attachments can ride along from this form.
    const offered = new Set(original && form.forwardOf ? attachmentsOf(original).map((a) => a.id) : []);
    form.attachments = form.attachments.filter((id) => offered.has(id));
    const done = await attempt(() =>
      sendEmail(opened.ctx, {
        accountId: opened.loaded.access.account.id,
        mailboxId: opened.loaded.mailbox.id,
        to: splitAddresses(form.to),
        cc: splitAddresses(form.cc),
        subject: form.subject.trim() || null,
        text: form.text,
        inReplyTo: form.inReplyTo || null,
        attachmentIds: form.attachments,
      }),
    );
    if (!done.ok) {
      const err = done.error;
      const field = errorField(err);
      const known = field && ['to', 'cc', 'subject', 'text'].includes(field) ? field : null;
      // A problem with the attachments is told above the form, with the sending limits.
      const who = typeof err.details.address === 'string' ? `${err.details.address}: ` : '';
      return renderCompose(req, reply, deps, session, opened, form, original, known ? { [known]: refusalText(err) } : {}, known ? null : `${who}${refusalText(err)}`, err.status);
    }
    return reply.redirect(`${mailboxBase(opened.loaded.mailbox)}/emails/${encodeURIComponent(done.value.id)}?done=sent`, 303);
  });
}
