import { z } from 'zod';
import { okR, responsesR } from '../http/contract.ts';
import { EmailSummaryOne } from '../emails/emails.responses.ts';
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { writeBody } from '../http/schemas.ts';
import { reasonOf, selector } from '../mailboxes/mailboxes.routes.ts';
import { presentOneSummary, viewerOf } from '../emails/emails.present.ts';
import { sendEmail, MAX_RECIPIENTS } from './send.service.ts';

// Surface R: POST /v1/mailboxes/{mailbox_id}/emails (write). 202: the sent email's summary with
// `delivery.status: queued`; delivery happens in the background (src/outbound/deliver.ts).

type App = FastifyInstance<any, any, any, any, ZodTypeProvider>;

const SEND_BODY_LIMIT = 16 * 1024 * 1024;

const address = z.email().max(320);
const sendBody = writeBody({
  to: z.array(address).max(MAX_RECIPIENTS * 2).optional().describe('Recipients; with in_reply_to it defaults to the original sender when that sender passed SPF or DMARC'),
  cc: z.array(address).max(MAX_RECIPIENTS * 2).optional().describe('Copy recipients (no bcc); to plus cc: at most 10 addresses'),
  subject: z.string().max(998).nullable().optional().describe('Required without in_reply_to; a reply defaults to "Re: " plus the original subject'),
  text: z.string().describe('Plain-text body, up to 1 MiB'),
  html: z.string().nullable().optional().describe('HTML body, up to 1 MiB'),
  in_reply_to: z.string().max(100).nullable().optional().describe('Id of a received email of this mailbox: sets In-Reply-To and References and joins its conversation'),
  attachment_ids: z.array(z.string().max(100)).max(100).optional().describe('Ids of current files of this mailbox to attach'),
});

export function registerSendRoutesR(app: App) {
  app.post(
    '/mailboxes/:mailbox_id/emails',
    {
      // text and html may each be 1 MiB of UTF-8; JSON escaping can make that several times larger on
      // the wire. The service then checks the decoded sizes and answers EMAIL_BODY_TOO_LARGE.
      bodyLimit: SEND_BODY_LIMIT,
      schema: {
        operationId: 'sendEmail',
        response: responsesR({ 202: okR(EmailSummaryOne) }, [
          'MAILBOX_NOT_FOUND', 'MAILBOX_ARCHIVED', 'MAILBOX_FILE_NOT_FOUND', 'EMAIL_NOT_FOUND', 'EMAIL_ATTACHMENT_NOT_FOUND', 'EMAIL_SENDING_DISABLED', 'EMAIL_NOT_VERIFIED', 'EMAIL_RECIPIENT_REQUIRED', 'EMAIL_TOO_MANY_RECIPIENTS', 'EMAIL_BODY_TOO_LARGE',
          'EMAIL_ATTACHMENTS_TOO_LARGE', 'EMAIL_REPLY_TARGET_INVALID', 'EMAIL_RECIPIENT_NOT_ALLOWED', 'EMAIL_RECIPIENT_UNAUTHENTICATED', 'EMAIL_RECIPIENT_PLAN_REQUIRED',
          'EMAIL_SEND_LIMIT_REACHED', 'EMAIL_SEND_RATE_LIMITED', 'EMAIL_WITHHELD', 'EMAIL_LABELING_PENDING',
        ], { write: true, describe: { 202: 'Accepted: the sent email with delivery.status queued; delivery happens in the background' } }),
        tags: ['emails'],
        summary: 'Send an email or a reply (write permission); 202 with the sent email, delivery.status queued. No idempotency key: after an unknown result, list direction=sent before sending again',
        params: z.object({ mailbox_id: z.string().min(1).max(100) }),
        body: sendBody,
      },
    },
    async (req, reply) => {
      const b = req.body;
      const email = await sendEmail(req.ctx, {
        accountId: selector(req),
        mailboxId: req.params.mailbox_id,
        to: b.to,
        cc: b.cc,
        subject: b.subject,
        text: b.text,
        html: b.html,
        inReplyTo: b.in_reply_to,
        attachmentIds: b.attachment_ids,
        reason: reasonOf(req),
      });
      return reply.code(202).send({ success: true, data: { email: await presentOneSummary(req.ctx.db, email, viewerOf(req.ctx)) } });
    },
  );
}
