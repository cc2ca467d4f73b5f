import { decodeWords } from 'postal-mime';
import type { HeaderField, ParseLimits } from './parse-types.ts';

// The top-level header block is read here, from the raw bytes, rather than taken from postal-mime:
// postal-mime decodes every header line as UTF-8 (so raw Latin-1 or Shift_JIS subjects become
// U+FFFD, and a raw 8-bit byte inside an encoded word becomes mojibake), and it rejects the whole
// message when the headers pass its size limit. Here the block is capped and scanned once.

export interface RawField {
  name: string;
  lower: string;
  /** Unfolded value bytes, capped at maxStructuredValueBytes. */
  raw: Buffer;
  cut: boolean;
  /** When cut: the last maxStructuredValueBytes of the value (References keeps its latest ids). */
  tail?: Buffer;
}

export interface HeaderBlock {
  fields: RawField[];
  /** Offset of the body (after the blank line); the message length when there is none. */
  bodyStart: number;
  /** Fields or bytes were left unread, or a value was cut. */
  truncated: boolean;
  /** Lines that were neither a field nor a continuation (an mbox `From ` line, junk). */
  malformed: number;
}

const FIELD_NAME = /^[\x21-\x39\x3b-\x7e]{1,256}$/;

function blankLineAfter(bytes: Buffer, from: number): number {
  const lf = bytes.indexOf('\n\n', from, 'latin1');
  const crlf = bytes.indexOf('\n\r\n', from, 'latin1');
  if (lf < 0 && crlf < 0) return bytes.length;
  if (crlf < 0 || (lf >= 0 && lf < crlf)) return lf + 2;
  return crlf + 3;
}

/** Splits the top-level header block into fields, within the caps. */
export function readHeaderBlock(bytes: Buffer, limits: ParseLimits): HeaderBlock {
  const fields: RawField[] = [];
  let parts: Buffer[] | null = null;
  let partsLen = 0;
  let current: Omit<RawField, 'raw'> | null = null;
  let valueStart = 0;
  let valueEnd = 0;
  let truncated = false;
  let malformed = 0;
  let bodyStart = bytes.length;

  const close = () => {
    if (current && parts) {
      const field: RawField = { ...current, raw: Buffer.concat(parts, partsLen) };
      if (field.cut) {
        const tail = bytes.subarray(Math.max(valueStart, valueEnd - limits.maxStructuredValueBytes), valueEnd);
        field.tail = Buffer.from(tail.filter((b) => b !== 0x0d && b !== 0x0a));
      }
      fields.push(field);
    }
    current = null;
    parts = null;
    partsLen = 0;
  };
  const append = (start: number, end: number) => {
    if (!current || !parts) return;
    const room = limits.maxStructuredValueBytes - partsLen;
    if (end - start > room) {
      end = start + Math.max(room, 0);
      current.cut = true;
    }
    if (end > start) {
      parts.push(bytes.subarray(start, end));
      partsLen += end - start;
    }
  };

  let pos = 0;
  while (pos < bytes.length) {
    const nl = bytes.indexOf(0x0a, pos);
    const next = nl < 0 ? bytes.length : nl + 1;
    let end = nl < 0 ? bytes.length : nl;
    if (end > pos && bytes[end - 1] === 0x0d) end--;
    if (end === pos) {
      bodyStart = next;
      break;
    }
    if (pos >= limits.maxHeaderBlockBytes || fields.length >= limits.maxHeaderFieldsScanned) {
      truncated = true;
      bodyStart = blankLineAfter(bytes, Math.max(pos - 1, 0));
      break;
    }
    const first = bytes[pos];
    if (first === 0x20 || first === 0x09) {
      if (current) {
        append(pos, end);
        valueEnd = end;
      } else malformed++;
    } else {
      close();
      const colon = bytes.indexOf(0x3a, pos);
      const name = colon < 0 || colon > end ? '' : bytes.toString('latin1', pos, Math.min(colon, pos + 300)).replace(/[ \t]+$/, '');
      if (FIELD_NAME.test(name)) {
        current = { name, lower: name.toLowerCase(), cut: false };
        parts = [];
        valueStart = colon + 1;
        valueEnd = end;
        append(colon + 1, end);
      } else {
        malformed++;
      }
    }
    pos = next;
  }
  close();
  const cutFields = fields.some((f) => f.cut);
  return { fields, bodyStart, truncated: truncated || cutFields, malformed };
}

const utf8Fatal = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
const windows1252 = new TextDecoder('windows-1252');

/** A decoder for an ASCII-compatible charset label, or null. */
export function charsetDecoder(label: string | null | undefined): TextDecoder | null {
  if (!label) return null;
  const l = label.trim().toLowerCase().slice(0, 64);
  for (const candidate of [l, l.replace(/^(x-|cs)/, ''), l.replace(/^cp-?(\d+)$/, 'windows-$1')]) {
    try {
      const d = new TextDecoder(candidate);
      return /^(utf-16|utf-8$|replacement|iso-2022)/.test(d.encoding) ? null : d;
    } catch {
      // not a label this runtime knows
    }
  }
  return null;
}

const ENCODED_WORD = /=\?([^?\s]{1,64})\?([QqBb])\?([^?]*)\?=/g;

/**
 * Raw header bytes to a string: ASCII as is, valid UTF-8 (RFC 6532) as UTF-8, anything else with
 * the message's charset (else windows-1252). Raw 8-bit bytes inside a Q encoded word are escaped
 * first so that the word's own charset decodes them.
 */
export function decodeRaw(raw: Buffer, fallback: TextDecoder | null): string {
  let ascii = true;
  for (let i = 0; i < raw.length; i++) if (raw[i] >= 0x80) { ascii = false; break; }
  if (ascii) return raw.toString('latin1');
  try {
    return utf8Fatal.decode(raw);
  } catch {
    const escaped = raw.toString('latin1').replace(ENCODED_WORD, (_m, cs: string, enc: string, text: string) =>
      `=?${cs}?${enc}?${enc.toUpperCase() === 'Q' ? text.replace(/[\x80-\xff]/g, (c) => `=${c.charCodeAt(0).toString(16).toUpperCase()}`) : text}?=`);
    return (fallback ?? windows1252).decode(Buffer.from(escaped, 'latin1'));
  }
}

/** One line of text: folding whitespace becomes a space, other control characters go. */
export function cleanLine(s: string): string {
  return s.replace(/[\t\r\n]/g, ' ').replace(/[\u0000-\u001f\u007f]/g, '').trim();
}

/** Cuts a string to at most `maxBytes` UTF-8 bytes on a character boundary. */
export function capUtf8(s: string, maxBytes: number): { value: string; cut: boolean } {
  if (s.length * 3 <= maxBytes || Buffer.byteLength(s) <= maxBytes) return { value: s, cut: false };
  const buf = Buffer.from(s, 'utf8');
  let end = maxBytes;
  while (end > 0 && (buf[end] & 0xc0) === 0x80) end--;
  return { value: buf.toString('utf8', 0, end), cut: true };
}

/** UTF-7 (RFC 2152), which TextDecoder does not know: `+<modified base64 of UTF-16BE>-`. */
export function decodeUtf7(s: string): string {
  return s.replace(/\+([A-Za-z0-9+/]*)-?/g, (m: string, b64: string) => {
    if (b64 === '') return m === '+-' ? '+' : m;
    const bytes = Buffer.from(b64, 'base64');
    let out = '';
    for (let i = 0; i + 1 < bytes.length; i += 2) out += String.fromCharCode((bytes[i] << 8) | bytes[i + 1]);
    return out;
  });
}

/**
 * Encoded words in UTF-7 (Outlook 2000 and others), which postal-mime would read as windows-1252:
 * re-encoded as UTF-8 words, so that decodeWords and the address parser then decode them normally.
 */
export function recodeUtf7Words(s: string): string {
  if (!/utf-?7/i.test(s)) return s;
  return s.replace(ENCODED_WORD, (m: string, cs: string, enc: string, text: string) => {
    if (!/^(unicode-1-1-)?utf-?7(\*.*)?$/i.test(cs)) return m;
    const ascii = enc.toUpperCase() === 'B'
      ? Buffer.from(text, 'base64').toString('latin1')
      : text.replace(/_/g, ' ').replace(/=([0-9a-f]{2})/gi, (_x: string, h: string) => String.fromCharCode(parseInt(h, 16)));
    return `=?utf-8?B?${Buffer.from(decodeUtf7(ascii), 'utf8').toString('base64')}?=`;
  });
}

export function isUtf7(label: string | null | undefined): boolean {
  return !!label && /^(unicode-1-1-)?utf-?7$/i.test(label.trim());
}

/** An unstructured field (Subject, the stored header list): decoded, one line. */
export function decodeUnstructured(field: RawField, fallback: TextDecoder | null): string {
  try {
    return cleanLine(decodeWords(recodeUtf7Words(decodeRaw(field.raw, fallback))));
  } catch {
    return cleanLine(field.raw.toString('latin1'));
  }
}

/** The stored header list: the first maxHeaders fields, each value capped. */
export function headerList(block: HeaderBlock, limits: ParseLimits, fallback: TextDecoder | null): { headers: HeaderField[]; truncated: boolean } {
  let truncated = block.truncated || block.fields.length > limits.maxHeaders;
  const headers = block.fields.slice(0, limits.maxHeaders).map((f) => {
    const capped = capUtf8(decodeUnstructured(f, fallback), limits.maxHeaderValueBytes);
    if (capped.cut) truncated = true;
    return { name: f.name, value: capped.value };
  });
  return { headers, truncated };
}

export function firstField(block: HeaderBlock, lower: string): RawField | undefined {
  return block.fields.find((f) => f.lower === lower);
}

export function allFields(block: HeaderBlock, lower: string): RawField[] {
  return block.fields.filter((f) => f.lower === lower);
}

/** The `charset` parameter of the top-level Content-Type, or null. */
export function topLevelCharset(block: HeaderBlock): string | null {
  const ct = firstField(block, 'content-type');
  return (ct ? /charset\s*=\s*"?([^";\s]{1,64})/i.exec(ct.raw.toString('latin1'))?.[1] : null) ?? null;
}

/** A decoder for raw 8-bit header bytes that are not UTF-8: the message's charset, if it can be one. */
export function headerFallbackDecoder(block: HeaderBlock): TextDecoder | null {
  return charsetDecoder(topLevelCharset(block));
}
