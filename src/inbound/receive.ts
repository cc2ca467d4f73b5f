import { Transform, type Readable } from 'node:stream';
import type { AppDeps } from '../context.ts';
import type { DnsResolver, AuthSummary } from './authenticate.ts';
import { AnalyzePool } from './analyze-pool.ts';
import type { AttachmentSummary } from './parse-types.ts';
import type { Recipient } from './recipients.ts';
import { checkAllowance, stillRouted, usageAtEndOfData } from './recipients.ts';
import { commitDeliveries, type InboundDelivery } from './store.ts';
import { BlobMismatchError } from '../blobs/blob-store.ts';
import { AppError } from '../errors.ts';
import { newId } from '../ids.ts';
import { GroupCommit } from '../db/group-commit.ts';
import { dataBudgetOf, DataBudgetExceeded, type DataBudget, type DataReservation } from './data-budget.ts';

export interface IncomingMessage {
  body: Readable;
  recipients: Recipient[];
  mailFrom: string | null;
  clientIp: string | null;
  helo: string | null;
}

/** What the SMTP transaction log line reports; filled in as the pipeline learns it. */
export interface ReceiveReport {
  size?: number;
  auth?: AuthSummary | null;
}

export interface ReceiveOptions {
  resolver: DnsResolver;
  /** Our hostname, for Authentication-Results. */
  mta: string;
}

/**
 * The inbound pipeline for one message: stream DATA into a blob under the recipients' size cap,
 * parse it, check sender authentication, store the decoded parts, then store one email per
 * mailbox in a group commit. Resolves only when everything is durable; the caller then answers 250.
 * Throws AppError with an SMTP reply: 552 too large or over allowance, 451 on storage faults.
 */
export class InboundPipeline {
  private readonly commits: GroupCommit<InboundDelivery>;
  private readonly budget: DataBudget;
  private readonly analysis: AnalyzePool;

  constructor(
    private readonly deps: AppDeps,
    private readonly opts: ReceiveOptions,
  ) {
    this.commits = new GroupCommit(
      (batch) => {
        deps.metrics.smtpGroupCommits.inc();
        return commitDeliveries(deps, batch);
      },
      { windowMs: deps.config.smtpCommitWindowMs },
    );
    this.budget = dataBudgetOf(deps);
    this.analysis = new AnalyzePool(opts.resolver, deps.config.smtpAnalysisThreads, { log: deps.log, counted: (on) => deps.metrics.smtpAnalyses.inc({ on }) });
  }

  /** Stops the analysis threads (after the last session). */
  close(): Promise<void> {
    return this.analysis.close();
  }

  async receive(msg: IncomingMessage, report: ReceiveReport = {}): Promise<string[]> {
    // The message's bytes count against the process's in-flight DATA bound until it is stored.
    const reservation = this.budget.open();
    try {
      return await this.receiveWithin(msg, reservation, report);
    } finally {
      reservation.release();
    }
  }

  private async receiveWithin(msg: IncomingMessage, reservation: DataReservation, report: ReceiveReport): Promise<string[]> {
    const { deps } = this;
    const maxBytes = Math.min(...msg.recipients.map((r) => r.maxMessageBytes));
    // Keep the bytes while they stream to the store: parsing and authentication need them, and
    // reading them back would cost another open and read per message.
    const chunks: Buffer[] = [];
    let size = 0;
    const tee = new Transform({
      transform(chunk: Buffer, _enc, cb) {
        if (!reservation.take(chunk.length)) return cb(new DataBudgetExceeded());
        chunks.push(chunk);
        size += chunk.length;
        cb(null, chunk);
      },
    });
    msg.body.on('error', (err) => tee.destroy(err));
    const failed = (err: unknown): never => {
      // The store stopped reading: detach so that the caller can drain the rest of DATA.
      msg.body.unpipe(tee);
      chunks.length = 0;
      if (err instanceof BlobMismatchError && err.tooLarge) throw new AppError('MESSAGE_TOO_LARGE', `message exceeds the limit of ${maxBytes} bytes`);
      if (err instanceof DataBudgetExceeded) throw err;
      throw storageFault(err);
    };
    // The raw blob's fsyncs run on libuv's pool while this thread parses and authenticates the
    // bytes: work starts once the last byte is in, and the blob is awaited before the commit.
    const putting = deps.blobs.put(msg.body.pipe(tee), { maxBytes });
    putting.catch(() => undefined); // awaited below; never an unhandled rejection meanwhile
    const allIn = new Promise<void>((resolve) => tee.once('finish', resolve));
    await Promise.race([allIn, putting]).catch(failed);
    report.size = size;
    const receivedAt = deps.now();
    // Recipients over the monthly byte allowance now that the size is known (the commit checks the
    // exact totals); if all are, refuse.
    const accepted: Recipient[] = [];
    let lastRefusal: unknown = null;
    const routed = dedupeByMailbox(await stillRouted(deps, msg.recipients));
    const oneGroup = new Set(routed.map((r) => r.groupId)).size <= 1;
    for (const r of routed) {
      try {
        checkAllowance(r.limits, await usageAtEndOfData(deps, r, oneGroup, receivedAt), size, r.address);
        accepted.push(r);
      } catch (err) {
        lastRefusal = err;
      }
    }
    if (!accepted.length) {
      await putting.catch(failed);
      throw lastRefusal ?? new AppError('RECIPIENT_UNKNOWN', 'no recipient address is receiving any more');
    }

    let expected: (() => void) | undefined;
    try {
      const bytes = Buffer.concat(chunks);
      chunks.length = 0; // one copy of the message, not two
      const { parsed, auth, spamFlags, messages, jsonBytes } = await this.analysis.analyze(bytes, {
        deliveredTo: accepted.map((r) => r.address), receivedAt, clientIp: msg.clientIp ?? '127.0.0.1', helo: msg.helo, mailFrom: msg.mailFrom, mta: this.opts.mta,
      });
      report.auth = auth;
      // Parsed and authenticated: only its blobs' fsyncs are left before the commit, which may wait
      // a little for it (src/db/group-commit.ts).
      expected = this.commits.expect();
      const storedAttachments: AttachmentSummary[] = parsed.attachments.map(({ content: _content, ...summary }) => summary);
      const unique = new Map(parsed.attachments.map((a) => [a.sha256, a.content]));
      // Every blob of the message is written (and fsynced) in parallel.
      const [jsons] = await Promise.all([Promise.all(jsonBytes.map((b) => deps.blobs.putBuffer(b))), Promise.all([...unique.values()].map((c) => deps.blobs.putBuffer(c)))]);
      const raw = await putting.catch(failed);
      const deliveries: InboundDelivery[] = [];
      for (const [i, r] of accepted.entries()) {
        deliveries.push({
          emailId: newId('eml'),
          mailboxId: r.mailboxId,
          deliveredTo: r.address,
          receivedAt,
          raw,
          parsed,
          messageJson: jsons[i]!,
          message: messages[i]!,
          storedAttachments,
          envelope: { mailFrom: msg.mailFrom, clientIp: msg.clientIp, helo: msg.helo },
          auth,
          spamFlags,
        });
      }
      await this.commits.submit(deliveries, expected);
      return deliveries.map((d) => d.emailId);
    } catch (err) {
      throw storageFault(err);
    } finally {
      expected?.(); // a message that failed before its submit is no longer awaited
    }
  }
}

function dedupeByMailbox(recipients: Recipient[]): Recipient[] {
  const byMailbox = new Map<string, Recipient>();
  for (const r of recipients) if (!byMailbox.has(r.mailboxId)) byMailbox.set(r.mailboxId, r);
  return [...byMailbox.values()];
}

/** Refusals keep their code (a full mailbox is the sender's problem); anything else is a 451. */
function storageFault(err: unknown): AppError {
  if (err instanceof AppError) {
    if (err.code === 'STORAGE_LIMIT_REACHED' || err.code === 'FILE_LIMIT_REACHED') {
      return new AppError('RECEIVED_BYTES_LIMIT_REACHED', 'mailbox storage is full', err.details);
    }
    if (err.code === 'MAILBOX_NOT_FOUND' || err.code === 'MAILBOX_ARCHIVED') return new AppError('MAILBOX_NOT_RECEIVING', 'mailbox is no longer receiving');
    return err;
  }
  return new AppError('STORAGE_UNAVAILABLE', 'message could not be stored; try again later', { cause: String((err as Error)?.message ?? err).slice(0, 200) });
}
