import net from 'node:net';

// A plain SMTP client over node:net for tests that must control every byte: the message goes out
// exactly as given (only dot-stuffed), with bare LF, NUL, 8-bit bytes without BODY=8BITMIME, a
// declared SIZE, and one connection reused across transactions. nodemailer rewrites line endings
// and refuses some of these, so hostile and crash tests talk through this instead.

export interface Reply {
  code: number;
  /** The whole reply, all lines, CRLF-joined. */
  text: string;
}

export interface Transaction {
  from: string;
  to: string[];
  raw: Buffer;
  /** SIZE= in MAIL FROM. */
  size?: number;
  /** BODY=8BITMIME in MAIL FROM; by default 8-bit bytes are sent without declaring it. */
  body8bit?: boolean;
  /** The exact bytes to send after 354, terminator included, instead of `raw` dot-stuffed (smuggling tests). */
  wire?: Buffer;
  /** Called once the whole DATA payload has been handed to the socket (the server is now storing it). */
  onDataSent?: () => void;
}

export interface TransactionResult {
  /** Where the transaction ended: refused at MAIL, RCPT or DATA, or answered after the data ('end'). */
  stage: 'mail' | 'rcpt' | 'data' | 'end';
  code: number;
  text: string;
  /** The `eml_` ids in a 250 reply after the data. */
  emailIds: string[];
}

const CRLF = Buffer.from('\r\n');

/** The DATA payload for `raw`: a dot doubled at the start of every line (after any LF), then CRLF . CRLF. */
export function dotStuff(raw: Buffer): Buffer {
  const parts: Buffer[] = [];
  let from = 0;
  if (raw[0] === 0x2e) {
    parts.push(Buffer.from('.'));
  }
  for (let i = raw.indexOf(0x0a); i !== -1; i = raw.indexOf(0x0a, i + 1)) {
    if (raw[i + 1] === 0x2e) {
      parts.push(raw.subarray(from, i + 1), Buffer.from('.'));
      from = i + 1;
    }
  }
  parts.push(raw.subarray(from));
  if (raw.length && !endsWithCrlf(raw)) parts.push(CRLF);
  parts.push(Buffer.from('.\r\n'));
  return Buffer.concat(parts);
}

/** What a server that unstuffs dots keeps of `raw`: the same bytes, plus the CRLF we add before the final dot when missing. */
export function storedBytes(raw: Buffer): Buffer {
  return raw.length && !endsWithCrlf(raw) ? Buffer.concat([raw, CRLF]) : raw;
}

function endsWithCrlf(b: Buffer): boolean {
  return b.length >= 2 && b[b.length - 2] === 0x0d && b[b.length - 1] === 0x0a;
}

export class RawSmtp {
  private buf = '';
  private readonly replies: Reply[] = [];
  private waiter: ((r: Reply | Error) => void) | null = null;
  private closedWith: Error | null = null;

  private constructor(private readonly socket: net.Socket) {
    socket.on('data', (d: Buffer) => {
      this.buf += d.toString('latin1');
      this.parse();
    });
    const end = (err?: Error) => {
      this.closedWith ??= err ?? new Error('connection closed');
      this.waiter?.(this.closedWith);
      this.waiter = null;
    };
    socket.on('error', end);
    socket.on('close', () => end());
  }

  /** Connects, reads the greeting and says EHLO. */
  static async open(port: number, host = '127.0.0.1'): Promise<RawSmtp> {
    const socket = net.connect(port, host);
    socket.setNoDelay(true);
    const client = new RawSmtp(socket);
    const greeting = await client.reply();
    if (greeting.code !== 220) throw new Error(`unexpected greeting: ${greeting.text}`);
    const ehlo = await client.command('EHLO client.test');
    if (ehlo.code !== 250) throw new Error(`EHLO refused: ${ehlo.text}`);
    return client;
  }

  /** True once the connection has ended (a test then opens a new one). */
  get closed(): boolean {
    return this.closedWith !== null;
  }

  /** A reply is complete at a line "ddd text" (continuation lines are "ddd-text"). */
  private parse(): void {
    for (;;) {
      const m = /(?:^|\r\n)(\d{3})(?: [^\r\n]*)?\r\n/.exec(this.buf);
      if (!m) return;
      const end = m.index + m[0].length;
      const reply = { code: Number(m[1]), text: this.buf.slice(0, end).trimEnd() };
      this.buf = this.buf.slice(end);
      if (this.waiter) {
        const w = this.waiter;
        this.waiter = null;
        w(reply);
      } else this.replies.push(reply);
    }
  }

  /** The next reply from the server (rejects when the connection ends first). */
  reply(): Promise<Reply> {
    const queued = this.replies.shift();
    if (queued) return Promise.resolve(queued);
    if (this.closedWith) return Promise.reject(this.closedWith);
    return new Promise((resolve, reject) => {
      this.waiter = (r) => (r instanceof Error ? reject(r) : resolve(r));
    });
  }

  /** Writes bytes without waiting for a reply (a DATA body sent in pieces). */
  write(data: string | Buffer): void {
    this.socket.write(data);
  }

  command(line: string): Promise<Reply> {
    this.socket.write(line + '\r\n');
    return this.reply();
  }

  /** One mail transaction; after a refusal at MAIL or RCPT it sends RSET so the connection can go on. */
  async send(tx: Transaction): Promise<TransactionResult> {
    const params = [tx.size !== undefined ? `SIZE=${tx.size}` : '', tx.body8bit ? 'BODY=8BITMIME' : ''].filter(Boolean).join(' ');
    const mail = await this.command(`MAIL FROM:<${tx.from}>${params ? ' ' + params : ''}`);
    if (mail.code !== 250) return this.refused('mail', mail);
    let accepted = 0;
    let lastRefusal: Reply | null = null;
    for (const to of tx.to) {
      const r = await this.command(`RCPT TO:<${to}>`);
      if (r.code === 250) accepted++;
      else lastRefusal = r;
    }
    if (!accepted) return this.refused('rcpt', lastRefusal!);
    const data = await this.command('DATA');
    if (data.code !== 354) return this.refused('data', data);
    this.socket.write(tx.wire ?? dotStuff(tx.raw), () => tx.onDataSent?.());
    const end = await this.reply();
    return { stage: 'end', code: end.code, text: end.text, emailIds: end.code === 250 ? (end.text.match(/eml_[A-Za-z0-9]+/g) ?? []) : [] };
  }

  private async refused(stage: 'mail' | 'rcpt' | 'data', r: Reply): Promise<TransactionResult> {
    if (r.code !== 421) await this.command('RSET');
    return { stage, code: r.code, text: r.text, emailIds: [] };
  }

  async quit(): Promise<void> {
    if (this.closedWith) return;
    await this.command('QUIT').catch(() => undefined);
    this.socket.end();
  }

  destroy(): void {
    this.socket.destroy();
  }
}
