import { setImmediate as nextTurn } from 'node:timers/promises';
import { Readable } from 'node:stream';

/**
 * What mailauth is given. mailauth reads the whole message (body hashes for DKIM and ARC), and some
 * of its work grows with what a sender controls: its header splitter walks the header byte by byte
 * (20 MB without a blank line took 2 s), and every DKIM-Signature with its own `l=` adds a full
 * canonicalisation pass over the body. So the header section is screened first, and the bytes are
 * fed as zero-copy slices of the Buffer through a stream that stops when time is up.
 */
export interface ScreenLimits {
  /** DKIM-Signature fields verified per message (the topmost ones); the rest are not shown to mailauth. */
  maxSignatures: number;
  /** A header section longer than this (no blank line within it) is not verified for DKIM or ARC. */
  maxHeaderBytes: number;
}

export interface ScreenedMessage {
  /** Pieces (slices of the original Buffer, or a rebuilt header section) in order. */
  pieces: Buffer[];
  /** DKIM-Signature fields left out because there were more than maxSignatures. */
  signaturesDropped: number;
  /** True when the header section was over maxHeaderBytes: DKIM and ARC were not evaluated. */
  headerOversized: boolean;
}

const CHUNK = 64 * 1024;
const SIGNATURE_FIELDS = new Set(['dkim-signature', 'arc-seal', 'arc-message-signature', 'arc-authentication-results']);

/** Offset of the first body byte (just after the blank line), or -1 if none starts within `limit` bytes. */
export function headerEnd(raw: Buffer, limit: number): number {
  let lf = raw.indexOf(0x0a);
  while (lf >= 0 && lf < limit) {
    if (raw[lf + 1] === 0x0a) return lf + 2;
    if (raw[lf + 1] === 0x0d && raw[lf + 2] === 0x0a) return lf + 3;
    lf = raw.indexOf(0x0a, lf + 1);
  }
  return -1;
}

/** Header fields with their own line endings and continuation lines, as latin1 text (binary-safe). */
function headerFields(header: string): { name: string; text: string }[] {
  const fields: { name: string; text: string }[] = [];
  for (const line of header.match(/[^\n]*\n|[^\n]+$/g) ?? []) {
    const last = fields[fields.length - 1];
    if ((line[0] === ' ' || line[0] === '\t') && last) {
      last.text += line;
      continue;
    }
    const colon = line.indexOf(':');
    fields.push({ name: colon > 0 ? line.slice(0, colon).trim().toLowerCase() : '', text: line });
  }
  return fields;
}

function countDkimSignatures(header: string): number {
  // A cheap first pass: most messages have a few signatures and are passed through untouched.
  return header.match(/^dkim-signature[ \t]*:/gim)?.length ?? 0;
}

/** Whether any DKIM-Signature or ARC field starts a line of the header section. */
function hasSignatureFields(header: string): boolean {
  return /^(?:dkim-signature|arc-seal|arc-message-signature|arc-authentication-results)[ \t]*:/im.test(header);
}

export function screenMessage(raw: Buffer, limits: ScreenLimits): ScreenedMessage {
  const end = headerEnd(raw, limits.maxHeaderBytes);
  if (end < 0 && raw.length > limits.maxHeaderBytes) {
    // No end of header in sight: keep the whole lines within the cap, without any signature field,
    // and no body. DKIM and ARC come out as none; SPF and DMARC (on the From field) still run.
    const cut = raw.subarray(0, limits.maxHeaderBytes);
    const lastLf = cut.lastIndexOf(0x0a);
    const kept = headerFields(cut.subarray(0, lastLf + 1).toString('latin1')).filter((f) => !SIGNATURE_FIELDS.has(f.name));
    const header = kept.map((f) => f.text).join('');
    // `header` is whole lines, so one more line break ends it.
    return { pieces: [Buffer.from(`${header}\r\n`, 'latin1')], signaturesDropped: 0, headerOversized: true };
  }
  const header = end < 0 ? raw : raw.subarray(0, end);
  const headerText = header.toString('latin1');
  // Without a DKIM or ARC signature the body cannot change any result (SPF and DMARC read the
  // envelope and the header), yet mailauth would still walk it byte by byte looking for bare line
  // feeds: 10 % of a 100 KiB message's analysis. It is given the header section and its blank line.
  if (end >= 0 && !hasSignatureFields(headerText)) return { pieces: [header], signaturesDropped: 0, headerOversized: false };
  if (countDkimSignatures(headerText) <= limits.maxSignatures) return { pieces: [raw], signaturesDropped: 0, headerOversized: false };

  let seen = 0;
  let dropped = 0;
  const kept = headerFields(headerText).filter((f) => {
    if (f.name !== 'dkim-signature') return true;
    if (++seen <= limits.maxSignatures) return true;
    dropped++;
    return false;
  });
  const rebuilt = Buffer.from(kept.map((f) => f.text).join(''), 'latin1');
  return { pieces: end < 0 ? [rebuilt] : [rebuilt, raw.subarray(end)], signaturesDropped: dropped, headerOversized: false };
}

/**
 * The pieces as a stream of 64 KiB slices, one per event-loop turn so timers (our deadline) run in
 * between; once `stopped()` is true it errors out, so a message that ran out of time costs no more CPU.
 */
export function feed(pieces: Buffer[], stopped: () => boolean): Readable {
  async function* slices() {
    for (const piece of pieces) {
      for (let at = 0; at < piece.length; at += CHUNK) {
        await nextTurn();
        if (stopped()) throw new Error('authentication stopped: time limit reached');
        yield piece.subarray(at, at + CHUNK);
      }
    }
  }
  return Readable.from(slices(), { objectMode: false });
}
