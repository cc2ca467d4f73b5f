import type { Kysely } from 'kysely';
import type { AppDeps } from '../context.ts';
import type { DB } from '../db/schema.ts';
import { AppError } from '../errors.ts';
import { newId } from '../ids.ts';
import { composeMessage } from './compose.ts';
import { queueOutbound } from './queue.ts';

export interface SystemMail {
  to: string;
  subject: string;
  text: string;
  html?: string;
}

const ADDRESS = /^[^\s@<>()[\],;:"\\]{1,64}@[^\s@<>()[\],;:"\\]{1,253}$/;

/** The From of mail the service sends itself: `Cubby <no-reply@CUBBY_MAIL_DOMAIN>`. */
export function systemFrom(deps: AppDeps): { name: string; address: string } {
  return { name: 'Cubby', address: `no-reply@${deps.config.mailDomain}` };
}

/**
 * Mail the service sends itself (sign-in codes, publish-failed notices, site access codes). Composes
 * the message and queues a durable delivery job: our own mailbox addresses are delivered through the
 * inbound pipeline, others through CUBBY_SMTP_RELAY_URL or the recipient's MX, like mailbox mail but
 * without its send rules or allowances. The body is sealed at rest (it may hold a code) and dropped
 * once delivery is final. Pass `opts.db` to queue inside a transaction of yours (the outbox: the mail
 * goes only if your change commits); otherwise it commits on its own.
 */
export async function sendSystemMail(deps: AppDeps, msg: SystemMail, opts: { db?: Kysely<DB> } = {}): Promise<void> {
  const to = msg.to.trim().toLowerCase();
  if (!ADDRESS.test(to)) throw new AppError('INVALID_ARGUMENT', 'not a valid email address', { field: 'to' });
  const from = systemFrom(deps);
  const composed = await composeMessage({
    from,
    to: [to],
    cc: [],
    subject: msg.subject,
    text: msg.text,
    html: msg.html ?? null,
    date: deps.now(),
    messageIdDomain: deps.config.mailDomain,
  });
  const queue = (trx: Kysely<DB>) =>
    queueOutbound(deps, trx, {
      id: `sys_${newId('eml').slice(4)}`,
      kind: 'system',
      mailboxId: null,
      accountId: null,
      envelopeFrom: from.address,
      messageId: composed.messageId,
      raw: composed.raw,
      recipients: [to],
    });
  if (opts.db) await queue(opts.db);
  else await deps.db.transaction().execute(queue);
}
