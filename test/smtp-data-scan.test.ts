import { describe, expect, it } from 'vitest';
import net from 'node:net';
import { once } from 'node:events';
import { SMTPStream } from 'smtp-server/lib/smtp-stream.js';
import { describeEachDatabase } from './harness.ts';
import { labelNow, mailboxWithAddress, smtpSession } from './smtp-helpers.ts';
import { emailsPath, fetchLink } from './emails-helpers.ts';
import { dataScanApplies, ScanningSmtpConnection, ScanningSmtpStream } from '../src/inbound/smtp-data-scan.ts';
import { GreetingSmtpServer } from '../src/inbound/greeting.ts';

// ScanningSmtpStream finds the end of DATA and the dot-stuffed lines with Buffer#indexOf where the
// library's parser loops over every byte. It must do exactly what the library's does: both are fed
// the same sessions, cut into chunks in every way that matters, and must report the same commands,
// the same message bytes and the same byte counts.

interface Outcome {
  commands: string[];
  messages: string[];
  /** Per message: its byte count and whether it was over the limit, when it ended. */
  sizes: { byteLength: number; sizeExceeded: boolean }[];
}

interface ParseOptions {
  /** The size limit given to startDataMode. */
  maxBytes?: number;
  /** Reads the message a chunk per event-loop turn, so the parser meets a full stream and waits for 'drain'. */
  slowReader?: boolean;
}

/** Feeds a session's client bytes to a parser, chunk by chunk, as smtp-server's connection drives it. */
async function parse(Parser: typeof SMTPStream, chunks: Buffer[], opts: ParseOptions = {}): Promise<Outcome> {
  const parser = new Parser();
  const out: Outcome = { commands: [], messages: [], sizes: [] };
  parser.oncommand = (command: Buffer, next?: () => void) => {
    const line = command.toString('latin1');
    out.commands.push(line);
    if (/^DATA$/i.test(line)) {
      const data = parser.startDataMode(opts.maxBytes ?? 1_000_000);
      const parts: Buffer[] = [];
      data.on('data', (c: Buffer) => {
        parts.push(c);
        if (!opts.slowReader) return;
        data.pause();
        setImmediate(() => data.resume());
      });
      data.on('end', () => {
        out.messages.push(Buffer.concat(parts).toString('latin1'));
        out.sizes.push({ byteLength: data.byteLength, sizeExceeded: data.sizeExceeded });
        // as the connection does once the application has answered the message
        setImmediate(() => parser.continue());
      });
    }
    next?.();
  };
  for (const chunk of chunks) await new Promise<void>((resolve, reject) => parser.write(chunk, (err) => (err ? reject(err) : resolve())));
  await new Promise<void>((resolve) => parser.end(resolve));
  return out;
}

const session = (...bodies: string[]) => ['EHLO c', ...bodies.flatMap((b) => ['MAIL FROM:<a@example.com>', 'RCPT TO:<b@example.com>', 'DATA', b]), 'QUIT', ''].join('\r\n');

// Client bytes of whole sessions: each body already dot-stuffed and ending in its terminator line.
const SESSIONS: Record<string, string> = {
  plain: session('Subject: a\r\n\r\nline one\r\nline two\r\n.'),
  'dot-stuffed lines': session('Subject: b\r\n\r\n..leading dot\r\n...\r\n.. \r\nend\r\n.'),
  'a line that starts with a dot but is not stuffed': session('Subject: c\r\n\r\n.x not stuffed\r\n.\r\n.'),
  'empty message': session('.'),
  'message that is one stuffed dot': session('..\r\n.'),
  'body that starts with a stuffed dot': session('..first\r\nsecond\r\n.'),
  'bare line feeds around dots': session('Subject: d\n\nbare\n.\nstill data\r\n.\n..\n\r\n.'),
  'two messages, commands pipelined after the terminator': session('Subject: e\r\n\r\none\r\n.', 'Subject: f\r\n\r\n..two\r\n.'),
  'carriage returns before the terminator': session('Subject: g\r\n\r\nx\r\r\n.\r\r\n.'),
  'a dot at the very end of a line': session('Subject: h\r\n\r\nends with a dot.\r\n.'),
};

/** Every way of cutting `bytes` once, and into single bytes. */
function chunkings(bytes: Buffer): Buffer[][] {
  const out: Buffer[][] = [[bytes], [...bytes].map((b) => Buffer.from([b]))];
  for (let cut = 1; cut < bytes.length; cut++) out.push([bytes.subarray(0, cut), bytes.subarray(cut)]);
  return out;
}

/** Cuts at pseudo-random places (a fixed seed, so a failure can be reproduced). */
function randomChunks(bytes: Buffer, seed: number, maxChunk: number): Buffer[] {
  let state = seed;
  const next = () => ((state = (state * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  const out: Buffer[] = [];
  for (let at = 0; at < bytes.length; ) {
    const size = 1 + Math.floor(next() * maxChunk);
    out.push(bytes.subarray(at, at + size));
    at += size;
  }
  return out;
}

/** A large message: base64-like lines, with dot-stuffed and dot-leading lines here and there. */
function largeBody(): string {
  const lines: string[] = ['Subject: large', ''];
  for (let i = 0; i < 1400; i++) {
    if (i % 97 === 0) lines.push('..stuffed line ' + i);
    else if (i % 89 === 0) lines.push('.x line ' + i);
    else lines.push(Buffer.from(`line ${i} `.repeat(8)).toString('base64').slice(0, 76));
  }
  return lines.join('\r\n') + '\r\n.';
}

describe('the end-of-DATA scan in native code', () => {
  it('applies to the installed smtp-server, and the server builds its connections with it', async () => {
    expect(dataScanApplies()).toBe(true);
    const server = new GreetingSmtpServer({ authOptional: true, disabledCommands: ['AUTH', 'STARTTLS'], hideSTARTTLS: true, logger: false }, 0);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const port = ((server as unknown as { server: net.Server }).server.address() as net.AddressInfo).port;
      const socket = net.connect(port, '127.0.0.1');
      await once(socket, 'data'); // the greeting
      const [connection] = [...server.connections] as unknown as { _parser: unknown }[];
      expect(connection).toBeInstanceOf(ScanningSmtpConnection);
      expect(connection!._parser).toBeInstanceOf(ScanningSmtpStream);
      socket.destroy();
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });

  it('is not used with another version of the methods it replaces', () => {
    const proto = SMTPStream.prototype as unknown as { _feedDataStream: (...args: unknown[]) => unknown };
    const library = proto._feedDataStream;
    proto._feedDataStream = function patched(this: unknown, ...args: unknown[]) {
      return library.apply(this, args);
    };
    try {
      expect(dataScanApplies()).toBe(false);
    } finally {
      proto._feedDataStream = library;
    }
    expect(dataScanApplies()).toBe(true);
  });

  for (const [name, text] of Object.entries(SESSIONS)) {
    it(`parses as the library does when cut anywhere: ${name}`, async () => {
      const bytes = Buffer.from(text, 'latin1');
      const whole = await parse(SMTPStream, [bytes]);
      expect(whole.messages.length).toBeGreaterThan(0);
      for (const chunks of chunkings(bytes)) {
        const cuts = chunks.map((c) => c.length).join(',');
        expect(await parse(ScanningSmtpStream, chunks), `chunks ${cuts}`).toEqual(await parse(SMTPStream, chunks));
      }
      // A size limit inside the message: the same byte counts and the same verdict.
      for (const chunks of [[bytes], randomChunks(bytes, 7, 5)]) {
        const library = await parse(SMTPStream, chunks, { maxBytes: 12 });
        expect(await parse(ScanningSmtpStream, chunks, { maxBytes: 12 })).toEqual(library);
      }
    });
  }

  it('parses a 100 KiB message as the library does, in socket-sized and in small random chunks', async () => {
    const bytes = Buffer.from(session(largeBody(), 'Subject: after\r\n\r\n..\r\n.'), 'latin1');
    expect(bytes.length).toBeGreaterThan(100_000);
    const cuts = [[bytes], randomChunks(bytes, 1, 65_536), randomChunks(bytes, 2, 1_500), randomChunks(bytes, 3, 7)];
    for (const chunks of cuts) {
      const library = await parse(SMTPStream, chunks);
      expect(library.messages[0]).toContain('\r\n.stuffed line 97\r\n');
      expect(await parse(ScanningSmtpStream, chunks)).toEqual(library);
    }
    // A reader slower than the sender: the parser waits for the message stream to drain.
    for (const chunks of [[bytes], randomChunks(bytes, 4, 65_536)]) {
      const library = await parse(SMTPStream, chunks, { slowReader: true, maxBytes: 50_000 });
      expect(library.sizes[0]!.sizeExceeded).toBe(true);
      expect(await parse(ScanningSmtpStream, chunks, { slowReader: true, maxBytes: 50_000 })).toEqual(library);
    }
  });
});

describeEachDatabase('the end-of-DATA scan, end to end', (app) => {
  it('stores a dot-stuffed message sent in awkward pieces byte for byte, and answers the commands after it', async () => {
    const user = await app().user();
    const box = await mailboxWithAddress(app(), user);
    const message = largeBody().slice(0, -1).replace(/\r\n\.\./g, '\r\n.'); // the body as the sender meant it
    const wire = Buffer.from(largeBody(), 'latin1');
    const s = await smtpSession(app());
    expect(await s.send('EHLO c')).toMatch(/^250/);
    expect(await s.send('MAIL FROM:<a@example.com>')).toMatch(/^250/);
    expect(await s.send(`RCPT TO:<${box.address}>`)).toMatch(/^250/);
    expect(await s.send('DATA')).toMatch(/^354/);
    // Cut right before and after dots at line starts, and inside the terminator; each piece is its
    // own write and segment (no Nagle), handed to the kernel before the next. The server may still
    // read several at once: the cuts the parser sees are the unit tests' business above.
    const cuts = [0];
    for (let at = wire.indexOf('\n.'); at !== -1; at = wire.indexOf('\n.', at + 1)) cuts.push(at, at + 1, at + 2);
    cuts.push(wire.length - 2, wire.length);
    const pieces = [...new Set(cuts)].sort((a, b) => a - b).map((c, i, all) => wire.subarray(c, all[i + 1] ?? wire.length)).filter((p) => p.length);
    s.noDelay();
    for (const piece of pieces.slice(0, -1)) await s.writeAndFlush(piece);
    const stored = await s.send(Buffer.concat([pieces.at(-1)!, Buffer.from('\r\n')]));
    expect(stored).toMatch(/^250 2\.0\.0 Ok: stored eml_/);
    expect(await s.send('NOOP')).toMatch(/^250/);
    expect(await s.send('QUIT')).toMatch(/^221/);
    const id = /stored (eml_\w+)/.exec(stored)![1]!;
    await labelNow(app());
    const link = await app().request('GET', emailsPath(box, id, 'raw'), { key: user.key });
    expect(link.status, link.text).toBe(200);
    const raw = await fetchLink(link.body.data.download.url);
    expect(raw.bytes.toString('latin1')).toBe(message);
  });
});
