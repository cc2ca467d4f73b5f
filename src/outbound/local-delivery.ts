import type { AppDeps } from '../context.ts';
import type { AuthSummary } from '../inbound/authenticate.ts';
import type { AttachmentSummary } from '../inbound/parse-types.ts';
import { AppError } from '../errors.ts';
import { newId } from '../ids.ts';
import { parseMessage } from '../inbound/parse.ts';
import { resolveRecipient, type Recipient } from '../inbound/recipients.ts';
import { storeDeliveries } from '../inbound/store.ts';
import { BlobsForCommit } from '../blobs/inline-blobs.ts';
import { outcomeOfLocalError, type Outcome } from './outcome.ts';

export interface LocalMessage {
  raw: Buffer;
  address: string;
  envelopeFrom: string;
  /** Our Message-ID, without brackets. */
  messageId: string;
}

/**
 * Mail between mailboxes of this service never leaves it: the recipient is routed and checked by the
 * inbound rules (resolveRecipient: receiving state, allowlist, allowances) and stored by the inbound
 * store, as if it had arrived over SMTP. Returns null when the address is not ours.
 *
 * Exactly once: storing is one transaction, but recording `sent` is another. A delivery interrupted
 * between the two is found again by its Message-ID (ours, unique) and envelope sender, and is not
 * stored a second time.
 */
export async function deliverLocal(deps: AppDeps, m: LocalMessage): Promise<Outcome | null> {
  let r: Recipient;
  try {
    r = await resolveRecipient(deps, m.address, m.envelopeFrom, m.raw.length);
  } catch (err) {
    if (err instanceof AppError && err.code === 'RECIPIENT_NOT_LOCAL') return null;
    return outcomeOfLocalError(err);
  }
  if (m.raw.length > r.maxMessageBytes) return outcomeOfLocalError(new AppError('MESSAGE_TOO_LARGE', `${r.address}: message exceeds the limit of ${r.maxMessageBytes} bytes`));
  try {
    const stored = await deps.db
      .selectFrom('emails')
      .select('id')
      .where('mailbox_id', '=', r.mailboxId)
      .where('direction', '=', 'received')
      .where('message_id', '=', m.messageId)
      .where('mail_from', '=', m.envelopeFrom)
      .where('client_ip', 'is', null)
      .executeTakeFirst();
    if (stored) return { status: 'sent', reply: `250 2.0.0 Ok: stored ${stored.id} (already delivered)`, route: 'local' };

    const receivedAt = deps.now();
    const parsed = await parseMessage(m.raw, { deliveredTo: r.address, receivedAt });
    // Small blobs are kept in their rows by the commit, as for mail received by SMTP (src/blobs/inline-blobs.ts).
    const blobs = new BlobsForCommit(deps.blobs, deps.config.blobs.inlineMaxBytes);
    const storedAttachments: AttachmentSummary[] = [];
    for (const a of parsed.attachments) {
      await blobs.put(a.content);
      const { content: _content, ...summary } = a;
      storedAttachments.push(summary);
    }
    const emailId = newId('eml');
    await storeDeliveries(deps, [
      {
        emailId,
        mailboxId: r.mailboxId,
        deliveredTo: r.address,
        receivedAt,
        raw: await blobs.put(m.raw),
        parsed,
        messageJson: await blobs.put(Buffer.from(JSON.stringify({ ...parsed.messageJson(), delivered_to: r.address }, null, 2))),
        storedAttachments,
        inlineBlobs: blobs.inline,
        // No client address: the message never crossed the network. The duplicate check above keys on it.
        envelope: { mailFrom: m.envelopeFrom, clientIp: null, helo: null },
        auth: internalAuth(deps.config.smtpHostname, m.envelopeFrom),
        spamFlags: [],
      },
    ]);
    return { status: 'sent', reply: `250 2.0.0 Ok: stored ${emailId}`, route: 'local' };
  } catch (err) {
    if (err instanceof AppError && (err.code === 'STORAGE_LIMIT_REACHED' || err.code === 'FILE_LIMIT_REACHED')) {
      return outcomeOfLocalError(new AppError('RECEIVED_BYTES_LIMIT_REACHED', `${r.address}: mailbox storage is full`));
    }
    if (err instanceof AppError && (err.code === 'MAILBOX_NOT_FOUND' || err.code === 'MAILBOX_ARCHIVED')) {
      return outcomeOfLocalError(new AppError('MAILBOX_NOT_RECEIVING', `${r.address}: mailbox is no longer receiving`));
    }
    return outcomeOfLocalError(err);
  }
}

/**
 * Authentication results for mail handed over inside the service: the sender is one of our own
 * mailboxes (or the service itself), known without DNS, so SPF and DMARC pass for its own domain.
 * This is what lets the recipient reply (the reply default needs an authenticated sender).
 */
export function internalAuth(mta: string, envelopeFrom: string): AuthSummary {
  const domain = envelopeFrom.slice(envelopeFrom.lastIndexOf('@') + 1).toLowerCase() || null;
  return {
    spf: { result: 'pass', domain, identity: 'mailfrom' },
    dkim: [],
    dmarc: { result: 'pass', policy: null, domain },
    arc: { result: 'none' },
    header: `${mta};\r\n spf=pass (sent by a mailbox of this service) smtp.mailfrom=${envelopeFrom};\r\n dmarc=pass (internal delivery) header.from=${domain ?? ''}`,
  };
}
