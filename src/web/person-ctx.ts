import type { FastifyRequest } from 'fastify';
import type { AppDeps, RequestCtx } from '../context.ts';
import { readAgentHeaders } from '../auth/credential.ts';
import { AppError } from '../errors.ts';
import { loadMailbox, type LoadedMailbox } from '../mailboxes/mailboxes.service.ts';
import type { WebSession } from './session.ts';

// The dashboard reaches mailboxes through the same services as the API, so tenancy stays in
// src/auth/access.ts. A signed-in person is not an API key: the request context carries a
// credential made for this one request, granted only the mailbox's account, and an actor without
// `apiKeyId` (so the withheld rule, which is for API keys, does not apply). Its scope is
// `mailbox_admin`, which access.ts caps by the person's role (a collaborator never administers),
// and every change still passes assertMutable (a read-only or suspended account refuses it).

const MAILBOX_ID = /^bkt_[A-Za-z0-9]{1,64}$/;

export function personCtx(deps: AppDeps, req: FastifyRequest, session: WebSession, accountId: string): RequestCtx {
  return {
    ...deps,
    credential: {
      keyId: '',
      user: session.user,
      label: null,
      tokenType: 'session',
      scope: 'mailbox_admin',
      mailboxAccess: 'all',
      mailboxPermissions: {},
      defaultAccountId: accountId,
      grantedAccountIds: [accountId],
      includeClientAccounts: false,
      transport: 'web',
      plan: 'free',
      expiresAt: null,
      lastUsedAt: null,
      connection: null,
    },
    actor: { userId: session.user.id, apiKeyId: null, agent: readAgentHeaders(req.headers), requestId: req.id },
  };
}

export interface OpenedMailbox {
  ctx: RequestCtx;
  loaded: LoadedMailbox;
}

/**
 * The mailbox as the signed-in person may see it, or null when it is missing, deleted or in an
 * account the person is not a member of (all shown as the same 404). The account is looked up
 * from the id, then loadMailbox checks the membership like for any credential.
 */
export async function openMailbox(deps: AppDeps, req: FastifyRequest, session: WebSession, mailboxId: string): Promise<OpenedMailbox | null> {
  if (!MAILBOX_ID.test(mailboxId)) return null;
  const row = await deps.db
    .selectFrom('mailboxes')
    .innerJoin('memberships', (j) => j.onRef('memberships.account_id', '=', 'mailboxes.account_id').on('memberships.user_id', '=', session.user.id))
    .select('mailboxes.account_id')
    .where('mailboxes.id', '=', mailboxId)
    .where('mailboxes.deleted_at', 'is', null)
    .executeTakeFirst();
  if (!row) return null;
  const ctx = personCtx(deps, req, session, row.account_id);
  try {
    return { ctx, loaded: await loadMailbox(ctx, row.account_id, mailboxId, 'read') };
  } catch (err) {
    if (err instanceof AppError && (err.code === 'MAILBOX_NOT_FOUND' || err.code === 'ACCOUNT_ACCESS_DENIED')) return null;
    throw err;
  }
}

/** Whether the page should offer changes needing `need` on this mailbox (the services still decide). */
export function mayChange(loaded: LoadedMailbox, need: 'write' | 'admin' = 'write'): boolean {
  const a = loaded.access.account;
  return loaded.perms[need] && !a.suspended_at && a.status !== 'read_only';
}
