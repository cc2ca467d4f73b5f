import nodemailer from 'nodemailer';
import net from 'node:net';
import type { TestApp, TestUser } from './harness.ts';

// Mail arrives the real way in tests: over SMTP to the app's listener.

export interface SendOptions {
  from?: string;
  to: string | string[];
  cc?: string | string[];
  subject?: string;
  text?: string;
  html?: string;
  attachments?: { filename: string; content: string | Buffer; contentType?: string }[];
  headers?: Record<string, string>;
  /** A whole message as is (From/To headers inside); the envelope comes from `from`/`to`. */
  raw?: string | Buffer;
  messageId?: string;
  inReplyTo?: string;
  references?: string | string[];
}

export interface SendResult {
  accepted: string[];
  rejected: string[];
  response: string;
  /** The `eml_` ids our server put in its 250 reply. */
  emailIds: string[];
}

export async function sendMail(app: TestApp, opts: SendOptions): Promise<SendResult> {
  const transport = nodemailer.createTransport({ host: '127.0.0.1', port: app.started.ports.smtp!, secure: false, ignoreTLS: true, tls: { rejectUnauthorized: false } });
  try {
    const from = opts.from ?? 'sender@example.com';
    const info = opts.raw
      ? await transport.sendMail({ envelope: { from, to: opts.to }, raw: opts.raw })
      : await transport.sendMail({
          from,
          to: opts.to,
          cc: opts.cc,
          subject: opts.subject ?? 'Hello',
          text: opts.text ?? 'Hello there.',
          html: opts.html,
          attachments: opts.attachments,
          headers: opts.headers,
          messageId: opts.messageId,
          inReplyTo: opts.inReplyTo,
          references: opts.references,
        });
    return {
      accepted: info.accepted.map(String),
      rejected: info.rejected.map(String),
      response: info.response,
      emailIds: info.response.match(/eml_[A-Za-z0-9]+/g) ?? [],
    };
  } finally {
    transport.close();
  }
}

/** Runs every due job now (labeling included), so withheld emails are labeled. */
export async function labelNow(app: TestApp): Promise<void> {
  await app.started.deps.jobs.worker!.drain();
}

/** Creates a mailbox over the API and returns its id and address. */
export async function mailboxWithAddress(app: TestApp, user: TestUser, title?: string): Promise<{ id: string; address: string }> {
  const res = await app.request('POST', '/v1/mailboxes', { key: user.key, body: { mailbox: { title: title ?? `Inbox ${Math.random().toString(36).slice(2, 8)}` } } });
  if (res.status !== 201 && res.status !== 200) throw new Error(`mailbox create failed: ${res.status} ${res.text}`);
  const m = res.body.data.mailbox;
  return { id: m.id, address: m.email?.address ?? m.address };
}

/** One raw SMTP connection driven step by step; `reply()` resolves with the next whole reply (all its lines). */
export async function smtpSession(app: TestApp) {
  const socket = net.connect(app.started.ports.smtp!, '127.0.0.1');
  let buf = '';
  let wake: (() => void) | null = null;
  socket.on('data', (d) => {
    buf += d.toString('latin1');
    wake?.();
  });
  const closed = new Promise<void>((r) => socket.on('close', () => r()));
  const reply = async (): Promise<string> => {
    for (;;) {
      const m = /(?:^|\r\n)(\d{3}) [^\r\n]*\r\n/.exec(buf);
      if (m) {
        const end = m.index + m[0].length;
        const out = buf.slice(0, end).trimEnd();
        buf = buf.slice(end);
        return out;
      }
      const gotData = new Promise<void>((r) => (wake = r));
      const done = await Promise.race([gotData.then(() => false), closed.then(() => true)]);
      if (done && !/\r\n$/.test(buf)) return buf || '(closed)';
    }
  };
  const greeting = await reply();
  return {
    greeting,
    reply,
    /** Sends a command line (CRLF added) or raw bytes, and waits for the reply. */
    async send(line: string | Buffer): Promise<string> {
      socket.write(typeof line === 'string' ? line + '\r\n' : line);
      return reply();
    },
    write(data: string | Buffer) {
      socket.write(data);
    },
    /** Writes and resolves once the bytes are handed to the kernel. */
    writeAndFlush(data: string | Buffer): Promise<void> {
      return new Promise((resolve, reject) => socket.write(data, (err) => (err ? reject(err) : resolve())));
    },
    /** Sends each write as its own segment (no Nagle). */
    noDelay() {
      socket.setNoDelay(true);
    },
    end() {
      socket.end();
    },
    close() {
      socket.destroy();
    },
  };
}

/**
 * A minimal SMTP conversation for cases nodemailer refuses to produce (broken commands, huge
 * lines, exact replies): sends each line and collects the server's reply to it. Each item gets
 * exactly one reply: a command, or a whole DATA body ending in "\r\n." .
 */
export async function smtpDialogue(app: TestApp, lines: (string | Buffer)[], opts: { beforeLine?: (index: number) => Promise<void> } = {}): Promise<string[]> {
  const session = await smtpSession(app);
  const replies = [session.greeting];
  for (const [i, line] of lines.entries()) {
    await opts.beforeLine?.(i);
    replies.push(await session.send(line));
  }
  session.end();
  return replies;
}
