import type { SMTPServer, SMTPServerSession } from 'smtp-server';
import { GreetingSmtpServer } from './greeting.ts';
import { once } from 'node:events';
import { isIPv6 } from 'node:net';
import type { Readable } from 'node:stream';
import type { AppDeps } from '../context.ts';
import { AppError, ERROR_CATALOGUE } from '../errors.ts';
import type { DnsResolver } from './authenticate.ts';
import { InboundPipeline, type ReceiveReport } from './receive.ts';
import { resolveRecipient, SERVER_MAX_MESSAGE_BYTES, type Recipient } from './recipients.ts';

export interface SmtpOptions {
  /** Name in the greeting, EHLO reply and Authentication-Results. */
  hostname: string;
  resolver: DnsResolver;
  tls?: { key: Buffer; cert: Buffer };
  log: { info: (obj: unknown, msg: string) => void; error: (obj: unknown, msg: string) => void; warn: (obj: unknown, msg: string) => void };
}

interface Transaction {
  recipients: Recipient[];
  /** For the transaction's log line: every RCPT and its reply, the time MAIL FROM came. */
  mailFrom: string | null;
  refused: { address: string; code: number }[];
  startedAt: number;
  logged: boolean;
}

/** Per server: sessions whose DATA is being received or stored (a shutdown lets them finish). */
interface ShutdownState {
  busy: Set<string>;
  /** Set by closeSmtpServer: closes every session not in DATA (called again as each DATA ends). */
  closeIdle: (() => void) | null;
  /** Stops what the pipeline runs beside the sessions (its analysis threads), once they are gone. */
  release?: () => Promise<void>;
}
const shutdownByServer = new WeakMap<SMTPServer, ShutdownState>();

const MAX_RECIPIENTS = 100;
/** Refused recipients per connection before we stop answering (address harvesting). */
const MAX_REFUSALS = 25;
const MAX_CLIENTS = 500;
/** Messages on one connection; then the client is asked to reconnect (bounds a session's lifetime). */
const MAX_MESSAGES_PER_CONNECTION = 1000;

/**
 * The inbound SMTP adapter: ESMTP with SIZE, 8BITMIME, SMTPUTF8, PIPELINING and STARTTLS when a
 * certificate is configured; no AUTH (receiving only, never a relay). Decisions are made by the
 * inbound services; this file only translates them into SMTP replies.
 */
export function createSmtpServer(deps: AppDeps, opts: SmtpOptions): SMTPServer {
  const pipeline = new InboundPipeline(deps, { resolver: opts.resolver, mta: opts.hostname });
  const transactions = new WeakMap<SMTPServerSession, Transaction>();
  const refusals = new Map<string, number>();
  const messages = new Map<string, number>();
  const perIp = new Map<string, number>();
  const counted = new Set<string>();
  const state: ShutdownState = { busy: new Set<string>(), closeIdle: null, release: () => pipeline.close() };
  const busy = state.busy;

  // One log line (and one metrics sample) per transaction: when DATA is answered, or when a
  // transaction ends without DATA (all recipients refused, RSET, a new MAIL FROM, disconnect).
  const report = (session: SMTPServerSession, tx: Transaction, outcome: { code: number; size?: number; ids?: string[]; auth?: ReceiveReport['auth']; error?: unknown }) => {
    if (tx.logged) return;
    tx.logged = true;
    const accepted = outcome.code >= 200 && outcome.code < 300;
    const result = accepted ? 'accepted' : outcome.code >= 400 ? 'refused' : 'abandoned';
    deps.metrics.smtpMessages.inc({ outcome: result, code: String(outcome.code || 'none') });
    const auth = outcome.auth;
    opts.log.info(
      {
        smtp: {
          session: session.id,
          client_ip: session.remoteAddress ?? null,
          helo: session.hostNameAppearsAs ?? null,
          mail_from: tx.mailFrom,
          recipients: tx.recipients.map((r) => r.address),
          refused: tx.refused,
          size: outcome.size ?? null,
          email_ids: outcome.ids ?? [],
          spf: auth?.spf.result ?? null,
          dkim: auth ? (auth.dkim.find((d) => d.result === 'pass')?.result ?? auth.dkim[0]?.result ?? 'none') : null,
          dmarc: auth?.dmarc.result ?? null,
          reply: outcome.code || null,
          outcome: result,
          error: outcome.error === undefined ? null : errorOf(outcome.error),
          ms: Date.now() - tx.startedAt,
        },
      },
      'smtp transaction',
    );
  };
  const endWithoutData = (session: SMTPServerSession) => {
    const tx = transactions.get(session);
    if (!tx) return;
    transactions.delete(session);
    report(session, tx, { code: tx.refused.at(-1)?.code ?? 0 });
  };

  const server = new GreetingSmtpServer({
    name: opts.hostname,
    banner: 'Cubby ESMTP',
    size: SERVER_MAX_MESSAGE_BYTES,
    authOptional: true,
    disabledCommands: opts.tls ? ['AUTH'] : ['AUTH', 'STARTTLS'],
    hideSTARTTLS: !opts.tls,
    ...(opts.tls ? { key: opts.tls.key, cert: opts.tls.cert } : {}),
    disableReverseLookup: true,
    maxClients: MAX_CLIENTS,
    maxRecipients: MAX_RECIPIENTS,
    socketTimeout: 60_000,
    closeTimeout: 10_000,
    logger: false,

    onConnect(session, cb) {
      const ip = clientKey(session.remoteAddress);
      if ((perIp.get(ip) ?? 0) >= deps.config.smtpMaxConnectionsPerIp) return cb(smtpError(421, '4.7.0', 'too many connections from your address; try again later'));
      perIp.set(ip, (perIp.get(ip) ?? 0) + 1);
      deps.metrics.smtpSessions.inc();
      counted.add(session.id);
      refusals.set(session.id, 0);
      messages.set(session.id, 0);
      cb();
    },
    onClose(session) {
      endWithoutData(session);
      refusals.delete(session.id);
      messages.delete(session.id);
      if (!counted.delete(session.id)) return;
      const ip = clientKey(session.remoteAddress);
      const left = (perIp.get(ip) ?? 1) - 1;
      if (left > 0) perIp.set(ip, left);
      else perIp.delete(ip);
    },
    onMailFrom(address, session, cb) {
      const n = (messages.get(session.id) ?? 0) + 1;
      messages.set(session.id, n);
      if (n > MAX_MESSAGES_PER_CONNECTION) return cb(smtpError(421, '4.7.0', `at most ${MAX_MESSAGES_PER_CONNECTION} messages per connection; reconnect`));
      endWithoutData(session);
      transactions.set(session, { recipients: [], mailFrom: address.address || null, refused: [], startedAt: Date.now(), logged: false });
      cb();
    },
    onRcptTo(address, session, cb) {
      if ((refusals.get(session.id) ?? 0) >= MAX_REFUSALS) return cb(smtpError(421, '4.7.0', 'too many refused recipients; closing'));
      const tx = transactions.get(session) ?? { recipients: [], mailFrom: null, refused: [], startedAt: Date.now(), logged: false };
      transactions.set(session, tx);
      const mailFrom = session.envelope.mailFrom ? session.envelope.mailFrom.address || null : null;
      const args = session.envelope.mailFrom ? (session.envelope.mailFrom.args as Record<string, string> | false) : false;
      const size = (args && Number(args.SIZE)) || null;
      resolveRecipient(deps, address.address, mailFrom, size).then(
        (r) => {
          tx.recipients.push(r);
          cb();
        },
        (err) => {
          refusals.set(session.id, (refusals.get(session.id) ?? 0) + 1);
          const reply = toSmtpError(err, opts);
          tx.refused.push({ address: address.address, code: reply.responseCode });
          cb(reply);
        },
      );
    },
    onData(stream, session, cb) {
      const tx = transactions.get(session) ?? { recipients: [], mailFrom: null, refused: [], startedAt: Date.now(), logged: false };
      transactions.delete(session);
      const mailFrom = session.envelope.mailFrom ? session.envelope.mailFrom.address || null : null;
      const dataAt = Date.now();
      // The final dot: from here the sender waits for our reply.
      let dataEndAt = 0;
      stream.once('end', () => (dataEndAt = performance.now()));
      const facts: ReceiveReport = {};
      busy.add(session.id);
      const finish = async (err: unknown, ids?: string[]) => {
        if (err) await drain(stream);
        const reply = err ? toSmtpError(err, opts) : null;
        busy.delete(session.id);
        deps.metrics.smtpIngest.observe({ outcome: reply ? 'refused' : 'accepted' }, (Date.now() - dataAt) / 1000);
        if (!reply && dataEndAt) deps.metrics.smtpDataEndToReply.observe((performance.now() - dataEndAt) / 1000);
        report(session, tx, { code: reply?.responseCode ?? 250, size: facts.size, ids, auth: facts.auth, error: err || undefined });
        if (reply) cb(reply);
        else cb(null, `2.0.0 Ok: stored ${ids!.join(' ')}`);
        // Shutting down: the reply is on its way; the session is closed right after it.
        if (state.closeIdle) setImmediate(state.closeIdle);
      };
      if (!tx.recipients.length) return void finish(new AppError('RECIPIENT_UNKNOWN', 'no valid recipients'));
      pipeline
        .receive({ body: stream, recipients: tx.recipients, mailFrom, clientIp: session.remoteAddress ?? null, helo: session.hostNameAppearsAs ?? null }, facts)
        .then((ids) => finish(null, ids), (err) => finish(err));
    },
  }, deps.config.smtpGreetingDelayMs);
  shutdownByServer.set(server, state);
  server.on('error', (err) => opts.log.warn({ err: { message: err.message, code: (err as NodeJS.ErrnoException).code } }, 'smtp connection error'));
  return server;
}

/**
 * Graceful stop: no new connections; sessions not inside DATA are told 421 and closed now (the
 * sender retries later, nothing was accepted); DATA in progress is received, stored and answered,
 * after which its client is told 421 at its next command. Whatever is still open after `graceMs`
 * is answered 421 and closed by smtp-server. Resolves when every connection is gone.
 */
export function closeSmtpServer(server: SMTPServer, graceMs: number): Promise<void> {
  const state = shutdownByServer.get(server) ?? { busy: new Set<string>(), closeIdle: null };
  (server.options as { closeTimeout?: number }).closeTimeout = Math.max(1, graceMs);
  const closed = new Promise<void>((resolve) => server.close(() => resolve())).then(() => state.release?.());
  const connections = (server as unknown as { connections: Set<{ session: SMTPServerSession; send(code: number, text: string): void; close(): void }> }).connections;
  state.closeIdle = () => {
    for (const c of [...connections]) {
      if (state.busy.has(c.session.id)) continue;
      c.send(421, 'Server shutting down; try again later');
      c.close();
    }
  };
  state.closeIdle();
  return closed;
}

/** Reads and discards the rest of DATA so that the reply lines up with the client's stream. */
async function drain(stream: Readable): Promise<void> {
  if (stream.readableEnded || stream.destroyed) return;
  stream.resume();
  await once(stream, 'end').catch(() => undefined);
}

/**
 * The unit the per-address connection limit counts: an IPv4 address, or an IPv6 /64 (one site
 * usually holds a whole /64, so counting single IPv6 addresses would let it open a connection per
 * address).
 */
export function clientKey(remote: string | undefined): string {
  const ip = (remote ?? '').replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/i, '');
  if (!isIPv6(ip)) return ip;
  const [head = '', tail = ''] = ip.toLowerCase().split('::');
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  const full = ip.includes('::') ? [...left, ...Array(8 - left.length - right.length).fill('0'), ...right] : left;
  return `${full.slice(0, 4).map((h) => h.replace(/^0+(?=.)/, '')).join(':')}::/64`;
}

function smtpError(code: number, enhanced: string, text: string): Error & { responseCode: number } {
  return Object.assign(new Error(`${enhanced} ${text}`.replace(/[\r\n]+/g, ' ')), { responseCode: code });
}

/**
 * What the transaction log line says about a refused DATA: the error code, and for a storage fault
 * the underlying error's message (src/inbound/receive.ts keeps it as `cause`), never more than 200
 * characters. Messages of our errors and of database and file system errors name no secrets.
 */
function errorOf(err: unknown): { code: string; cause: string | null } {
  if (err instanceof AppError) return { code: err.code, cause: typeof err.details.cause === 'string' ? err.details.cause : null };
  const e = err as Error;
  return { code: e?.name && e.name !== 'Error' ? e.name : 'INTERNAL', cause: String(e?.message ?? err).slice(0, 200) };
}

/** Maps the catalogue's `smtp` replies; anything unexpected is a temporary failure (451). */
function toSmtpError(err: unknown, opts: SmtpOptions): Error & { responseCode: number } {
  if (err instanceof AppError) {
    const entry = ERROR_CATALOGUE[err.code] as { smtp?: { code: number; enhanced: string } };
    if (entry.smtp) return smtpError(entry.smtp.code, entry.smtp.enhanced, err.message);
    opts.log.error({ code: err.code }, 'inbound refusal without an SMTP reply');
    return smtpError(451, '4.3.0', 'temporary failure; try again later');
  }
  if (typeof (err as { responseCode?: number })?.responseCode === 'number') return err as Error & { responseCode: number };
  opts.log.error({ err: String((err as Error)?.stack ?? err).slice(0, 2000) }, 'inbound failure');
  return smtpError(451, '4.3.0', 'temporary failure; try again later');
}
