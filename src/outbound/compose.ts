import type { MailComposerAttachment } from 'nodemailer/lib/mail-composer';
import { newId } from '../ids.ts';

export interface Address {
  address: string;
  name: string | null;
}

export interface ComposeInput {
  from: Address;
  to: string[];
  cc: string[];
  subject: string;
  text: string;
  html?: string | null;
  inReplyTo?: string | null;
  references?: string[];
  attachments?: { filename: string; contentType: string; content: Buffer }[];
  date: Date;
  /** Domain part of the Message-ID (ours, never the recipient's). */
  messageIdDomain: string;
}

export interface Composed {
  raw: Buffer;
  /** Without angle brackets. */
  messageId: string;
}

/** A Message-ID of our own domain: a ULID is unique and reveals nothing but the time. */
export function newMessageId(domain: string): string {
  return `${newId('eml').slice(4).toLowerCase()}@${domain}`;
}

/**
 * Builds the RFC 5322 message with nodemailer's MailComposer. No Bcc exists; attachments come as
 * bytes (never paths or URLs: file and URL access are disabled so content cannot pull either in).
 */
export async function composeMessage(input: ComposeInput): Promise<Composed> {
  const messageId = newMessageId(input.messageIdDomain);
  const attachments: MailComposerAttachment[] = (input.attachments ?? []).map((a) => ({ filename: a.filename, contentType: a.contentType, content: a.content }));
  // Loaded on first use, as the SMTP client is (remote-delivery.ts): many servers never send.
  const { default: MailComposer } = await import('nodemailer/lib/mail-composer');
  const composer = new MailComposer({
    from: input.from.name ? { name: input.from.name, address: input.from.address } : input.from.address,
    to: input.to,
    cc: input.cc.length ? input.cc : undefined,
    subject: input.subject,
    text: input.text,
    html: input.html ?? undefined,
    inReplyTo: input.inReplyTo ? `<${input.inReplyTo}>` : undefined,
    references: input.references?.length ? input.references.map((r) => `<${r}>`) : undefined,
    messageId: `<${messageId}>`,
    date: input.date,
    attachments,
    disableFileAccess: true,
    disableUrlAccess: true,
    xMailer: false,
  });
  const raw = await composer.compile().build();
  return { raw, messageId };
}
