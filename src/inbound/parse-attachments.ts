import { createHash } from 'node:crypto';
import type { Attachment } from 'postal-mime';
import type { ParsedAttachment, ParseLimits } from './parse-types.ts';

// Attachments as postal-mime found them, made safe to store as files next to message.eml and
// message.json: safe and unique basenames, valid content types, caps on count and total size.

export const MAX_FILENAME_BYTES = 200;
const RESERVED = new Set(['message.eml', 'message.json']);
// Control characters (C0, DEL, C1), zero-width and bidirectional controls, and characters that
// are path separators or invalid in Windows file names.
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff/\\:*?"<>|]/g;
const CONTENT_TYPE = /^[a-z0-9][a-z0-9!#$&^_.+-]{0,126}\/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}$/;

const EXT_BY_TYPE: Record<string, string> = {
  'image/png': 'png', 'image/jpeg': 'jpg', 'image/gif': 'gif', 'image/webp': 'webp', 'image/bmp': 'bmp', 'image/tiff': 'tiff',
  'application/pdf': 'pdf', 'text/plain': 'txt', 'text/html': 'html', 'text/csv': 'csv', 'text/calendar': 'ics',
  'application/ics': 'ics', 'message/rfc822': 'eml', 'message/global': 'eml', 'application/zip': 'zip', 'application/json': 'json',
  'application/xml': 'xml', 'text/xml': 'xml', 'audio/mpeg': 'mp3', 'video/mp4': 'mp4', 'application/pgp-signature': 'sig',
  'application/pkcs7-signature': 'p7s', 'message/delivery-status': 'txt', 'text/enriched': 'txt', 'text/rfc822-headers': 'txt',
};

export function safeContentType(mimeType: unknown): string {
  const t = typeof mimeType === 'string' ? mimeType.trim().toLowerCase() : '';
  return CONTENT_TYPE.test(t) ? t : 'application/octet-stream';
}

function truncateBytes(s: string, maxBytes: number): string {
  if (Buffer.byteLength(s) <= maxBytes) return s;
  let out = '';
  let bytes = 0;
  for (const ch of s) {
    const n = Buffer.byteLength(ch);
    if (bytes + n > maxBytes) break;
    out += ch;
    bytes += n;
  }
  return out;
}

function splitExt(name: string): { stem: string; ext: string } {
  const dot = name.lastIndexOf('.');
  if (dot <= 0 || dot === name.length - 1 || name.length - dot > 17) return { stem: name, ext: '' };
  return { stem: name.slice(0, dot), ext: name.slice(dot) };
}

/** A name that fits in maxBytes, keeping the extension. */
function fit(stem: string, ext: string, maxBytes: number): string {
  return truncateBytes(stem, maxBytes - Buffer.byteLength(ext)).replace(/[ .]+$/, '') + ext;
}

/**
 * A safe basename from a sender-supplied name, or null when nothing usable is left: the part after
 * the last `/` or `\`, NFC, control/look-alike/separator characters replaced, no leading or
 * trailing dots or spaces (so never `.` or `..`), at most 200 UTF-8 bytes with the extension kept.
 */
export function safeFilename(raw: unknown): string | null {
  if (typeof raw !== 'string') return null;
  let name = raw.slice(0, 4096).normalize('NFC');
  name = name.split(/[/\\]/).filter((s) => s.trim() !== '').pop() ?? '';
  name = name.replace(UNSAFE, '_').replace(/\s+/g, ' ').replace(/^[ ._]+|[ .]+$/g, '');
  if (!/[\p{L}\p{N}]/u.test(name)) return null;
  const { stem, ext } = splitExt(name);
  const fitted = fit(stem, ext, MAX_FILENAME_BYTES);
  return fitted.replace(/^[ .]+/, '') || null;
}

export function generatedFilename(index: number, contentType: string): string {
  return `attachment-${index}.${EXT_BY_TYPE[contentType] ?? 'bin'}`;
}

/** Makes `name` unique (case-insensitively) among `taken` and distinct from message.eml/json. */
function uniqueName(name: string, taken: Set<string>): string {
  let candidate = name;
  const { stem, ext } = splitExt(name);
  for (let n = 2; taken.has(candidate.toLowerCase()) || RESERVED.has(candidate.toLowerCase()); n++) {
    const suffix = ` (${n})`;
    candidate = fit(stem, suffix + ext, MAX_FILENAME_BYTES).replace(/^[ .]+/, '');
  }
  taken.add(candidate.toLowerCase());
  return candidate;
}

function contentBuffer(content: Attachment['content']): Buffer {
  if (typeof content === 'string') return Buffer.from(content, 'utf8');
  if (content instanceof ArrayBuffer) return Buffer.from(content);
  if (ArrayBuffer.isView(content)) return Buffer.from(content.buffer, content.byteOffset, content.byteLength);
  return Buffer.alloc(0);
}

function contentId(raw: unknown): string | null {
  if (typeof raw !== 'string') return null;
  const id = raw.trim().replace(/^<|>$/g, '').trim();
  return id && id.length <= 998 && /^[^\s<>\u0000-\u001f\u007f]+$/.test(id) ? id : null;
}

export interface AttachmentResult {
  attachments: ParsedAttachment[];
  omitted: number;
}

/**
 * Applies the caps in document order: an attachment that would pass maxAttachments or
 * maxAttachmentBytes is omitted (and counted); later, smaller ones may still be kept.
 */
export function collectAttachments(found: Attachment[], limits: ParseLimits, warn: (code: string) => void): AttachmentResult {
  const attachments: ParsedAttachment[] = [];
  const taken = new Set<string>();
  let omitted = 0;
  let total = 0;
  for (const a of found) {
    const content = contentBuffer(a.content);
    if (attachments.length >= limits.maxAttachments) {
      omitted++;
      warn('attachments_over_count_cap');
      continue;
    }
    if (total + content.length > limits.maxAttachmentBytes) {
      omitted++;
      warn('attachments_over_size_cap');
      continue;
    }
    total += content.length;
    const content_type = safeContentType(a.mimeType);
    if (a.rfc822DepthExceeded) warn('rfc822_depth_exceeded');
    const safe = safeFilename(a.filename);
    if (a.filename && safe !== a.filename.normalize('NFC')) warn('attachment_filename_repaired');
    const filename = uniqueName(safe ?? generatedFilename(attachments.length + 1, content_type), taken);
    attachments.push({
      filename,
      content_type,
      size_bytes: content.length,
      disposition: a.disposition === 'inline' ? 'inline' : 'attachment',
      content_id: contentId(a.contentId),
      content,
      sha256: createHash('sha256').update(content).digest('hex'),
    });
  }
  return { attachments, omitted };
}
