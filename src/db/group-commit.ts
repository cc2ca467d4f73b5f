/**
 * Group commit: submissions that arrive while a commit runs are written together by the next one,
 * so a burst of messages (or of uploaded files: src/files/record-uploads.ts) shares one transaction
 * (and one WAL fsync on SQLite) instead of queueing for one each. When a grouped commit fails, each submission is retried alone, so one bad message
 * never fails the others. A commit may return `durable` (src/db/durable-commit.ts): its submitters
 * are answered when that resolves, and the next group is committed meanwhile, so waiting for the
 * disk neither blocks the event loop nor stops the next group.
 *
 * Gathering window: a commit has a fixed cost (on SQLite about 1 ms of the event loop per
 * transaction: the commit's WAL writes, the group's lookups, one FTS5 segment, building each
 * statement) beside its cost per item. Under a stream of mail most messages arrive alone, so each
 * paid the fixed cost. A caller announces an item it will submit soon (`expect()`: a message being
 * parsed and authenticated, whose larger blobs are being fsynced); a group then waits up to `windowMs`
 * for the items announced before it began gathering, and takes whatever has arrived by then. Nothing
 * waits when nothing is expected, so a lone message is committed at once.
 */
export class GroupCommit<T> {
  private waiting: { items: T[]; settle: (err?: unknown) => void }[] = [];
  private running = false;
  /**
   * Tickets of items announced by expect() and neither submitted nor cancelled yet, in the order
   * they were announced (a Set iterates in insertion order: the first is the oldest).
   */
  private readonly expected = new Set<number>();
  private nextTicket = 0;
  private changed: (() => void) | null = null;

  constructor(
    private readonly commit: (items: T[]) => Promise<void | { durable: Promise<void> }>,
    private readonly opts: {
      /** Items per transaction at most: bounds lock time and memory. */
      maxItems?: number;
      /** How long a group may wait for expected items (0: never). */
      windowMs?: number;
    } = {},
  ) {}

  /**
   * Announces a submission to come. Call the returned function when it is submitted (submit(items,
   * expected) does) or when it will not be (a refusal, an error); calling it again does nothing.
   */
  expect(): () => void {
    const ticket = this.nextTicket++;
    this.expected.add(ticket);
    return () => {
      if (!this.expected.delete(ticket)) return;
      this.changed?.();
    };
  }

  submit(items: T[], expected?: () => void): Promise<void> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ items, settle: (err) => (err === undefined ? resolve() : reject(err)) });
      expected?.();
      this.changed?.();
      if (!this.running) void this.run();
    });
  }

  private get maxItems(): number {
    return this.opts.maxItems ?? 200;
  }

  private async run(): Promise<void> {
    this.running = true;
    try {
      while (this.waiting.length) {
        // Let I/O that already finished (other messages' blob fsyncs) join this group.
        await new Promise((r) => setImmediate(r));
        await this.gather();
        const group = [];
        let n = 0;
        while (this.waiting.length && (n === 0 || n + this.waiting[0]!.items.length <= this.maxItems)) {
          const w = this.waiting.shift()!;
          n += w.items.length;
          group.push(w);
        }
        try {
          const committed = await this.commit(group.flatMap((w) => w.items));
          settleWhenDurable(committed, group);
        } catch (err) {
          if (group.length === 1) {
            group[0]!.settle(err);
            continue;
          }
          for (const w of group) {
            try {
              settleWhenDurable(await this.commit(w.items), [w]);
            } catch (e) {
              w.settle(e);
            }
          }
        }
      }
    } finally {
      this.running = false;
    }
  }

  /**
   * Waits, up to the window, for the items announced before it began, while the group has room.
   * Items announced meanwhile are not waited for (they join if they come in time): under a steady
   * stream something is always announced, and a group that waited for those waited out the whole
   * window every time.
   */
  private async gather(): Promise<void> {
    const windowMs = this.opts.windowMs ?? 0;
    if (windowMs <= 0) return;
    const deadline = performance.now() + windowMs;
    const cutoff = this.nextTicket;
    while (this.oldestExpected() < cutoff && this.waitingItems() < this.maxItems) {
      const left = deadline - performance.now();
      if (left <= 0) return;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, left);
        this.changed = done;
        function done() {
          clearTimeout(timer);
          resolve();
        }
      });
      this.changed = null;
    }
  }

  /** The ticket of the oldest announced item not yet submitted or cancelled (Infinity: none). */
  private oldestExpected(): number {
    for (const ticket of this.expected) return ticket;
    return Infinity;
  }

  private waitingItems(): number {
    let n = 0;
    for (const w of this.waiting) n += w.items.length;
    return n;
  }
}

function settleWhenDurable(committed: void | { durable: Promise<void> }, group: { settle: (err?: unknown) => void }[]): void {
  if (!committed) {
    for (const w of group) w.settle();
    return;
  }
  committed.durable.then(
    () => group.forEach((w) => w.settle()),
    // Committed but not known to be on disk: the sender is told to try again (a retry may duplicate, never lose).
    (err: unknown) => group.forEach((w) => w.settle(err ?? new Error('commit not durable'))),
  );
}
