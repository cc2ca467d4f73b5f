import { z } from 'zod';
import { Deleted, okR, responsesR } from '../http/contract.ts';
import { DeliveryList, WebhookOne, WebhookTestSent } from './webhooks.responses.ts';
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { accountIdField, pageQuery, reasonField, writeBody } from '../http/schemas.ts';
import { reasonOf, selector } from '../mailboxes/mailboxes.routes.ts';
import { deleteWebhook, getWebhook, listDeliveries, putWebhook, sendTestEvent } from './webhooks.service.ts';
import { presentDelivery, presentWebhook } from './webhooks.present.ts';

// Surface R: the mailbox's webhook (GET/PUT/DELETE …/email/webhook, mailbox-admin) and its
// delivery log (GET …/email/webhook/deliveries), and a signed test event (POST …/email/webhook/test). The live subscription route is in src/live.

type App = FastifyInstance<any, any, any, any, ZodTypeProvider>;
const tags = ['email settings'];
const params = z.object({ mailbox_id: z.string().min(1).max(100) });
const readQuery = z.object({ account_id: accountIdField, reason: reasonField });

export function registerWebhookRoutesR(app: App) {
  app.get(
    '/mailboxes/:mailbox_id/email/webhook',
    { schema: { operationId: 'getEmailWebhook', response: responsesR({ 200: okR(WebhookOne) }, ['MAILBOX_NOT_FOUND']), tags, summary: 'Read the webhook (object or null); the signing secret is never returned (mailbox-admin)', params, querystring: readQuery } },
    async (req) => {
      reasonOf(req);
      const w = await getWebhook(req.ctx, req.query.account_id, req.params.mailbox_id);
      return { success: true, data: { webhook: w ? presentWebhook(w) : null } };
    },
  );

  app.put(
    '/mailboxes/:mailbox_id/email/webhook',
    {
      schema: {
        operationId: 'setEmailWebhook',
        response: responsesR({ 200: okR(WebhookOne) }, ['MAILBOX_NOT_FOUND', 'MAILBOX_ARCHIVED', 'INVALID_EMAIL_WEBHOOK'], { write: true }),
        tags,
        summary: 'Set the webhook URL (public HTTPS); signing_secret is returned once, for a new URL or rotate_secret=true, and waiting deliveries are cancelled (mailbox-admin)',
        params,
        body: writeBody({
          webhook_url: z.string().max(8192).describe('Public HTTPS URL, at most 2048 bytes, no user name, password or fragment'),
          rotate_secret: z.boolean().optional().describe('Issue a new signing secret for the same URL'),
        }),
      },
    },
    async (req) => {
      const { webhook, secret } = await putWebhook(req.ctx, {
        accountId: selector(req),
        mailboxId: req.params.mailbox_id,
        url: req.body.webhook_url,
        rotateSecret: req.body.rotate_secret === true,
        reason: reasonOf(req),
      });
      return { success: true, data: { webhook: presentWebhook(webhook, secret) } };
    },
  );

  app.delete(
    '/mailboxes/:mailbox_id/email/webhook',
    { schema: { operationId: 'deleteEmailWebhook', response: responsesR({ 200: okR(Deleted) }, ['MAILBOX_NOT_FOUND'], { write: true }), tags, summary: 'Remove the webhook and cancel queued deliveries; 200 also when none is set (mailbox-admin)', params, querystring: readQuery, body: writeBody({}).nullish() } },
    async (req) => {
      const result = await deleteWebhook(req.ctx, { accountId: selector(req), mailboxId: req.params.mailbox_id, reason: reasonOf(req) });
      return { success: true, data: result };
    },
  );

  app.get(
    '/mailboxes/:mailbox_id/email/webhook/deliveries',
    {
      schema: {
        operationId: 'listEmailWebhookDeliveries',
        response: responsesR({ 200: okR(DeliveryList) }, ['MAILBOX_NOT_FOUND']),
        tags,
        summary: 'Webhook deliveries, newest first, each with its attempts (status code, latency, error) (mailbox-admin)',
        params,
        querystring: readQuery.extend({
          ...pageQuery,
          status: z.enum(['pending', 'retrying', 'succeeded', 'failed', 'cancelled']).optional().describe('Only deliveries in this state'),
        }),
      },
    },
    async (req) => {
      reasonOf(req);
      const q = req.query;
      const page = await listDeliveries(req.ctx, { accountId: q.account_id, mailboxId: req.params.mailbox_id, limit: q.limit, cursor: q.cursor, status: q.status });
      return { success: true, data: { deliveries: page.items.map(presentDelivery), pagination: page.pagination } };
    },
  );

  app.post(
    '/mailboxes/:mailbox_id/email/webhook/test',
    {
      schema: {
        operationId: 'sendEmailWebhookTest',
        response: responsesR({ 202: okR(WebhookTestSent) }, ['MAILBOX_NOT_FOUND', 'MAILBOX_ARCHIVED', 'EMAIL_WEBHOOK_NOT_FOUND'], { write: true, describe: { 202: 'A signed webhook.test event is queued for the webhook (not the live channel); its delivery shows in the delivery log' } }),
        tags,
        summary: 'Send a signed sample event (type webhook.test) to the webhook, delivered and retried like any other (mailbox-admin)',
        params,
        body: writeBody({}).nullish(),
      },
    },
    async (req, reply) => {
      reasonOf(req);
      const sent = await sendTestEvent(req.ctx, { accountId: selector(req), mailboxId: req.params.mailbox_id });
      reply.code(202);
      return { success: true, data: { event: sent.event, delivery: presentDelivery(sent.delivery) } };
    },
  );
}
