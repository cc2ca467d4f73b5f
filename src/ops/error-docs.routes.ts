import { z } from 'zod';
import { ERROR_CATALOGUE, type ErrorCode } from '../errors.ts';
import type { ZApp } from '../http/server.ts';
import { html, layout, sendPage, type Html } from '../web/html.ts';

// GET /docs/errors: the page every error body's docs_url points at (`/docs/errors#CODE`),
// generated from the one error catalogue, so a new code is documented the moment it exists.

/** What a client should do, by HTTP status: the catalogue's message says what went wrong. */
const ADVICE: Record<number, string> = {
  400: 'Fix the request body (it must be valid JSON) and send it again; sending it unchanged fails the same way.',
  401: 'Send a valid API key as Authorization: Bearer cubby_…; if the key expired or was revoked, create a new one in the dashboard.',
  403: 'The credential, its account or its plan does not allow this. Use a credential with the permission named in the message, or change the account or plan setting it names.',
  404: 'Check the id or path. The object may have been deleted, or this credential cannot see it (objects of other accounts are reported as not found).',
  405: 'Use one of the methods the route allows (see the OpenAPI document).',
  409: 'The object is not in a state that allows this. Read it again and retry with its current state, or wait for the change in progress to finish.',
  413: 'Send less: split the content or use an upload session for large files.',
  415: 'Send the body as application/json.',
  422: 'Fix the field named in details.field (details.issues lists every problem) and send the request again.',
  423: 'The account is read-only: reads work, changes are refused until an operator makes it active again.',
  429: 'Wait the number of seconds in the Retry-After header (also details.retry_after when given), then retry.',
  500: 'Retry later. If it keeps happening, report the request_id from the error body to the operator.',
  503: 'Something the service needs is briefly unavailable. Retry later with backoff (honour Retry-After when given).',
};

function adviceFor(status: number): string {
  return ADVICE[status] ?? (status >= 500 ? ADVICE[500]! : 'Change the request as the message says and send it again.');
}

/** Codes with an SMTP reply reach senders of mail first; the API shows the same code elsewhere. */
function smtpAdvice(code: number): string {
  return code >= 500
    ? 'A sending server gets this reply and returns the message to its sender: check the address or ask the mailbox owner. In the API, the message names what to change.'
    : 'A temporary refusal: the sending server keeps the message and tries again later, so nothing is lost. In the API, retry later.';
}

export function errorDocsPage(): Html {
  const codes = (Object.keys(ERROR_CATALOGUE) as ErrorCode[]).sort();
  const entries = codes.map((code) => {
    const e = ERROR_CATALOGUE[code] as { status: number; message: string; smtp?: { code: number; enhanced: string } };
    return html`<section class="card" id="${code}">
<h2><code>${code}</code></h2>
<dl class="meta">
<dt>HTTP status</dt><dd>${e.status}</dd>
${e.smtp ? html`<dt>SMTP reply</dt><dd>${e.smtp.code} ${e.smtp.enhanced}</dd>` : ''}
<dt>Meaning</dt><dd>${e.message}</dd>
<dt>What to do</dt><dd>${e.smtp ? smtpAdvice(e.smtp.code) : adviceFor(e.status)}</dd>
</dl>
</section>`;
  });
  const index = codes.map((code, i) => html`${i ? ' · ' : ''}<a href="#${code}">${code}</a>`);
  return layout({
    title: 'Error codes',
    body: html`<h1>Error codes</h1>
<div class="card"><p>Every error the Cubby API returns has a stable <code>code</code>; clients branch on it, never on the message.
The error body also carries a <code>request_id</code>: quote it when asking the operator about a failure.</p>
<p class="muted">${index}</p></div>
${entries}`,
  });
}

export function registerErrorDocs(app: ZApp): void {
  const page = errorDocsPage();
  app.get('/docs/errors', { schema: { hide: true, response: { 200: z.string() } }, config: { auth: false } }, async (_req, reply) => sendPage(reply, 200, page));
}
