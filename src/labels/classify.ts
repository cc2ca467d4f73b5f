import type { CategoryName } from './categories.ts';

// The built-in labeler: a pure, deterministic function from what we know about a received email to
// at most one category. Same input, same answer; no clock, no network. An LLM provider
// (provider.ts) may replace the answer, except Junk decided here, which always stands.
//
// Rules, first match wins (docs/labels.md explains them for operators):
//  1. Junk: a spam marker (the GTUBE test string in subject or body; any spam flag recorded at
//     receipt; `X-Spam-Flag: YES`, `X-Spam-Status: Yes…` or `X-Spam: yes`), or DMARC `fail` where
//     the sender domain publishes `p=reject` or `p=quarantine`, or SPF `fail` (not softfail) with no
//     passing DKIM signature. ARC is ignored: anyone can seal their own ARC chain.
//  2. Receipts: receipt/invoice/order vocabulary in the subject (English, German, French, Spanish,
//     Italian, Portuguese, Dutch; whole words), or a PDF attachment named like an invoice or receipt.
//     Subject words do not count on replies ("Re: your invoice question" is a conversation).
//  3. Notifications (explicit): `Auto-Submitted` other than `no` (RFC 3834), an auto-reply header,
//     or a typical notification subject (codes, sign-ins, password resets, out-of-office, bounces).
//  4. Newsletters: `List-Unsubscribe`, `List-Id`, or `Precedence: bulk | list | junk`.
//  5. Notifications (sender): a no-reply / notifications / mailer-daemon style sender, or
//     `Precedence: auto_reply`. After Newsletters because many newsletters come from no-reply.
//  6. Personal: a From address and nothing automated (no list headers, no auto headers, no no-reply
//     sender, no bulk-mail service headers such as Feedback-ID or X-Mailgun-*).
//  7. Otherwise null: no label.
// `signals` lists every piece of evidence seen (not only the deciding one), for logs and tests.

export interface LabelAddress {
  address: string;
  name: string | null;
}

export interface LabelHeader {
  name: string;
  value: string;
}

export interface LabelListHeaders {
  list_id: string | null;
  list_unsubscribe: string | null;
  list_unsubscribe_post?: string | null;
  precedence: string | null;
  auto_submitted: string | null;
}

/**
 * The authentication summary stored in `emails.auth_results`, typed structurally (every field
 * optional) because it is read back from JSON and written by the inbound pipeline.
 */
export interface LabelAuth {
  spf?: { result?: string | null; domain?: string | null } | null;
  dkim?: readonly { result?: string | null; domain?: string | null; selector?: string | null; aligned?: boolean | null }[] | null;
  dmarc?: { result?: string | null; policy?: string | null; domain?: string | null } | null;
  arc?: { result?: string | null } | null;
}

export interface LabelInput {
  subject: string | null;
  from: LabelAddress[];
  /** Top-level header fields; empty when message.json could not be read. */
  headers: LabelHeader[];
  /** Parsed list headers; null when unknown (then `headers` is consulted). */
  listHeaders: LabelListHeaders | null;
  bodyText: string | null;
  auth: LabelAuth | null;
  spamFlags: string[];
  attachments: { filename: string; content_type: string }[];
}

export interface Classification {
  category: CategoryName | null;
  signals: string[];
}

export const GTUBE = 'XJS*C4JDBQADN1.NSBN3*2IDNEN*GTUBE-STANDARD-ANTI-UBE-TEST-EMAIL*C.34X';

// Whole words in any script: a letter or digit may not touch the phrase on either side.
const words = (alternatives: string[]) => new RegExp(`(?<![\\p{L}\\p{N}])(?:${alternatives.join('|')})(?![\\p{L}\\p{N}])`, 'iu');

const RECEIPT_SUBJECT = words([
  'receipts?',
  'invoices?',
  'order confirm(?:ation|ed)',
  'payment (?:received|confirmation|confirmed)',
  'purchase confirmation',
  'your order',
  'rechnung(?:en)?',
  'quittung',
  'bestellbestätigung',
  'zahlungsbestätigung',
  '(?:ihre|deine) bestellung',
  'factures?',
  'votre reçu',
  'confirmation de (?:commande|paiement)',
  'votre commande',
  'paiement reçu',
  'recibos?',
  'facturas?',
  'confirmación de (?:pedido|pago)',
  '(?:su|tu) pedido',
  'pago recibido',
  'ricevuta',
  'fattura',
  '(?:il tuo|il vostro) ordine',
  'fatura',
  'seu pedido',
  'factuur',
  'bestelbevestiging',
  '(?:uw|je) bestelling',
]);

// In attachment names `_`, `-` and digits separate words ("Invoice_2024-001.pdf").
const RECEIPT_FILENAME = /(?<!\p{L})(?:invoice|receipt|rechnung|quittung|facture|factura|fatura|fattura|factuur|recibo|ricevuta)(?!\p{L})/iu;

const NOTIFICATION_SUBJECT = words([
  'verification code',
  'security code',
  'one[- ]time (?:pass)?code',
  'one[- ]time password',
  'otp',
  '2fa',
  'sign[- ]?in (?:alert|attempt|notification)',
  'new (?:sign[- ]?in|login)',
  'login (?:alert|attempt|notification)',
  'password reset',
  'reset your password',
  '(?:confirm|verify) your (?:email|e-mail|account|address)',
  'activate your account',
  'security alert',
  'account alert',
  'delivery status notification',
  'undeliverable',
  'undelivered mail',
  'mail delivery (?:failed|failure|subsystem)',
  'returned mail',
  'out of (?:the )?office',
  'automatic reply',
  'auto[- ]?reply',
  'abwesenheitsnotiz',
  'automatische antwort',
  'réponse automatique',
  'respuesta automática',
]);

const NOREPLY_LOCAL = /^(?:.*no[-_.]?reply.*|.*do[-_.]?not[-_.]?reply.*|notifications?|notify|alerts?|mailer[-_.]?daemon|postmaster|bounces?|automated|daemon)(?:[-+_.].*)?$/i;

// Headers that bulk-mail services add; their presence means "sent by a machine on someone's behalf".
const BULK_HEADER = /^(?:feedback-id|x-campaign.*|x-mailgun-.*|x-ses-outgoing|x-sg-eid|x-mc-user|x-mailchimp-.*|x-pm-message-id|x-csa-complaints|x-mailer-recptid)$/i;
const AUTOREPLY_HEADER = /^(?:x-autoreply|x-autorespond)$/i;

const REPLY_PREFIX = /^\s*(?:re|aw|sv|antw|vs|rif|r)\s*(?:\[\d+\])?\s*:/i;

function headerValue(headers: LabelHeader[], name: string): string | null {
  const lower = name.toLowerCase();
  return headers.find((h) => h.name.toLowerCase() === lower)?.value.trim() ?? null;
}

function listHeadersOf(input: LabelInput): LabelListHeaders {
  const h = input.headers;
  const l = input.listHeaders;
  return {
    list_id: l?.list_id ?? headerValue(h, 'List-Id'),
    list_unsubscribe: l?.list_unsubscribe ?? headerValue(h, 'List-Unsubscribe'),
    precedence: l?.precedence ?? headerValue(h, 'Precedence'),
    auto_submitted: l?.auto_submitted ?? headerValue(h, 'Auto-Submitted'),
  };
}

const lower = (s: string | null | undefined) => (s ?? '').trim().toLowerCase();

function junkSignals(input: LabelInput): string[] {
  const out: string[] = [];
  if ((input.subject ?? '').includes(GTUBE) || (input.bodyText ?? '').includes(GTUBE)) out.push('gtube');
  for (const flag of input.spamFlags) out.push(`spam_flag:${flag}`);
  if (lower(headerValue(input.headers, 'X-Spam-Flag')) === 'yes') out.push('x-spam-flag');
  if (/^yes\b/i.test(headerValue(input.headers, 'X-Spam-Status') ?? '')) out.push('x-spam-status');
  if (lower(headerValue(input.headers, 'X-Spam')) === 'yes') out.push('x-spam');
  const auth = input.auth;
  if (auth) {
    const dmarcPolicy = lower(auth.dmarc?.policy);
    if (lower(auth.dmarc?.result) === 'fail' && (dmarcPolicy === 'reject' || dmarcPolicy === 'quarantine')) out.push(`dmarc_fail:${dmarcPolicy}`);
    const dkimPass = (auth.dkim ?? []).some((d) => lower(d?.result) === 'pass');
    if (lower(auth.spf?.result) === 'fail' && !dkimPass) out.push('spf_fail_without_dkim');
  }
  return out;
}

function isPdf(a: { filename: string; content_type: string }): boolean {
  return lower(a.content_type) === 'application/pdf' || /\.pdf$/i.test(a.filename);
}

export function classify(input: LabelInput): Classification {
  const signals: string[] = [];
  const subject = input.subject ?? '';
  const isReply = REPLY_PREFIX.test(subject);
  if (isReply) signals.push('reply_subject');

  const junk = junkSignals(input);
  signals.push(...junk);

  const receiptSubject = !isReply && RECEIPT_SUBJECT.exec(subject);
  if (receiptSubject) signals.push(`receipt_subject:${receiptSubject[0].toLowerCase()}`);
  const receiptPdf = input.attachments.find((a) => isPdf(a) && RECEIPT_FILENAME.test(a.filename));
  if (receiptPdf) signals.push('receipt_pdf');

  const list = listHeadersOf(input);
  const autoSubmitted = lower(list.auto_submitted).split(/[\s;]/)[0];
  if (autoSubmitted && autoSubmitted !== 'no') signals.push(`auto_submitted:${autoSubmitted}`);
  const autoReplyHeader = input.headers.find((h) => AUTOREPLY_HEADER.test(h.name));
  if (autoReplyHeader) signals.push(`autoreply_header:${autoReplyHeader.name.toLowerCase()}`);
  const notificationSubject = !isReply && NOTIFICATION_SUBJECT.exec(subject);
  if (notificationSubject) signals.push(`notification_subject:${notificationSubject[0].toLowerCase()}`);

  if (list.list_unsubscribe) signals.push('list_unsubscribe');
  if (list.list_id) signals.push('list_id');
  const precedence = lower(list.precedence);
  if (precedence === 'bulk' || precedence === 'list' || precedence === 'junk') signals.push(`precedence:${precedence}`);
  if (precedence === 'auto_reply') signals.push('precedence:auto_reply');

  const sender = input.from[0]?.address ?? '';
  const local = sender.includes('@') ? sender.slice(0, sender.lastIndexOf('@')) : sender;
  if (local && NOREPLY_LOCAL.test(local)) signals.push('noreply_sender');
  const bulkHeader = input.headers.find((h) => BULK_HEADER.test(h.name));
  if (bulkHeader) signals.push(`bulk_header:${bulkHeader.name.toLowerCase()}`);

  const has = (prefix: string) => signals.some((s) => s === prefix || s.startsWith(`${prefix}:`));
  const explicitNotification = has('auto_submitted') || has('autoreply_header') || has('notification_subject');
  const listMail = has('list_unsubscribe') || has('list_id') || ['bulk', 'list', 'junk'].includes(precedence);
  const senderNotification = has('noreply_sender') || precedence === 'auto_reply';

  let category: CategoryName | null = null;
  if (junk.length > 0) category = 'Junk';
  else if (receiptSubject || receiptPdf) category = 'Receipts';
  else if (explicitNotification) category = 'Notifications';
  else if (listMail) category = 'Newsletters';
  else if (senderNotification) category = 'Notifications';
  else if (sender && !bulkHeader) {
    signals.push('person_to_person');
    category = 'Personal';
  }
  return { category, signals };
}
