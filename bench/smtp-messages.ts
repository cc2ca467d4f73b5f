// Benchmark messages for bench/smtp.ts, built in memory before any timing: RFC 5322 with CRLF,
// already dot-stuffed and ending in CRLF, so a DATA body is one write followed by ".\r\n".
// Two shapes, the same sizes as /work/shared/bench/lib/gen-messages.js (the peer benchmark):
//   text: 5 KiB of plain text (5,120 bytes on the wire)
//   attachment: ~100 KiB multipart/mixed, a 1 KiB text part and a base64 attachment
// Every message is different (own Message-ID, subject, text and random attachment bytes), so a
// server cannot save work by deduplicating content.
import { randomBytes } from 'node:crypto';

export const TEXT_BYTES = 5 * 1024;
export const ATTACHMENT_BYTES = 100 * 1024;

export interface BenchMessage {
  /** Envelope recipient. */
  rcpt: string;
  /** Dot-stuffed RFC 5322 message ending in CRLF (without the final ".\r\n"). */
  data: Buffer;
  attachment: boolean;
}

const WORDS = ('lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt ut ' +
  'labore et dolore magna aliqua ut enim ad minim veniam quis nostrud exercitation ullamco laboris nisi ' +
  'aliquip ex ea commodo consequat duis aute irure in reprehenderit voluptate velit esse cillum fugiat ' +
  'nulla pariatur excepteur sint occaecat cupidatat non proident sunt culpa qui officia deserunt mollit ' +
  'anim id est laborum invoice shipment report quarterly agent mailbox cubby').split(' ');

/** Seeded PRNG (LCG): the same run parameters give the same text. */
function prng(seed: number) {
  let s = seed & 0x7fffffff;
  return () => {
    s = (s * 1103515245 + 12345) & 0x7fffffff;
    return s / 0x7fffffff;
  };
}

/** Plain text of exactly `bytes` bytes with CRLF line endings, lines ≤ 72 characters. */
function text(bytes: number, rnd: () => number): string {
  const lines: string[] = [];
  let used = 0;
  let line = '';
  while (used + line.length + 2 < bytes - 2) {
    const w = WORDS[Math.floor(rnd() * WORDS.length)]!;
    const next = line ? `${line} ${w}` : w;
    if (next.length > 72) {
      lines.push(line);
      used += line.length + 2;
      line = w;
    } else line = next;
  }
  const left = Math.max(bytes - used - 2, 0);
  lines.push(line.slice(0, left).padEnd(left, 'x'));
  return `${lines.join('\r\n')}\r\n`;
}

function headers(i: number, from: string, to: string, subject: string, extra: string[]): string {
  return [
    `From: Bench Sender <${from}>`,
    `To: <${to}>`,
    `Subject: ${subject} #${i}`,
    `Date: ${new Date(Date.UTC(2026, 10, 1, 10, 0, 0) + i * 1000).toUTCString().replace('GMT', '+0000')}`,
    `Message-ID: <bench-${i}-${randomBytes(6).toString('hex')}@source.test>`,
    'MIME-Version: 1.0',
    ...extra,
    '',
    '',
  ].join('\r\n');
}

/** RFC 5321 4.5.2: a line that starts with "." gets another one (none of ours do; kept for safety). */
const dotStuff = (s: string) => (s.startsWith('.') ? `.${s}` : s).replace(/\r\n\./g, '\r\n..');

function textMessage(i: number, from: string, to: string, rnd: () => number): string {
  const h = headers(i, from, to, 'bench text message', ['Content-Type: text/plain; charset=utf-8', 'Content-Transfer-Encoding: 7bit']);
  return h + text(TEXT_BYTES - h.length, rnd);
}

function attachmentMessage(i: number, from: string, to: string, rnd: () => number): string {
  const boundary = `=_bench_${i}`;
  const h = headers(i, from, to, 'bench message with attachment', [`Content-Type: multipart/mixed; boundary="${boundary}"`]);
  const part1 = `--${boundary}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 7bit\r\n\r\n${text(1024, rnd)}\r\n`;
  const part2 = `--${boundary}\r\nContent-Type: application/octet-stream; name="report-${i}.bin"\r\nContent-Transfer-Encoding: base64\r\nContent-Disposition: attachment; filename="report-${i}.bin"\r\n\r\n`;
  const closing = `--${boundary}--\r\n`;
  // base64 lines of 76 characters + CRLF = 78 bytes on the wire per 57 raw bytes
  const lines = Math.floor((ATTACHMENT_BYTES - h.length - part1.length - part2.length - closing.length) / 78);
  const b64 = randomBytes(lines * 57).toString('base64').replace(/.{76}/g, '$&\r\n');
  return h + part1 + part2 + b64 + closing;
}

/**
 * `count` messages to `recipients` in turn; message i carries an attachment when the running share
 * of attachment messages falls below `attachmentRatio`, which spreads them evenly through the run.
 */
export function makeMessages(opts: { count: number; firstIndex: number; recipients: string[]; attachmentRatio: number; from: string }): BenchMessage[] {
  const rnd = prng(opts.firstIndex + 42);
  const out: BenchMessage[] = [];
  for (let k = 0; k < opts.count; k++) {
    const i = opts.firstIndex + k;
    const rcpt = opts.recipients[i % opts.recipients.length]!;
    const attachment = Math.floor((k + 1) * opts.attachmentRatio) > Math.floor(k * opts.attachmentRatio);
    const raw = attachment ? attachmentMessage(i, opts.from, rcpt, rnd) : textMessage(i, opts.from, rcpt, rnd);
    out.push({ rcpt, data: Buffer.from(dotStuff(raw), 'latin1'), attachment });
  }
  return out;
}
