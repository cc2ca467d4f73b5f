import { z } from 'zod';
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { accountIdField, pageQuery } from '../http/schemas.ts';
import { named, okR, Pagination, responsesR } from '../http/contract.ts';
import { selectAccount } from '../auth/access.ts';
import { AppError } from '../errors.ts';
import { decodeCursor, toPage } from '../http/cursor.ts';
import { listActivity } from './activity.query.ts';

type App = FastifyInstance<any, any, any, any, ZodTypeProvider>;

// GET /v1/account/activity: the selected account's activity history, newest first, for owners
// and administrators only.

export const activityEntrySchema = named(
  'ActivityEntry',
  z.object({
    id: z.string(),
    created_at: z.string(),
    action: z.string(),
    target_type: z.string(),
    target_id: z.string().nullable(),
    reason: z.string().nullable(),
    request_id: z.string().nullable(),
    user: z.object({ id: z.string(), email: z.string().nullable(), name: z.string().nullable() }).nullable(),
    api_key: z.object({ id: z.string(), label: z.string().nullable() }).nullable(),
    agent: z.record(z.string(), z.unknown()).nullable(),
  }),
  'One entry of the activity history: who (person, key or agent), what, when and the reason given.',
);

export const activityPageSchema = okR(z.object({ account_id: z.string(), activity: z.array(activityEntrySchema), pagination: Pagination }));

const idFilter = (prefix: string) => z.string().max(100).regex(new RegExp(`^${prefix}_[A-Za-z0-9]{1,64}$`), `must be a ${prefix}_… id`).optional();

export const activityQuery = z.object({
  ...pageQuery,
  account_id: accountIdField,
  user_id: idFilter('usr').describe('Only entries by this person'),
  api_key_id: idFilter('key').describe('Only entries made with this API key'),
  mailbox_id: idFilter('bkt').describe('Only entries whose target is this mailbox'),
  action: z.string().max(100).regex(/^[a-z_.]+$/, 'must be an action name, or a prefix ending in "."').optional().describe('An action (mailbox.create) or a prefix (mailbox.)'),
});

export function registerActivityRoutesR(app: App): void {
  app.get(
    '/account/activity',
    {
      schema: {
        tags: ['accounts'],
        summary: 'Activity history of the account (owners and administrators)',
        querystring: activityQuery,
        operationId: 'listAccountActivity',
        response: responsesR({ 200: activityPageSchema }, []),
      },
    },
    async (req) => {
      const ctx = req.ctx;
      const access = await selectAccount(ctx.db, ctx.credential, req.query.account_id);
      if (!access.isAccountAdmin) throw new AppError('PERMISSION_DENIED', 'Only owners and administrators of the account can read its activity history.', { required: 'account_admin' });
      const filters = { account: access.account.id, user_id: req.query.user_id ?? null, api_key_id: req.query.api_key_id ?? null, mailbox_id: req.query.mailbox_id ?? null, action: req.query.action ?? null };
      const after = req.query.cursor ? (decodeCursor(ctx.secret, req.query.cursor, 'activity', filters) as [string, string]) : null;
      const rows = await listActivity(
        ctx.db,
        access.account.id,
        { userId: req.query.user_id, apiKeyId: req.query.api_key_id, mailboxId: req.query.mailbox_id, action: req.query.action },
        after,
        req.query.limit + 1,
      );
      const page = toPage(rows, req.query.limit, (r) => [r.created_at, r.id], { secret: ctx.secret, list: 'activity', filters });
      return { success: true as const, data: { account_id: access.account.id, activity: page.items, pagination: page.pagination } };
    },
  );
}
