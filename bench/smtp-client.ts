// A lean SMTP load generator over node:net for bench/smtp.ts. On two cores the client shares the
// machine with the server, so it does as little as possible: one EHLO per connection, then per
// message MAIL, RCPT and DATA in one write when the server offers PIPELINING (RFC 2920 allows DATA
// last in a group), the pre-built body in one write, and ".\r\n" once that body has left for the
// kernel. The latency of a message is from that ".\r\n" write to the final reply.
import net from 'node:net';
import type { BenchMessage } from './smtp-messages.ts';

export interface LoadResult {
  sent: number;
  accepted: number;
  /** Messages not accepted, by the reply code that refused them ("closed" when the connection dropped). */
  rejected: Record<string, number>;
  /** End of DATA → final reply, ms, one per message that got a reply after DATA. */
  latenciesMs: number[];
  seconds: number;
  pipelining: boolean;
  /** A few refusals as the server worded them. */
  samples: string[];
}

interface Reply {
  code: number;
  text: string;
}

/** One SMTP connection: replies are matched in order to the commands sent. */
export class Connection {
  private buf = '';
  private lines: string[] = [];
  private waiting: { resolve: (r: Reply) => void; reject: (e: Error) => void }[] = [];
  private ready: Reply[] = [];
  private failure: Error | null = null;
  extensions = new Set<string>();

  private constructor(readonly socket: net.Socket) {
    socket.setNoDelay(true);
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => this.onData(chunk));
    const fail = (err: Error) => {
      this.failure ??= err;
      for (const w of this.waiting.splice(0)) w.reject(this.failure);
    };
    socket.on('error', fail);
    socket.on('close', () => fail(new Error('connection closed')));
  }

  /** A connection being opened; its greeting is its first reply. */
  static connect(host: string, port: number): Connection {
    return new Connection(net.connect({ host, port }));
  }

  static async open(host: string, port: number, helo: string): Promise<Connection> {
    const conn = Connection.connect(host, port);
    const socket = conn.socket;
    const greeting = await conn.reply();
    if (greeting.code !== 220) throw new Error(`greeting: ${greeting.code} ${greeting.text}`);
    socket.write(`EHLO ${helo}\r\n`);
    const ehlo = await conn.reply();
    if (ehlo.code !== 250) throw new Error(`EHLO: ${ehlo.code} ${ehlo.text}`);
    for (const line of ehlo.text.split('\n').slice(1)) conn.extensions.add(line.split(' ')[0]!.toUpperCase());
    return conn;
  }

  private onData(chunk: string) {
    this.buf += chunk;
    let nl: number;
    while ((nl = this.buf.indexOf('\n')) >= 0) {
      const line = this.buf.slice(0, nl).replace(/\r$/, '');
      this.buf = this.buf.slice(nl + 1);
      this.lines.push(line.slice(4));
      // "250-…" continues a reply, "250 …" (or a bare "250") ends it.
      if (line.length <= 3 || line[3] === ' ') {
        const reply = { code: Number(line.slice(0, 3)), text: this.lines.join('\n') };
        this.lines = [];
        const w = this.waiting.shift();
        if (w) w.resolve(reply);
        else this.ready.push(reply);
      }
    }
  }

  /** The next reply in order. */
  reply(): Promise<Reply> {
    const r = this.ready.shift();
    if (r) return Promise.resolve(r);
    if (this.failure) return Promise.reject(this.failure);
    return new Promise((resolve, reject) => this.waiting.push({ resolve, reject }));
  }

  write(data: string | Buffer): Promise<void> {
    return new Promise((resolve, reject) => this.socket.write(data, (err) => (err ? reject(err) : resolve())));
  }

  async quit() {
    if (this.failure) return;
    this.socket.write('QUIT\r\n');
    await this.reply().catch(() => undefined);
    this.socket.end();
  }
}

/** Sends `messages` over `connections` parallel connections, each taking the next unsent message. */
export async function runLoad(opts: { host: string; port: number; connections: number; messages: BenchMessage[]; from: string; pipelining: boolean }): Promise<LoadResult> {
  const result: LoadResult = { sent: 0, accepted: 0, rejected: {}, latenciesMs: [], seconds: 0, pipelining: opts.pipelining, samples: [] };
  const refuse = (code: number | string, text?: string) => {
    result.rejected[code] = (result.rejected[code] ?? 0) + 1;
    if (text && result.samples.length < 5) result.samples.push(`${code} ${text}`);
  };
  let next = 0;

  /** RSET after a refused transaction; a connection that fails here is dropped, not counted twice. */
  async function reset(conn: Connection) {
    conn.socket.write('RSET\r\n');
    await conn.reply().catch(() => conn.socket.destroy());
  }

  async function sendOne(conn: Connection, msg: BenchMessage) {
    const mail = `MAIL FROM:<${opts.from}>${conn.extensions.has('SIZE') ? ` SIZE=${msg.data.length}` : ''}\r\n`;
    const rcpt = `RCPT TO:<${msg.rcpt}>\r\n`;
    const ok = (r: Reply) => r.code === 250 || r.code === 251;
    let data: Reply;
    if (opts.pipelining && conn.extensions.has('PIPELINING')) {
      conn.socket.write(mail + rcpt + 'DATA\r\n');
      const [m, r, d] = [await conn.reply(), await conn.reply(), await conn.reply()];
      // After a refused MAIL or RCPT the server refuses DATA too (RFC 2920): count the first refusal.
      const refused = !ok(m) ? m : !ok(r) ? r : null;
      if (refused && d.code !== 354) {
        refuse(refused.code, refused.text);
        return reset(conn);
      }
      data = d;
    } else {
      for (const cmd of [mail, rcpt]) {
        conn.socket.write(cmd);
        const r = await conn.reply();
        if (!ok(r)) {
          refuse(r.code, r.text);
          return reset(conn);
        }
      }
      conn.socket.write('DATA\r\n');
      data = await conn.reply();
    }
    if (data.code !== 354) {
      refuse(data.code, data.text);
      return reset(conn);
    }
    // Body and final dot in one write (one segment train, no wait for the body's write callback).
    conn.socket.write(msg.data);
    const t0 = performance.now();
    conn.socket.write('.\r\n');
    const end = await conn.reply();
    result.latenciesMs.push(performance.now() - t0);
    if (end.code === 250) result.accepted++;
    else refuse(end.code, end.text);
  }

  async function worker(id: number) {
    let conn: Connection | null = null;
    while (next < opts.messages.length) {
      const msg = opts.messages[next++]!;
      result.sent++;
      try {
        if (conn?.socket.destroyed) conn = null;
        conn ??= await Connection.open(opts.host, opts.port, `bench-client-${id}.test`);
        await sendOne(conn, msg);
      } catch (err) {
        // The server dropped the connection (a 421, a crash, a timeout): count it and reconnect.
        refuse('closed', (err as Error).message);
        conn?.socket.destroy();
        conn = null;
      }
    }
    await conn?.quit();
  }

  const t0 = performance.now();
  await Promise.all(Array.from({ length: Math.min(opts.connections, opts.messages.length) }, (_, i) => worker(i)));
  result.seconds = (performance.now() - t0) / 1000;
  return result;
}

/** Nearest-rank percentile of an unsorted list. */
export function percentile(values: number[], p: number): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}
