import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { AppDeps, Actor } from '../context.ts';
import type { Scope } from '../db/schema.ts';
import { AppError } from '../errors.ts';
import { createApiKey, listApiKeys, revokeApiKey } from '../auth/keys.service.ts';
import { readAgentHeaders } from '../auth/credential.ts';
import { iso } from '../time.ts';
import { messagePage, sendPage } from './html.ts';
import { formField, type FieldErrors, type FormBody } from './forms.ts';
import { csrfToken, toSignIn, type WebSession } from './session.ts';
import { listMailboxes, listMemberships, selectedMailboxCounts } from './web.data.ts';
import { keysPage, SCOPES, type KeyFormValues } from './keys.views.ts';

const ROUTE = { schema: { hide: true }, config: { auth: false } } as const;
const MAX_EXPIRY_YEARS = 10;
const MAX_SELECTED_MAILBOXES = 1000;

function actorOf(req: FastifyRequest, session: WebSession): Actor {
  return { userId: session.user.id, apiKeyId: null, agent: readAgentHeaders(req.headers), requestId: req.id };
}

interface RenderExtras {
  form?: KeyFormValues;
  errors?: FieldErrors;
  alert?: string;
  created?: { token: string; label: string | null };
}

async function renderKeys(req: FastifyRequest, reply: FastifyReply, deps: AppDeps, session: WebSession, status: number, extras: RenderExtras = {}) {
  const [memberships, keys, selectedCounts] = await Promise.all([
    listMemberships(deps.db, session.user.id),
    listApiKeys(deps.db, session.user.id),
    selectedMailboxCounts(deps.db, session.user.id),
  ]);
  const mailboxes = await listMailboxes(
    deps.db,
    memberships.map((m) => m.accountId),
    { userId: session.user.id },
  );
  const form: KeyFormValues = extras.form ?? { label: '', scope: 'mailbox_write', accountId: memberships[0]?.accountId ?? '', access: 'all', expiresOn: '', permissions: {} };
  const page = keysPage({
    user: session.user,
    csrf: csrfToken(req, reply, deps),
    now: deps.now(),
    memberships,
    keys,
    selectedCounts,
    mailboxes,
    form,
    errors: extras.errors ?? {},
    alert: extras.alert,
    created: extras.created,
  });
  return sendPage(reply, status, page);
}

function readForm(body: FormBody): KeyFormValues {
  const permissions: Record<string, 'read' | 'write'> = {};
  for (const [name, value] of Object.entries(body ?? {}).slice(0, MAX_SELECTED_MAILBOXES + 20)) {
    if (!name.startsWith('mbx:') || name.length > 200) continue;
    const v = Array.isArray(value) ? value[0] : value;
    if (v === 'read' || v === 'write') permissions[name.slice(4)] = v;
  }
  return {
    label: formField(body, 'label', 500),
    scope: formField(body, 'scope', 50) as Scope,
    accountId: formField(body, 'account_id', 200),
    access: formField(body, 'mailbox_access', 20) === 'selected' ? 'selected' : 'all',
    expiresOn: formField(body, 'expires_on', 20).trim(),
    permissions,
  };
}

/** "YYYY-MM-DD" (valid through that UTC day) → the instant the key stops working, or an error message. */
function expiryFrom(value: string, now: Date): { at: string | null } | { error: string } {
  if (!value) return { at: null };
  const m = value.match(/^(\d{4})-(\d{2})-(\d{2})$/);
  const start = m ? Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3])) : NaN;
  if (!m || Number.isNaN(start) || iso(start).slice(0, 10) !== value) return { error: 'Enter a date as YYYY-MM-DD.' };
  const end = start + 24 * 60 * 60 * 1000;
  if (end <= now.getTime()) return { error: 'Choose today or a later date.' };
  if (end > now.getTime() + MAX_EXPIRY_YEARS * 366 * 24 * 60 * 60 * 1000) return { error: `Choose a date within ${MAX_EXPIRY_YEARS} years.` };
  return { at: iso(end) };
}

export function registerKeyPages(web: FastifyInstance, deps: AppDeps): void {
  web.get('/settings/api_keys', ROUTE, async (req, reply) => {
    if (!req.webSession) return toSignIn(req, reply);
    return renderKeys(req, reply, deps, req.webSession, 200);
  });

  web.post('/settings/api_keys', ROUTE, async (req, reply) => {
    const session = req.webSession;
    if (!session) return toSignIn(req, reply);
    const form = readForm(req.body as FormBody);
    const errors: FieldErrors = {};
    const memberships = await listMemberships(deps.db, session.user.id);
    if (!form.accountId && memberships.length === 1) form.accountId = memberships[0]!.accountId;
    if (!memberships.some((m) => m.accountId === form.accountId)) errors.account_id = 'Choose one of your accounts.';
    if (!SCOPES.some((s) => s.value === form.scope)) errors.scope = 'Choose a scope.';
    if (form.label.trim().length > 100) errors.label = 'Use at most 100 characters.';
    const expiry = expiryFrom(form.expiresOn, deps.now());
    if ('error' in expiry) errors.expires_on = expiry.error;

    let permissions: Record<string, 'read' | 'write'> | undefined;
    if (form.access === 'selected' && !errors.account_id) {
      const { mailboxes } = await listMailboxes(deps.db, [form.accountId], { userId: session.user.id });
      const known = new Set(mailboxes.map((b) => b.id));
      const chosen = Object.entries(form.permissions).filter(([id]) => known.has(id));
      // A read-only key reaches its mailboxes read-only, whatever was chosen per mailbox.
      permissions = Object.fromEntries(chosen.map(([id, p]) => [id, form.scope === 'mailbox_read' ? 'read' : p]));
      if (chosen.length === 0) errors.mailboxes = 'Choose at least one mailbox of this account, or give the key access to all mailboxes.';
    }
    if (Object.keys(errors).length) return renderKeys(req, reply, deps, session, 422, { form, errors, alert: 'The key was not created. Please fix the problems below.' });

    try {
      const key = await createApiKey(
        deps.db,
        {
          userId: session.user.id,
          accountId: form.accountId,
          label: form.label,
          scope: form.scope,
          mailboxAccess: form.access,
          mailboxPermissions: permissions,
          expiresAt: 'at' in expiry ? expiry.at : null,
        },
        actorOf(req, session),
        deps.now(),
      );
      return renderKeys(req, reply, deps, session, 201, { created: { token: key.token, label: key.label } });
    } catch (err) {
      if (!(err instanceof AppError)) throw err;
      return renderKeys(req, reply, deps, session, err.status, { form, alert: `The key was not created: ${err.message}` });
    }
  });

  web.post('/settings/api_keys/:id/revoke', ROUTE, async (req, reply) => {
    const session = req.webSession;
    if (!session) return toSignIn(req, reply);
    const { id } = req.params as { id: string };
    const revoked = await revokeApiKey(deps.db, session.user.id, id, actorOf(req, session), deps.now());
    if (!revoked) {
      const mine = (await listApiKeys(deps.db, session.user.id)).some((k) => k.id === id);
      if (!mine) return sendPage(reply, 404, messagePage('Key not found', 'There is no such API key.', { href: '/settings/api_keys', text: 'Back to API keys' }));
    }
    return reply.redirect('/settings/api_keys', 303);
  });
}
