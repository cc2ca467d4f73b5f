import { addressesOf, normalizeAddress } from './parse-addresses.ts';
import { collectAttachments } from './parse-attachments.ts';
import { buildBody } from './parse-body.ts';
import {
  capUtf8, decodeRaw, decodeUnstructured, firstField, headerFallbackDecoder, headerList, isUtf7, readHeaderBlock, topLevelCharset, type HeaderBlock,
} from './parse-headers.ts';
import { inReplyToOf, messageIdOf, referencesOf } from './parse-ids.ts';
import { readRaw, type RawMessage } from './parse-input.ts';
import { parseMime } from './parse-mime.ts';
import {
  DEFAULT_LIMITS, type BodyStatus, type ListHeaders, type MessageJson, type ParsedAttachment, type ParsedEmail, type ParseLimits, type ParseOptions,
} from './parse-types.ts';

export type { RawMessage } from './parse-input.ts';
export * from './parse-types.ts';

/**
 * The pure parsing step of the inbound pipeline: raw message bytes (a Buffer, or a stream of the
 * stored blob) to everything the email row and message.json need. Never throws on any message:
 * a message it cannot parse comes back with `body_status: 'unavailable'` and whatever headers it
 * could decode. It rejects only when reading a stream fails (a storage fault the caller must see).
 * Memory and CPU are bounded by the caps in ParseLimits (docs/inbound-parsing.md).
 */
export async function parseMessage(raw: RawMessage, opts: ParseOptions): Promise<ParsedEmail> {
  const limits = resolveLimits(opts);
  const receivedAt = opts?.receivedAt instanceof Date && Number.isFinite(opts.receivedAt.getTime()) ? opts.receivedAt : new Date();
  const rawTo = typeof opts?.deliveredTo === 'string' ? opts.deliveredTo : '';
  const deliveredTo = normalizeAddress(rawTo) ?? rawTo.replace(/[\u0000-\u001f\u007f]/g, '').trim().slice(0, 320);
  const input = await readRaw(raw, limits.maxParseBytes);
  const warnings = new Set<string>();
  const warn = (code: string) => void warnings.add(code);
  try {
    return await parseBytes(input.bytes, input.cut, limits, deliveredTo, receivedAt, warnings, warn);
  } catch {
    // A bug of ours, not of the message: still store it, without a parsed body.
    warn('internal_parse_error');
    return finish({ ...emptyFields(), delivered_to: deliveredTo, received_at: receivedAt, body_status: 'unavailable' }, warnings);
  }
}

function resolveLimits(opts: Partial<ParseLimits> | undefined): ParseLimits {
  const limits = { ...DEFAULT_LIMITS };
  for (const key of Object.keys(DEFAULT_LIMITS) as (keyof ParseLimits)[]) {
    const v = opts?.[key];
    if (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0) limits[key] = v;
  }
  return limits;
}

type Fields = Omit<ParsedEmail, 'warnings' | 'messageJson' | 'conversation_hint'>;

function emptyFields(): Omit<Fields, 'delivered_to' | 'received_at' | 'body_status'> {
  return {
    subject: null, date: null, from_addresses: [], to_addresses: [], cc_addresses: [], reply_to_addresses: [], message_id: null,
    in_reply_to: [], references: [], headers: [], headers_truncated: false, list_headers: listHeadersOf(null, null),
    body_text: null, body_html_sanitized: null, attachments: [], attachment_count: 0, omitted_attachment_count: 0,
  };
}

function listHeadersOf(block: HeaderBlock | null, fallback: TextDecoder | null): ListHeaders {
  const get = (name: string) => {
    const f = block ? firstField(block, name) : undefined;
    return f ? capUtf8(decodeUnstructured(f, fallback), 2048).value || null : null;
  };
  return {
    list_id: get('list-id'), list_unsubscribe: get('list-unsubscribe'), list_unsubscribe_post: get('list-unsubscribe-post'),
    precedence: get('precedence'), auto_submitted: get('auto-submitted'),
  };
}

function subjectOf(block: HeaderBlock, limits: ParseLimits, fallback: TextDecoder | null, warn: (c: string) => void): string | null {
  const f = firstField(block, 'subject');
  if (!f) return null;
  let s = decodeUnstructured(f, fallback);
  if (s.length > limits.maxSubjectChars || f.cut) {
    s = s.slice(0, limits.maxSubjectChars).replace(/[\ud800-\udbff]$/, '');
    warn('subject_truncated');
  }
  return s;
}

function dateOf(block: HeaderBlock): string | null {
  const f = firstField(block, 'date');
  if (!f) return null;
  const d = new Date(decodeRaw(f.raw.subarray(0, 200), null).trim());
  return Number.isFinite(d.getTime()) && d.getUTCFullYear() >= 1970 && d.getUTCFullYear() < 10000 ? d.toISOString() : null;
}

async function parseBytes(
  bytes: Buffer, cut: boolean, limits: ParseLimits, deliveredTo: string, receivedAt: Date, warnings: Set<string>, warn: (c: string) => void,
): Promise<ParsedEmail> {
  if (cut) warn('message_cut_at_parse_limit');
  const block = readHeaderBlock(bytes, limits);
  if (block.truncated) warn('headers_truncated');
  if (block.malformed > 0) warn('malformed_header_lines');
  const fallback = headerFallbackDecoder(block);
  const { headers, truncated: headersTruncated } = headerList(block, limits, fallback);
  const fields: Fields = {
    ...emptyFields(),
    subject: subjectOf(block, limits, fallback, warn),
    date: dateOf(block),
    from_addresses: addressesOf(block, 'from', limits, fallback, warn, { firstFieldOnly: true }),
    to_addresses: addressesOf(block, 'to', limits, fallback, warn),
    cc_addresses: addressesOf(block, 'cc', limits, fallback, warn),
    reply_to_addresses: addressesOf(block, 'reply-to', limits, fallback, warn),
    message_id: messageIdOf(block, limits, warn),
    in_reply_to: inReplyToOf(block, limits, warn),
    references: referencesOf(block, limits, warn),
    delivered_to: deliveredTo,
    received_at: receivedAt,
    headers,
    headers_truncated: headersTruncated,
    list_headers: listHeadersOf(block, fallback),
    body_status: 'unavailable',
  };

  const mime = await parseMime(bytes, block, limits, warn);
  if (!mime.email) {
    warn('mime_unparseable');
    return finish(fields, warnings);
  }
  const body = buildBody(mime.email, limits, warn, { utf7: isUtf7(topLevelCharset(block)) });
  let found = mime.email.attachments ?? [];
  let omitted = 0;
  if (cut && found.length > 0) {
    // The part the cut went through is the last one postal-mime found; it may be incomplete.
    found = found.slice(0, -1);
    omitted++;
  }
  if (mime.omittedParts > 0) {
    warn('mime_parts_over_cap');
    omitted += mime.omittedParts;
  }
  const { attachments, omitted: overCaps } = collectAttachments(found, limits, warn);
  const truncated = body.truncated || cut || mime.omittedParts > 0;
  const status: BodyStatus = truncated ? 'truncated' : body.text === null && body.html === null ? 'empty' : 'complete';
  return finish({
    ...fields,
    body_text: body.text,
    body_html_sanitized: body.html,
    body_status: status,
    attachments,
    attachment_count: attachments.length,
    omitted_attachment_count: omitted + overCaps,
  }, warnings);
}

function summary(a: ParsedAttachment) {
  const { content: _bytes, ...rest } = a;
  return rest;
}

function finish(fields: Fields, warnings: Set<string>): ParsedEmail {
  const list = [...warnings].sort();
  return {
    ...fields,
    conversation_hint: fields.references[0] ?? fields.in_reply_to[0] ?? null,
    warnings: list,
    messageJson(): MessageJson {
      return {
        version: 1,
        message_id: fields.message_id,
        subject: fields.subject,
        date: fields.date,
        from: fields.from_addresses,
        to: fields.to_addresses,
        cc: fields.cc_addresses,
        reply_to: fields.reply_to_addresses,
        in_reply_to: fields.in_reply_to,
        references: fields.references,
        delivered_to: fields.delivered_to,
        received_at: fields.received_at.toISOString(),
        headers: fields.headers,
        headers_truncated: fields.headers_truncated,
        list_headers: fields.list_headers,
        body_status: fields.body_status,
        text: fields.body_text,
        html: fields.body_html_sanitized,
        attachments: fields.attachments.map(summary),
        attachment_count: fields.attachment_count,
        omitted_attachment_count: fields.omitted_attachment_count,
        warnings: list,
      };
    },
  };
}
