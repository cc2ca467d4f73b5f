import type { FastifyError, FastifyInstance, FastifyReply } from 'fastify';
import multipart from '@fastify/multipart';
import type { AppDeps } from '../../context.ts';
import { AppError, ERROR_CATALOGUE } from '../../errors.ts';
import { MAX_LOGO_BYTES, MAX_LOGO_SIDE, readAccountLogo, removeAccountLogo, setAccountLogo } from '../../accounts/logo.service.ts';
import { managingRole } from '../../accounts/members.service.ts';
import { readAgentHeaders } from '../../auth/credential.ts';
import { html, messagePage, sendPage, type Html } from '../html.ts';
import { csrfInput, formField, type FormBody } from '../forms.ts';
import { errorPage, ROUTE } from './common.ts';

// The account logo on /account (branding published auto-index sites show as {{account_logo}}):
// upload with a plain multipart form, remove, and the preview the page shows. The service decides
// what an image is (src/accounts/logo.service.ts); this adapter only moves bytes.

const LOGO_FIELD = 'logo';

/** The logo card of /account, for people who may change the account's branding. */
export function logoCard(account: { id: string; name: string; logo_sha256: string | null }, csrf: string): Html {
  const hidden = html`${csrfInput(csrf)}<input type="hidden" name="account_id" value="${account.id}">`;
  const preview = account.logo_sha256
    ? html`<img class="logo-preview" src="/account/logo?account=${encodeURIComponent(account.id)}&amp;v=${account.logo_sha256.slice(0, 12)}" alt="Logo of ${account.name}" width="64" height="64">`
    : html`<span class="logo-preview initial" aria-hidden="true">${(account.name.trim()[0] ?? '?').toUpperCase()}</span> <span class="muted">No logo: published listings show the initial.</span>`;
  return html`<div class="card"><h2>Logo</h2>
<p>${preview}</p>
<form method="post" action="/account/logo" enctype="multipart/form-data">${hidden}
<label for="f-logo">${account.logo_sha256 ? 'Replace the logo' : 'Upload a logo'} <span class="hint">(PNG, JPEG or WebP, at most ${MAX_LOGO_BYTES / 1024} KB and ${MAX_LOGO_SIDE}×${MAX_LOGO_SIDE} pixels; shown as {{account_logo}} on published file listings)</span></label>
<input id="f-logo" name="${LOGO_FIELD}" type="file" accept="image/png,image/jpeg,image/webp" required>
<div class="actions"><button type="submit">Upload logo</button></div></form>
${account.logo_sha256 ? html`<form method="post" action="/account/logo/remove" class="inline">${hidden}<button class="danger" type="submit">Remove logo</button></form>` : ''}
</div>`;
}

export function registerLogoPages(web: FastifyInstance, deps: AppDeps): void {
  const done = (reply: FastifyReply, accountId: string, what: string) => reply.redirect(`/account?account=${encodeURIComponent(accountId)}&done=${what}`, 303);
  const back = (accountId: string) => ({ href: `/account?account=${encodeURIComponent(accountId)}`, text: 'Back to the account' });
  const actor = (req: { id: string; headers: Record<string, unknown> }, userId: string) => ({ userId, apiKeyId: null, agent: readAgentHeaders(req.headers as never), requestId: req.id });

  // Multipart bodies only here, in their own scope: the form fields (the CSRF token among them)
  // become plain values before the CSRF check runs, and the file a Buffer capped at the limit.
  void web.register(async (scope) => {
    await scope.register(multipart, {
      attachFieldsToBody: 'keyValues',
      limits: { fileSize: MAX_LOGO_BYTES, files: 1, fields: 10, fieldSize: 1000, parts: 12, headerPairs: 50 },
    });
    scope.setErrorHandler((err: FastifyError, _req, reply) => {
      if (err.code === 'FST_REQ_FILE_TOO_LARGE') {
        return sendPage(reply, 413, messagePage('That did not work', ERROR_CATALOGUE.ACCOUNT_LOGO_TOO_LARGE.message, { href: '/account', text: 'Back to the account' }));
      }
      if (typeof err.code === 'string' && err.code.startsWith('FST_') && err.statusCode && err.statusCode < 500 && !err.code.startsWith('FST_CSRF')) {
        return sendPage(reply, 400, messagePage('That did not work', 'Send one image from the logo form.', { href: '/account', text: 'Back to the account' }));
      }
      throw err;
    });
    scope.post('/account/logo', ROUTE, async (req, reply) => {
      const session = req.webSession;
      if (!session) return reply.redirect('/users/sign_in', 303);
      const body = req.body as FormBody;
      const accountId = formField(body, 'account_id', 100);
      try {
        const file = body?.[LOGO_FIELD];
        if (!Buffer.isBuffer(file)) throw new AppError('ACCOUNT_LOGO_UNSUPPORTED', 'Choose an image file to upload.');
        await setAccountLogo(deps, actor(req, session.user.id), accountId, file);
        return done(reply, accountId, 'logo');
      } catch (err) {
        return errorPage(reply, err, back(accountId));
      }
    });
  });

  web.post('/account/logo/remove', ROUTE, async (req, reply) => {
    const session = req.webSession;
    if (!session) return reply.redirect('/users/sign_in', 303);
    const accountId = formField(req.body as FormBody, 'account_id', 100);
    try {
      await removeAccountLogo(deps, actor(req, session.user.id), accountId);
      return done(reply, accountId, 'logo_removed');
    } catch (err) {
      return errorPage(reply, err, back(accountId));
    }
  });

  // The preview, for anyone in the account (or its agency's owner); others get the same 404 as
  // an account without a logo. Served with its sniffed type only, never sniffed again, inert.
  web.get('/account/logo', ROUTE, async (req, reply) => {
    const session = req.webSession;
    const accountId = formField(req.query as FormBody, 'account', 100);
    const notFound = () => sendPage(reply, 404, messagePage('Not found', 'There is no such logo.'));
    if (!session || !accountId.startsWith('acct_')) return notFound();
    if ((await managingRole(deps.db, accountId, session.user.id)) === null) return notFound();
    const logo = await readAccountLogo(deps, accountId);
    if (!logo) return notFound();
    return reply
      .header('content-type', logo.contentType)
      .header('x-content-type-options', 'nosniff')
      .header('content-security-policy', "default-src 'none'; sandbox")
      .header('content-disposition', 'inline; filename="logo"')
      .header('cache-control', 'private, max-age=300')
      .send(logo.bytes);
  });
}
