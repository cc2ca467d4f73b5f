import PostalMime, { type Email } from 'postal-mime';
import { firstField, type HeaderBlock } from './parse-headers.ts';
import type { ParseLimits } from './parse-types.ts';
import { patchOnce } from './library-patch.ts';

// The MIME body is parsed by postal-mime, with three guards around it:
//
// 1. postal-mime sees only the top-level Content-* fields (capped), never the rest of the
//    top-level header block, which parse-headers.ts reads itself: a huge or odd header block can
//    then not make postal-mime reject the message.
// 2. A pre-screen counts MIME boundary delimiters and cuts the message before the one past
//    maxMimeParts: postal-mime has no part limit, and 20,000 tiny parts took 1.7 s.
// 3. postal-mime 4.0.0 keeps each line of a part without a transfer encoding (7bit/8bit/binary) as
//    its own Blob part; Node 20's Blob needs ~15 µs and ~1.5 KB per part, so a 45 MB plain-text
//    body took 10 s and 1 GB. patchPassThroughDecoder() gives that decoder the same 64 KiB
//    chunking its base64 and quoted-printable decoders have. It checks the shape it patches and
//    does nothing on another version (test/inbound-parse.test.ts fails loudly then).
// 4. postal-mime 4.0.0 decodes base64 in JavaScript, a line at a time (a TextDecoder, a regular
//    expression and a split per line, then a loop over every character): a third of the analysis of
//    a message with a 100 KiB attachment. patchBase64Decoder() keeps its rules (the characters
//    outside the alphabet dropped, each run of `=` ending a unit that is decoded on its own) and
//    decodes with Node's native decoder, which gives the same bytes for such units
//    (test/inbound-parse.test.ts compares the two). Same version check as 3.
// 5. postal-mime 4.0.0 finds the end of each line with a loop over every byte of the message
//    (15 % of that analysis). patchReadLine() finds it with indexOf; before patching it reads a
//    set of awkward samples (CRs alone, CRs before LF, no final LF) with both and patches only when
//    they agree.

interface PassThroughLike {
  chunks: Uint8Array[];
  pending?: Uint8Array[];
  pendingLen?: number;
}

const CHUNK = 64 * 1024;
const NEWLINE = new Uint8Array([0x0a]);

function flush(self: PassThroughLike) {
  if (!self.pending || self.pending.length === 0) return;
  self.chunks.push(Buffer.concat(self.pending, self.pendingLen));
  self.pending = [];
  self.pendingLen = 0;
}

export const patchPassThroughDecoder = patchOnce(() => {
  const probe = new PostalMime() as unknown as { root: { setupContentDecoder(e: string): void; contentDecoder: unknown } };
  probe.root.setupContentDecoder('8bit');
  const decoder = probe.root.contentDecoder as PassThroughLike & { constructor: { prototype: Record<string, unknown> } };
  const proto = decoder?.constructor?.prototype;
  if (!proto || typeof proto.update !== 'function' || typeof proto.finalize !== 'function' || !Array.isArray(decoder.chunks)) return false;
  proto.update = function update(this: PassThroughLike, line: Uint8Array) {
    this.pending ??= [];
    this.pendingLen ??= 0;
    this.pending.push(line, NEWLINE);
    this.pendingLen += line.length + 1;
    if (this.pendingLen >= CHUNK) flush(this);
  };
  proto.finalize = async function finalize(this: PassThroughLike): Promise<ArrayBuffer> {
    flush(this);
    const total = this.chunks.reduce((n, c) => n + c.length, 0);
    const out = new Uint8Array(total);
    let at = 0;
    for (const c of this.chunks) {
      out.set(c, at);
      at += c.length;
    }
    this.chunks = [];
    return out.buffer;
  };
  return true;
});

interface Base64Like {
  remainder: string;
  chunks: Uint8Array[];
  maxChunkSize: number;
  flushRemainder(): void;
  /** Lines not yet decoded (views into the message), and their length. */
  lines?: Uint8Array[];
  linesLen?: number;
}

/** The base64 alphabet and nothing else. */
const PLAIN_BASE64 = /^[A-Za-z0-9+/]*$/;

/**
 * Decodes the lines gathered so far by the original's rules: characters outside the alphabet are
 * dropped (bytes outside ASCII included: latin1 keeps each byte as one character, and the
 * original's UTF-8 decoding turns them into characters it drops), and each `=` ends a unit that is
 * decoded on its own. Splitting at `=` and dropping characters give the same units whether done a
 * line at a time or over many lines.
 */
function decodeLines(self: Base64Like): void {
  if (!self.lines?.length) return;
  const text = Buffer.concat(self.lines, self.linesLen).toString('latin1');
  self.lines = [];
  self.linesLen = 0;
  for (let from = 0; ; ) {
    const eq = text.indexOf('=', from);
    appendToUnit(self, eq < 0 ? text.slice(from) : text.slice(from, eq));
    if (eq < 0) return;
    self.flushRemainder();
    from = eq + 1;
  }
}

/**
 * Adds characters (no `=`) to the open unit: its whole groups of four are decoded now, the rest
 * (under four characters) stays in `remainder`. Node's decoder drops characters outside the
 * alphabet too, so when the decoded length is the full one there were none; it reads `-` and `_`
 * as the URL-safe alphabet, which the original drops, so those are looked for first. Otherwise the
 * characters are dropped with the original's expression before decoding.
 */
function appendToUnit(self: Base64Like, part: string): void {
  if (!part) return;
  let text = self.remainder + part;
  let whole = text.length - (text.length % 4);
  if (whole === 0 && PLAIN_BASE64.test(text)) {
    self.remainder = text;
    return;
  }
  let bytes = Buffer.from(text.slice(0, whole), 'base64');
  const clean = bytes.length === (whole / 4) * 3 && part.indexOf('-') < 0 && part.indexOf('_') < 0 && PLAIN_BASE64.test(text.slice(whole));
  if (!clean) {
    text = text.replace(/[^a-zA-Z0-9+/]+/g, '');
    whole = text.length - (text.length % 4);
    bytes = Buffer.from(text.slice(0, whole), 'base64');
  }
  if (bytes.length) self.chunks.push(bytes);
  self.remainder = text.slice(whole);
}

export const patchBase64Decoder = patchOnce(() => {
  const probe = new PostalMime() as unknown as { root: { setupContentDecoder(e: string): void; contentDecoder: unknown } };
  probe.root.setupContentDecoder('base64');
  const decoder = probe.root.contentDecoder as Base64Like & { constructor: { prototype: Record<string, unknown> } };
  const proto = decoder?.constructor?.prototype;
  const shapeKnown =
    proto && typeof proto.update === 'function' && typeof proto.pushChunk === 'function' && typeof proto.flushRemainder === 'function' &&
    typeof proto.finalize === 'function' && decoder.remainder === '' && Array.isArray(decoder.chunks) && typeof decoder.maxChunkSize === 'number';
  if (!shapeKnown) return false;
  const finalize = proto.finalize as (this: Base64Like) => Promise<ArrayBuffer>;
  proto.pushChunk = function pushChunk(this: Base64Like, base64: string) {
    // One character carries no byte; an empty chunk would still be a part of the final Blob
    // (a million of them in a hostile "=a=a…" body).
    if (base64.length < 2) return;
    const bytes = Buffer.from(base64, 'base64');
    if (bytes.length) this.chunks.push(bytes);
  };
  proto.update = function update(this: Base64Like, line: Uint8Array) {
    this.lines ??= [];
    this.linesLen ??= 0;
    this.lines.push(line);
    this.linesLen += line.length;
    if (this.linesLen >= CHUNK) decodeLines(this);
  };
  proto.finalize = function (this: Base64Like) {
    decodeLines(this);
    return finalize.call(this);
  };
  return true;
});

interface LineReader {
  buf: ArrayBuffer;
  av: Uint8Array;
  readPos: number;
}

type ReadLine = (this: LineReader) => { bytes: Uint8Array; done: boolean };

/** A line's bytes without its line break and the CRs before it, as postal-mime's readLine gives them. */
const readLineFast: ReadLine = function (this: LineReader) {
  const start = this.readPos;
  const lf = this.av.indexOf(0x0a, start);
  const stop = lf < 0 ? this.av.length : lf;
  let end = stop;
  while (end > start && this.av[end - 1] === 0x0d) end--;
  this.readPos = lf < 0 ? this.av.length : lf + 1;
  return { bytes: new Uint8Array(this.buf, start, end - start), done: this.readPos >= this.av.length };
};

const LINE_SAMPLES = ['a\r\nb\n\r\n\rc\r\rd\r\n\n\r\rtail', 'x\n', '\r\r\n', '\n\n\r', 'no break at all', '\r'];

/** The lines and positions a reader gives for `text`, to compare two readers. */
function linesOf(read: ReadLine, text: string): string {
  const buf = new TextEncoder().encode(text).buffer;
  const reader: LineReader = { buf, av: new Uint8Array(buf), readPos: 0 };
  const out: string[] = [];
  while (reader.readPos < reader.av.length) {
    const { bytes, done } = read.call(reader);
    out.push(`${Buffer.from(bytes).toString('latin1')}|${done}|${reader.readPos}`);
  }
  return JSON.stringify(out);
}

export const patchReadLine = patchOnce(() => {
  const proto = PostalMime.prototype as unknown as { readLine?: ReadLine };
  const original = proto.readLine;
  if (typeof original !== 'function') return false;
  if (LINE_SAMPLES.some((t) => linesOf(original, t) !== linesOf(readLineFast, t))) return false;
  proto.readLine = readLineFast;
  return true;
});

/** The boundary values declared anywhere in the message (a superset of the real ones is fine). */
function declaredBoundaries(text: string, head: string): Set<string> {
  const found = new Set<string>();
  const re = /boundary\s*=\s*(?:"([^"\r\n]{1,200})"|([^\s;"]{1,200}))/gi;
  for (const t of [head, text]) {
    for (const m of t.matchAll(re)) {
      found.add(m[1] ?? m[2]);
      if (found.size >= 10_000) return found;
    }
  }
  return found;
}

/** Where to cut the body so that at most `maxParts` boundary delimiters remain, and how many were cut. */
export function partCut(body: Buffer, text: string, head: string, maxParts: number): { cutAt: number; omittedParts: number } {
  const boundaries = declaredBoundaries(text, head);
  if (boundaries.size === 0) return { cutAt: body.length, omittedParts: 0 };
  const nextDashLine = (from: number) => {
    const i = body.indexOf('\n--', from, 'latin1');
    return i < 0 ? -1 : i + 1;
  };
  let parts = 0;
  let cutAt = body.length;
  let omitted = 0;
  let pos = body[0] === 0x2d && body[1] === 0x2d ? 0 : nextDashLine(0);
  while (pos >= 0) {
    const nl = body.indexOf(0x0a, pos);
    const line = body.toString('latin1', pos + 2, Math.min(nl < 0 ? body.length : nl, pos + 2 + 220)).replace(/[ \t\r]+$/, '');
    const isClose = line.endsWith('--') && boundaries.has(line.slice(0, -2));
    if (!isClose && boundaries.has(line) && ++parts > maxParts) {
      if (omitted === 0) cutAt = pos;
      omitted++;
    }
    if (nl < 0) break;
    pos = nextDashLine(nl);
  }
  return { cutAt, omittedParts: omitted };
}

export interface MimeResult {
  email: Email | null;
  /** Why postal-mime refused the message, when it did. */
  error: string | null;
  /** Boundary delimiters after the cut (an estimate of the parts not parsed). */
  omittedParts: number;
}

const CONTENT_FIELDS = ['content-type', 'content-transfer-encoding', 'content-disposition'];
const MAX_CONTENT_FIELD_BYTES = 16 * 1024;
const RFC822_WORK_BYTES = 128 * 1024 * 1024;

/** Parses the body (from `block.bodyStart`) with postal-mime. Never throws. */
export async function parseMime(bytes: Buffer, block: HeaderBlock, limits: ParseLimits, warn: (code: string) => void): Promise<MimeResult> {
  patchPassThroughDecoder();
  patchBase64Decoder();
  patchReadLine();
  try {
    const headLines = CONTENT_FIELDS.map((name) => firstField(block, name))
      .filter((f) => f !== undefined)
      .map((f) => Buffer.concat([Buffer.from(`${f.name}:`), f.raw.subarray(0, MAX_CONTENT_FIELD_BYTES), Buffer.from('\r\n')]));
    const head = Buffer.concat([...headLines, Buffer.from('\r\n')]);
    const body = bytes.subarray(Math.min(block.bodyStart, bytes.length));
    const text = body.toString('latin1');
    const { cutAt, omittedParts } = partCut(body, text, head.toString('latin1'), limits.maxMimeParts);
    // Each inline message/rfc822 level parses its content again, so the depth is also bounded by
    // RFC822_WORK_BYTES / size: a 43 MB message nested 12 deep took 5.8 s at depth 10, 2 s at depth 3.
    const nested = text.match(/message\/(?:rfc822|global)/gi)?.length ?? 0;
    const rfc822Depth = Math.min(limits.maxRfc822Depth, nested, Math.floor(RFC822_WORK_BYTES / Math.max(cutAt, 1)));
    if (rfc822Depth < Math.min(limits.maxRfc822Depth, nested)) warn('rfc822_depth_reduced');
    // One copy into a fresh ArrayBuffer, which postal-mime then uses without copying again.
    const input = new Uint8Array(head.length + cutAt);
    input.set(head, 0);
    input.set(body.subarray(0, cutAt), head.length);
    const email = await PostalMime.parse(input.buffer, {
      attachmentEncoding: 'arraybuffer',
      maxNestingDepth: limits.maxMimeDepth,
      maxHeadersSize: limits.maxPartHeaderBytes + head.length,
      maxRfc822NestingDepth: rfc822Depth,
    });
    return { email, error: null, omittedParts };
  } catch (err) {
    return { email: null, error: err instanceof Error ? err.message.slice(0, 200) : 'unknown error', omittedParts: 0 };
  }
}
