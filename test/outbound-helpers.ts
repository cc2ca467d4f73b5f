import { SMTPServer } from 'smtp-server';
import { expect } from 'vitest';
import type { DnsResolver } from '../src/inbound/authenticate.ts';
import type { TestApp, TestUser } from './harness.ts';

// Outbound mail tests: a real SMTP server stands in for the relay or a recipient's MX, and a zone
// of records in memory stands in for DNS (MX for recipients, SPF/DKIM TXT for senders).

export interface SinkMessage {
  mailFrom: string;
  rcptTo: string[];
  raw: Buffer;
  user: string | null;
}

export interface Sink {
  port: number;
  url: string;
  messages: SinkMessage[];
  /**
   * Decides the reply to DATA for each message (default 250). Return an Error with responseCode to
   * refuse, or 'hold' to never answer (the client must give up or die before our 250).
   */
  respond: (m: SinkMessage, index: number) => Error | null | 'hold';
  /** Decides the reply to RCPT TO. */
  rcpt: (address: string) => Error | null;
  /** Resolves when `n` messages (accepted or not) reached DATA. */
  waitFor(n: number): Promise<void>;
  close(): Promise<void>;
}

export function smtpReply(code: number, text: string): Error {
  return Object.assign(new Error(text), { responseCode: code });
}

/** A recording SMTP server on a free port; with `auth`, it requires that user and password (a relay). */
export async function startSink(opts: { auth?: { user: string; pass: string } } = {}): Promise<Sink> {
  const waiters: { n: number; resolve: () => void }[] = [];
  let seen = 0;
  const sink: Sink = {
    port: 0,
    url: '',
    messages: [],
    respond: () => null,
    rcpt: () => null,
    waitFor(n) {
      return seen >= n ? Promise.resolve() : new Promise((resolve) => waiters.push({ n, resolve }));
    },
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
  const server = new SMTPServer({
    authOptional: !opts.auth,
    allowInsecureAuth: true,
    disabledCommands: opts.auth ? ['STARTTLS'] : ['AUTH', 'STARTTLS'],
    hideSTARTTLS: true,
    logger: false,
    onAuth(auth, _session, cb) {
      if (opts.auth && auth.username === opts.auth.user && auth.password === opts.auth.pass) return cb(null, { user: auth.username });
      cb(smtpReply(535, '5.7.8 authentication failed'));
    },
    onRcptTo(address, _session, cb) {
      const err = sink.rcpt(address.address);
      cb(err ?? undefined);
    },
    onData(stream, session, cb) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        const m: SinkMessage = {
          mailFrom: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
          rcptTo: session.envelope.rcptTo.map((r) => r.address),
          raw: Buffer.concat(chunks),
          user: (session.user as string | undefined) ?? null,
        };
        const err = sink.respond(m, seen);
        if (!err) sink.messages.push(m);
        seen++;
        for (const w of waiters.filter((x) => seen >= x.n)) w.resolve();
        if (err === 'hold') return;
        cb(err, err ? undefined : `2.0.0 Ok: queued as SINK${seen}`);
      });
    },
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const addr = server.server.address();
  sink.port = typeof addr === 'object' && addr ? addr.port : 0;
  sink.url = opts.auth ? `smtp://${encodeURIComponent(opts.auth.user)}:${encodeURIComponent(opts.auth.pass)}@127.0.0.1:${sink.port}` : `smtp://127.0.0.1:${sink.port}`;
  return sink;
}

/** A DNS zone in memory: `records['example.com'] = { MX: [...], TXT: [[...]], A: [...] }`; anything else is ENOTFOUND. */
export function zone(records: Record<string, Record<string, unknown[]>>): DnsResolver & { records: typeof records } {
  const resolve = (async (name: string, rrtype: string) => {
    const hit = records[name.toLowerCase().replace(/\.$/, '')]?.[rrtype];
    if (!hit || !hit.length) throw Object.assign(new Error(`queryTxt ENOTFOUND ${name}`), { code: 'ENOTFOUND' });
    return hit;
  }) as DnsResolver & { records: typeof records };
  resolve.records = records;
  return resolve;
}

export function send(app: TestApp, key: string, mailboxId: string, body: Record<string, unknown>) {
  return app.request('POST', `/v1/mailboxes/${mailboxId}/emails`, { key, body });
}

/** Sends and expects 202; returns the sent email summary. */
export async function sent(app: TestApp, key: string, mailboxId: string, body: Record<string, unknown>) {
  const res = await send(app, key, mailboxId, body);
  expect(res.status, res.text).toBe(202);
  return res.body.data.email;
}

/** Runs every due job (deliveries, labeling) until none is due. */
export async function drain(app: TestApp): Promise<void> {
  await app.started.deps.jobs.worker!.drain();
}

export async function readEmail(app: TestApp, key: string, mailboxId: string, emailId: string) {
  const res = await app.request('GET', `/v1/mailboxes/${mailboxId}/emails/${emailId}`, { key });
  expect(res.status, res.text).toBe(200);
  return res.body.data.email;
}

export async function listEmails(app: TestApp, key: string, mailboxId: string, query: Record<string, string> = {}) {
  const res = await app.request('GET', `/v1/mailboxes/${mailboxId}/emails`, { key, query });
  expect(res.status, res.text).toBe(200);
  return res.body.data.emails as any[];
}

export async function addMember(app: TestApp, owner: TestUser, member: TestUser, role: 'administrator' | 'collaborator' = 'collaborator'): Promise<void> {
  const now = new Date().toISOString();
  await app.started.deps.db
    .insertInto('memberships')
    .values({ id: `mem_${Math.random().toString(36).slice(2)}${Date.now().toString(36)}`, account_id: owner.accountId, user_id: member.userId, role, created_at: now })
    .execute();
}
