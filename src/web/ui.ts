import type { FastifyReply, FastifyRequest } from 'fastify';
import type { AppDeps } from '../context.ts';
import { AppError } from '../errors.ts';
import { html, messagePage, sendPage, type Html } from './html.ts';
import type { WebSession } from './session.ts';
import { csrfToken } from './session.ts';

// Small pieces shared by the workspace pages: address chips with a copy button, notices after
// a redirect, and turning a service's refusal into words on the page.

/** An address in code with a copy button (the button appears only with the script). */
export function addressChip(address: string | null | undefined): Html {
  if (!address) return html`<span class="muted">no address</span>`;
  return html`<span class="addr"><code>${address}</code><button type="button" class="secondary small" data-copy="${address}" hidden aria-label="Copy ${address}">Copy</button></span>`;
}

/** Notices named in `?done=` after a POST-redirect-GET; unknown names show nothing. */
const NOTICES: Record<string, string> = {
  created: 'Mailbox created.',
  archived: 'Mailbox archived. It keeps its mail and files, stops receiving, and can be unarchived.',
  unarchived: 'Mailbox unarchived.',
  deleted: 'Mailbox deleted.',
  sent: 'Sent. Delivery is queued; the message is in this mailbox as sent mail.',
  email_deleted: 'Email deleted.',
  saved: 'Saved.',
  folder: 'Folder created.',
  uploaded: 'Uploaded.',
  moved: 'Done.',
  file_deleted: 'Deleted.',
  restored: 'Version restored.',
  appended: 'Text appended.',
};

export function notice(query: unknown): Html {
  const done = (query as Record<string, unknown> | undefined)?.done;
  const text = typeof done === 'string' ? NOTICES[done] : undefined;
  return text ? html`<div class="alert good" role="status">${text}</div>` : html``;
}

/** Words for a refusal: the service's message, plus what would help where we know it. */
export function refusalText(err: AppError): string {
  const help: Partial<Record<string, string>> = {
    ACCOUNT_READ_ONLY: 'Changes come back when the account is active again (see Account).',
    PERMISSION_DENIED: 'Your role in this account does not allow this; an owner or administrator can do it.',
    MAILBOX_ARCHIVED: 'Unarchive the mailbox from the archived list to change it.',
    BUCKET_PUBLISHED: 'Unpublish the site first (Site tab), then archive.',
    EMAIL_RECIPIENT_NOT_ALLOWED:
      'A mailbox writes only to members of its account, to other mailboxes of the account, and (on paid plans) to senders who emailed it and passed authentication.',
    EMAIL_RECIPIENT_UNAUTHENTICATED: 'Ask the sender to fix SPF/DKIM for their domain; mail that passes makes them a valid recipient.',
    EMAIL_RECIPIENT_PLAN_REQUIRED: 'Upgrade the plan to write to outside senders, or write to a member or another mailbox of this account.',
    EMAIL_RECIPIENT_REQUIRED: 'Enter the recipient yourself in To.',
    EMAIL_ATTACHMENTS_TOO_LARGE: 'A sent message carries at most 20 files and 25 MB together: leave some attachments out.',
    MAILBOX_LOCKED: 'A batch upload (from the dashboard, the API or the CLI) is in progress on this mailbox; other changes wait until it is finished, canceled or expires.',
  };
  const extra = help[err.code];
  return extra ? `${err.message} ${extra}` : err.message;
}

/** The field an error names (details.field), cut to its last segment to match form names. */
export function errorField(err: AppError): string | null {
  const f = err.details.field;
  return typeof f === 'string' ? f.split('.').pop()! : null;
}

/** A refused POST as a page: 403 for permission problems, the error's status otherwise. */
export function refusalPage(req: FastifyRequest, reply: FastifyReply, deps: AppDeps, session: WebSession, err: AppError, back: { href: string; text: string }) {
  const status = err.status >= 400 && err.status < 600 ? err.status : 400;
  return sendPage(reply, status, messagePage('Not done', refusalText(err), back, { user: session.user, csrf: csrfToken(req, reply, deps), status }));
}

/** Runs a service call; an AppError comes back as a value for the page to explain. */
export async function attempt<T>(fn: () => Promise<T>): Promise<{ ok: true; value: T } | { ok: false; error: AppError }> {
  try {
    return { ok: true, value: await fn() };
  } catch (err) {
    if (err instanceof AppError) return { ok: false, error: err };
    throw err;
  }
}
