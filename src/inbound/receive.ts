import { PassThrough, Writable, type Readable } from 'node:stream';
import type { StoredBlob } from '../blobs/blob-store.ts';
import type { AppDeps } from '../context.ts';
import type { DnsResolver, AuthSummary } from './authenticate.ts';
import { AnalyzePool } from './analyze-pool.ts';
import type { AttachmentSummary } from './parse-types.ts';
import type { Recipient } from './recipients.ts';
import { checkAllowance, stillRouted, usageAtEndOfData } from './recipients.ts';
import { commitDeliveries, type InboundDelivery } from './store.ts';
import { AppError } from '../errors.ts';
import { newId } from '../ids.ts';
import { GroupCommit } from '../db/group-commit.ts';
import { dataBudgetOf, DataBudgetExceeded, type DataBudget, type DataReservation } from './data-budget.ts';
import { searchIndex } from '../search/search-index.ts';
import { BlobsForCommit } from '../blobs/inline-blobs.ts';

/** Past this size a message is written to the store while DATA goes on (the spool's one-write limit). */
const STREAM_FROM_BYTES = 1024 * 1024;

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
 * The inbound pipeline for one message: take DATA under the recipients' size cap, store it as a
 * blob while parsing it and checking sender authentication, store the decoded parts, then one email per
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
    // The bytes are kept as they arrive: parsing and authentication need them, and the raw blob is
    // written from them once the recipients are known to still take the message. A message past
    // STREAM_FROM_BYTES is written as it comes instead, so that its disk time overlaps DATA.
    const chunks: Buffer[] = [];
    let size = 0;
    let streamed = null as { body: PassThrough; put: Promise<StoredBlob> } | null;
    const sink = new Writable({
      write(chunk: Buffer, _enc, cb) {
        if (!reservation.take(chunk.length)) return cb(new DataBudgetExceeded());
        size += chunk.length;
        if (size > maxBytes) return cb(new AppError('MESSAGE_TOO_LARGE', `message exceeds the limit of ${maxBytes} bytes`));
        chunks.push(chunk);
        if (!streamed && size > STREAM_FROM_BYTES) {
          const body = new PassThrough();
          streamed = { body, put: deps.blobs.put(body, { maxBytes }) };
          // A store that fails stops DATA (the reply is a 451 once the rest is drained).
          streamed.put.catch((err: unknown) => sink.destroy(err as Error));
          for (const c of chunks.slice(0, -1)) body.write(c);
        }
        if (streamed && !streamed.body.write(chunk)) return void streamed.body.once('drain', () => cb());
        cb();
      },
      final(cb) {
        streamed?.body.end();
        cb();
      },
    });
    msg.body.on('error', (err) => sink.destroy(err));
    const failed = (err: unknown): never => {
      // Stopped reading: detach so that the caller can drain the rest of DATA, and end a write in
      // progress (its temp file is removed).
      msg.body.unpipe(sink);
      streamed?.body.destroy(err as Error);
      streamed?.put.catch(() => undefined);
      chunks.length = 0;
      if (err instanceof DataBudgetExceeded) throw err;
      throw storageFault(err);
    };
    await new Promise<void>((resolve, reject) => {
      sink.once('finish', resolve);
      sink.once('error', reject);
      msg.body.pipe(sink);
    }).catch(failed);
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
      await streamed?.put.catch(() => undefined); // not left running; the sweep takes the blob
      throw lastRefusal ?? new AppError('RECIPIENT_UNKNOWN', 'no recipient address is receiving any more');
    }

    let expected: (() => void) | undefined;
    const bytes = Buffer.concat(chunks);
    chunks.length = 0; // one copy of the message, not two
    // Small blobs are kept in the database by the commit (src/blobs/inline-blobs.ts); the analysis
    // computes their checksums. A larger raw blob's fsyncs run (on a writer thread or libuv's pool)
    // while the message is parsed and authenticated; it is awaited before the commit.
    const inlineMaxBytes = streamed ? -1 : deps.config.blobs.inlineMaxBytes;
    const blobs = new BlobsForCommit(deps.blobs, inlineMaxBytes);
    const putting = streamed?.put ?? (blobs.keeps(bytes.byteLength) ? null : deps.blobs.putBuffer(bytes));
    putting?.catch(() => undefined); // awaited below; never an unhandled rejection meanwhile
    try {
      // Announced to the group commit from here: a group may wait a little (CUBBY_SMTP_COMMIT_WINDOW_MS)
      // for messages being analyzed (src/db/group-commit.ts). Once small blobs were kept in their
      // rows nothing else held a message back, and groups fell from about 4.5 messages to 2.
      expected = this.commits.expect();
      const { parsed, auth, spamFlags, jsonBytes, digests } = await this.analysis.analyze(bytes, {
        deliveredTo: accepted.map((r) => r.address), receivedAt, clientIp: msg.clientIp ?? '127.0.0.1', helo: msg.helo, mailFrom: msg.mailFrom, mta: this.opts.mta, inlineMaxBytes,
      });
      report.auth = auth;
      const storedAttachments: AttachmentSummary[] = parsed.attachments.map(({ content: _content, ...summary }) => summary);
      // md5 is informational for attachments (the store leaves it empty in their rows).
      const unique = new Map(parsed.attachments.map((a) => [a.sha256, blobs.put(a.content, { sha256: a.sha256, md5Base64: '', byteSize: a.content.byteLength })]));
      // Every blob of the message written to the store is written (and fsynced) in parallel.
      const blobsStored = Promise.all([Promise.all(jsonBytes.map((b, i) => blobs.put(b, digests.json[i]))), Promise.all(unique.values())]);
      // While they are: the body made ready for the search index, work the group commit would
      // otherwise do while it holds the mailbox (src/search/search-index.ts, PreparedText).
      const searchBody = searchIndex(deps).prepareBody(deps.db, parsed.body_text ?? '');
      const [jsons] = await blobsStored;
      const raw = await (putting ?? blobs.put(bytes, digests.raw));
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
          storedAttachments,
          inlineBlobs: blobs.inline,
          envelope: { mailFrom: msg.mailFrom, clientIp: msg.clientIp, helo: msg.helo },
          auth,
          spamFlags,
          searchBody,
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
