import type { MessageJson } from '../inbound/parse-types.ts';

/**
 * What the labeler reads of a message.json beyond the email's row (src/labels/labeler.ts
 * labelInputFromMessage): the headers, the list headers, and the names of every attachment (the
 * row lists only the stored ones).
 */
export type LabelHints = Pick<MessageJson, 'headers' | 'list_headers' | 'attachments'>;

/**
 * The message.json parts the inbound pipeline has just stored (LabelHints), for the labeling job
 * that reads them a moment later: it takes them instead of looking the file up, reading it back
 * from the blob store and parsing it (three steps per received message). Keyed by the message.json
 * file's id; each entry is taken once. Bounded by the file's size: when full, the oldest entries
 * go, and the labeler reads those from the store as before. Kept only in a process that runs the
 * worker.
 */
export class RecentMessages {
  private readonly entries = new Map<string, { message: LabelHints; bytes: number }>();
  private bytes = 0;

  constructor(private readonly maxBytes: number) {}

  put(jsonFileId: string, message: LabelHints, bytes: number): void {
    if (bytes > this.maxBytes) return;
    this.entries.set(jsonFileId, { message, bytes });
    this.bytes += bytes;
    while (this.bytes > this.maxBytes) {
      const [oldest, e] = this.entries.entries().next().value!;
      this.entries.delete(oldest);
      this.bytes -= e.bytes;
    }
  }

  take(jsonFileId: string): LabelHints | undefined {
    const e = this.entries.get(jsonFileId);
    if (!e) return undefined;
    this.entries.delete(jsonFileId);
    this.bytes -= e.bytes;
    return e.message;
  }

  get size(): number {
    return this.entries.size;
  }
}

const MAX_BYTES = 8 * 1024 * 1024;
const caches = new WeakMap<object, RecentMessages>();

/** The cache of this app (one per deps), or null when no worker runs here to take the entries. */
export function recentMessagesOf(deps: { jobs: { worker: unknown } }): RecentMessages | null {
  if (!deps.jobs.worker) return null;
  let c = caches.get(deps);
  if (!c) caches.set(deps, (c = new RecentMessages(MAX_BYTES)));
  return c;
}
