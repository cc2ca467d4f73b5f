import { createHmac } from 'node:crypto';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import cookie from '@fastify/cookie';
import formbody from '@fastify/formbody';
import csrf from '@fastify/csrf-protection';
import type { AppDeps } from '../context.ts';
import { messagePage, sendPage } from './html.ts';
import { cookieBase, csrfUserInfo, loadSession, sessionToken } from './session.ts';
import { registerAuthPages } from './auth.pages.ts';
import { registerHomePage } from './home.pages.ts';
import { registerKeyPages } from './keys.pages.ts';
import { registerMailboxPages } from './mailbox.pages.ts';
import { registerSearchPage } from './search.pages.ts';
import { registerAgentAccessPages } from '../agent-auth/agent-access.ts';
import { registerAccountPages } from './account/routes.ts';
import { registerAssets } from './assets.ts';
import { registerMailboxAdminPages } from './mailbox-admin.pages.ts';
import { registerComposePages } from './compose.pages.ts';
import { registerFilesPages } from './files.pages.ts';
import { registerUploadPages } from './uploads.pages.ts';
import { registerSitePages } from './site.pages.ts';
import { registerGitPages } from './git.pages.ts';
import { registerSettingsPages } from './settings.pages.ts';

export const FORM_BODY_LIMIT = 64 * 1024;
export const CSRF_COOKIE = 'cubby_csrf';

/**
 * The browser dashboard: server-rendered pages with DB-backed sessions and CSRF tokens on
 * every form. Cookies, form bodies and CSRF live in this encapsulated scope only, so the
 * JSON API is unaffected.
 */
export async function registerWeb(app: FastifyInstance, deps: AppDeps): Promise<void> {
  await app.register(async (web) => {
    await web.register(cookie);
    await web.register(formbody, { bodyLimit: FORM_BODY_LIMIT });
    await web.register(csrf, {
      cookieKey: CSRF_COOKIE,
      cookieOpts: cookieBase(deps),
      getToken: (req) => {
        const token = (req.body as Record<string, unknown> | undefined)?._csrf ?? req.headers['x-csrf-token'];
        return typeof token === 'string' ? token : undefined;
      },
      getUserInfo: csrfUserInfo,
      csrfOpts: { userInfo: true, hmacKey: createHmac('sha256', deps.secret).update('cubby web csrf').digest() },
    });

    web.decorateRequest('webSession', null);
    web.addHook('onRequest', async (req) => {
      req.webSession = await loadSession(deps.db, sessionToken(req), deps.now());
    });
    // Every state-changing request carries a token bound to the CSRF cookie and the session.
    web.addHook('preHandler', (req, reply, done) => {
      if (req.method === 'GET' || req.method === 'HEAD') return done();
      web.csrfProtection(req, reply, done);
    });

    web.setErrorHandler((err: FastifyError, req: FastifyRequest, reply: FastifyReply) => {
      if (err.code === 'FST_CSRF_MISSING_SECRET' || err.code === 'FST_CSRF_INVALID_TOKEN') {
        return sendPage(
          reply,
          403,
          messagePage(
            'This form has expired',
            'The form you sent was not accepted: it is stale, was opened before you signed in or out, or did not come from a Cubby page. Go back, reload the page and try again.',
          ),
        );
      }
      if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE') return sendPage(reply, 413, messagePage('Too much data', 'The form you sent is too large.'));
      if (err.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') return sendPage(reply, 415, messagePage('Unsupported form', 'Send this form from its page.'));
      req.log.error({ err }, 'web page failed');
      return sendPage(reply, 500, messagePage('Something went wrong', `An internal error occurred. If it persists, quote request id ${req.id}.`, undefined, { status: 500, user: req.webSession?.user }));
    });

    registerAssets(web);
    registerAuthPages(web, deps);
    registerHomePage(web, deps);
    registerKeyPages(web, deps);
    registerMailboxAdminPages(web, deps);
    registerMailboxPages(web, deps);
    registerSearchPage(web, deps);
    registerComposePages(web, deps);
    registerFilesPages(web, deps);
    registerUploadPages(web, deps);
    registerSitePages(web, deps);
    registerGitPages(web, deps);
    registerSettingsPages(web, deps);
    registerAgentAccessPages(web, deps);
    registerAccountPages(web, deps);
  });
}

