// Types and caps of the pure parsing step of inbound email (see docs/inbound-parsing.md).
// parseMessage() turns the raw bytes of one received message into a ParsedEmail: everything an
// email row and `message.json` need. It never throws on any input.

export type BodyStatus = 'complete' | 'empty' | 'truncated' | 'unavailable';

export interface EmailAddress {
  /** Local part as sent, domain lower-cased (and NFC). */
  address: string;
  /** Decoded display name, or null when there is none. Never an identity key. */
  name: string | null;
}

export interface HeaderField {
  /** Field name as sent (case preserved). */
  name: string;
  /** Unfolded value with RFC 2047 words decoded; control characters removed; capped. */
  value: string;
}

export interface ListHeaders {
  list_id: string | null;
  list_unsubscribe: string | null;
  list_unsubscribe_post: string | null;
  precedence: string | null;
  auto_submitted: string | null;
}

export interface ParsedAttachment {
  /** Safe basename: no path, control or look-alike characters, NFC, at most 200 bytes, unique in the email. */
  filename: string;
  /** Lower-case MIME type, `application/octet-stream` when the part's is not a valid type. */
  content_type: string;
  size_bytes: number;
  disposition: 'attachment' | 'inline';
  /** Content-ID without angle brackets, or null. */
  content_id: string | null;
  content: Buffer;
  /** Lower-case hex SHA-256 of `content`. */
  sha256: string;
}

export type AttachmentSummary = Omit<ParsedAttachment, 'content'>;

/** The object stored as `message.json` (attachment bytes are separate files). */
export interface MessageJson {
  version: 1;
  message_id: string | null;
  subject: string | null;
  date: string | null;
  from: EmailAddress[];
  to: EmailAddress[];
  cc: EmailAddress[];
  reply_to: EmailAddress[];
  in_reply_to: string[];
  references: string[];
  delivered_to: string;
  received_at: string;
  headers: HeaderField[];
  headers_truncated: boolean;
  list_headers: ListHeaders;
  body_status: BodyStatus;
  text: string | null;
  html: string | null;
  attachments: AttachmentSummary[];
  attachment_count: number;
  omitted_attachment_count: number;
  warnings: string[];
}

export interface ParsedEmail {
  subject: string | null;
  /** The sender's Date header as ISO 8601, or null when absent or unparseable. */
  date: string | null;
  from_addresses: EmailAddress[];
  to_addresses: EmailAddress[];
  cc_addresses: EmailAddress[];
  reply_to_addresses: EmailAddress[];
  message_id: string | null;
  in_reply_to: string[];
  references: string[];
  /** First id of References, else of In-Reply-To, else null; the store maps it to a conversation. */
  conversation_hint: string | null;
  delivered_to: string;
  received_at: Date;
  headers: HeaderField[];
  headers_truncated: boolean;
  list_headers: ListHeaders;
  body_text: string | null;
  body_html_sanitized: string | null;
  body_status: BodyStatus;
  attachments: ParsedAttachment[];
  attachment_count: number;
  omitted_attachment_count: number;
  /** Short machine-readable codes for everything that was capped, dropped or repaired. */
  warnings: string[];
  /** The exact object to store as message.json. */
  messageJson(): MessageJson;
}

export interface ParseLimits {
  /** Bytes of the raw message that are parsed at all; the rest is not read (body `truncated`). */
  maxParseBytes: number;
  /** Attachments kept; later ones are counted in omitted_attachment_count. */
  maxAttachments: number;
  /** Total decoded bytes of kept attachments. */
  maxAttachmentBytes: number;
  /** Header fields of the top-level header block that are looked at. */
  maxHeaderFieldsScanned: number;
  /** Bytes of the top-level header block that are looked at. */
  maxHeaderBlockBytes: number;
  /** Header fields kept in `headers`. */
  maxHeaders: number;
  /** UTF-8 bytes of each kept header value. */
  maxHeaderValueBytes: number;
  /** Raw bytes of a structured field (addresses, ids) that are parsed. */
  maxStructuredValueBytes: number;
  /** Addresses kept per field. */
  maxAddressesPerField: number;
  maxInReplyTo: number;
  /** References kept: the first (thread root) and the most recent ones. */
  maxReferences: number;
  maxIdLength: number;
  maxSubjectChars: number;
  /** UTF-8 bytes of body_text. */
  maxTextBytes: number;
  /** Bytes of HTML given to the sanitizer (cut before sanitizing, so the output stays well-formed). */
  maxHtmlBytes: number;
  /** MIME boundary delimiters (≈ parts) given to the MIME parser; the message is cut before the next. */
  maxMimeParts: number;
  /** MIME multipart nesting; deeper messages are not parsed (body `unavailable`). */
  maxMimeDepth: number;
  /** message/rfc822 parts parsed inline this deep; deeper ones are kept as .eml attachments. */
  maxRfc822Depth: number;
  /** Header bytes of all MIME parts together (the top-level block is counted separately). */
  maxPartHeaderBytes: number;
}

const MiB = 1024 * 1024;

export const DEFAULT_LIMITS: Readonly<ParseLimits> = Object.freeze({
  maxParseBytes: 50 * MiB,
  maxAttachments: 100,
  maxAttachmentBytes: 50 * MiB,
  maxHeaderFieldsScanned: 10_000,
  maxHeaderBlockBytes: 2 * MiB,
  maxHeaders: 500,
  maxHeaderValueBytes: 8 * 1024,
  maxStructuredValueBytes: 64 * 1024,
  maxAddressesPerField: 500,
  maxInReplyTo: 20,
  maxReferences: 100,
  maxIdLength: 998,
  maxSubjectChars: 1000,
  maxTextBytes: 1 * MiB,
  maxHtmlBytes: 2 * MiB,
  maxMimeParts: 1000,
  maxMimeDepth: 50,
  maxRfc822Depth: 10,
  maxPartHeaderBytes: 1 * MiB,
});

export interface ParseOptions extends Partial<ParseLimits> {
  /** The envelope recipient (RCPT TO) the message was delivered to. */
  deliveredTo: string;
  receivedAt: Date;
}

/** A ParsedEmail as plain data, without messageJson() (it crosses to and from a worker thread). */
export type ParsedFields = Omit<ParsedEmail, 'messageJson'>;
