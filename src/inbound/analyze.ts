import { authenticateMessage, type AuthSummary, type DnsResolver } from './authenticate.ts';
import { parseMessage } from './parse.ts';
import type { ParsedFields } from './parse-types.ts';
import { spamSignals } from './spam-signals.ts';
import { addressOf } from '../blobs/digest.ts';
import type { StoredBlob } from '../blobs/blob-store.ts';

/** What one received message needs besides its bytes. */
export interface AnalyzeInput {
  /** The accepted recipients' addresses: one message.json each (delivered_to differs). */
  deliveredTo: string[];
  receivedAt: Date;
  clientIp: string;
  helo: string | null;
  mailFrom: string | null;
  /** Our hostname, for Authentication-Results. */
  mta: string;
  /** Blobs of at most this size are kept in the database: their checksums are computed here. */
  inlineMaxBytes: number;
}

export interface Analysis {
  /** What the store needs of the parsed message: not the sanitized HTML, which only message.json holds. */
  parsed: InboundFields;
  auth: AuthSummary | null;
  spamFlags: string[];
  /** message.json per recipient, in `deliveredTo` order, as stored. */
  jsonBytes: Buffer[];
  /**
   * Address and size of the message and of each message.json, for those small enough to be kept in
   * the database (src/blobs/inline-blobs.ts; no MD5: src/blobs/digest.ts addressOf); null for the
   * others, which the store hashes as it writes them.
   */
  digests: { raw: StoredBlob | null; json: (StoredBlob | null)[] };
}

/** The parsed fields the event loop uses (the analysis crosses to it from a thread: less to copy). */
export type InboundFields = Omit<ParsedFields, 'body_html_sanitized'>;

/**
 * The CPU-heavy part of receiving one message, free of the database and the store: parse it, check
 * SPF/DKIM/DMARC/ARC, note spam signals and serialize each recipient's message.json. It runs in a
 * worker thread (src/inbound/analyze-pool.ts) or, where none runs, on the event loop; the result
 * is the same either way.
 */
export async function analyzeMessage(bytes: Buffer, input: AnalyzeInput, resolver: DnsResolver): Promise<Analysis> {
  const parsed = await parseMessage(bytes, { deliveredTo: input.deliveredTo[0]!, receivedAt: input.receivedAt });
  const auth = await authenticateMessage({ raw: bytes, clientIp: input.clientIp, helo: input.helo, mailFrom: input.mailFrom, mta: input.mta, resolver });
  const spamFlags = spamSignals(bytes, parsed);
  const base = parsed.messageJson();
  const messages = input.deliveredTo.map((address) => ({ ...base, delivered_to: address }));
  const { messageJson: _fn, body_html_sanitized: _html, ...fields } = parsed;
  const jsonBytes = messages.map((m) => Buffer.from(JSON.stringify(m, null, 2)));
  const digest = (b: Buffer) => (b.byteLength <= input.inlineMaxBytes ? addressOf(b) : null);
  return { parsed: fields, auth, spamFlags, jsonBytes, digests: { raw: digest(bytes), json: jsonBytes.map(digest) } };
}
